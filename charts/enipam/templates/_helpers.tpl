{{/* Chart name, overridable. */}}
{{- define "enipam.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Release-qualified base name of every object; room is left for the
component suffixes ("-operator", "-agent", "-leader-election"). */}}
{{- define "enipam.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "enipam.operator.fullname" -}}
{{ include "enipam.fullname" . }}-operator
{{- end }}

{{- define "enipam.agent.fullname" -}}
{{ include "enipam.fullname" . }}-agent
{{- end }}

{{- define "enipam.scheduler.fullname" -}}
{{ include "enipam.fullname" . }}-scheduler
{{- end }}

{{/* The chart's own labels of every object. */}}
{{- define "enipam.ownLabels" -}}
{{- toYaml (dict
  "helm.sh/chart" (printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-")
  "app.kubernetes.io/name" (include "enipam.name" .)
  "app.kubernetes.io/instance" .Release.Name
  "app.kubernetes.io/version" .Chart.AppVersion
  "app.kubernetes.io/managed-by" .Release.Service
  "app.kubernetes.io/part-of" "enipam") }}
{{- end }}

{{/* Labels of every object: the chart's own, then commonLabels (a key
the chart sets keeps the chart's value; each key once). */}}
{{- define "enipam.labels" -}}
{{- toYaml (merge (fromYaml (include "enipam.ownLabels" .)) (.Values.commonLabels | default dict)) }}
{{- end }}

{{/* Labels (YAML text) with a map of more over them, each key once:
(list labels more). The object's own label values (a ServiceMonitor's,
the dashboard's) win over commonLabels. */}}
{{- define "enipam.labelsWith" -}}
{{- toYaml (mergeOverwrite (fromYaml (index . 0)) (index . 1 | default dict)) }}
{{- end }}

{{/* A pod template's labels: (list . "operator" podLabels). commonLabels,
then podLabels over them, then the component's own labels, which its
selector matches, over both; each key once. */}}
{{- define "enipam.podLabels" -}}
{{- $root := index . 0 -}}
{{- $own := fromYaml (include "enipam.ownLabels" $root) -}}
{{- $_ := set $own "app.kubernetes.io/component" (index . 1) -}}
{{- toYaml (mergeOverwrite (dict) ($root.Values.commonLabels | default dict) (index . 2 | default dict) $own) }}
{{- end }}

{{/* Selector labels of one component: (list . "operator"). */}}
{{- define "enipam.selectorLabels" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: {{ include "enipam.name" $root }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end }}

{{/* Labels of one component's objects: (list . "operator"). */}}
{{- define "enipam.componentLabels" -}}
{{- $l := fromYaml (include "enipam.labels" (index . 0)) -}}
{{- toYaml (set $l "app.kubernetes.io/component" (index . 1)) }}
{{- end }}

{{- define "enipam.operator.serviceAccountName" -}}
{{- if .Values.operator.serviceAccount.create }}
{{- default (include "enipam.operator.fullname" .) .Values.operator.serviceAccount.name }}
{{- else }}
{{- required "operator.serviceAccount.name is required when operator.serviceAccount.create is false" .Values.operator.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "enipam.agent.serviceAccountName" -}}
{{- if .Values.agent.serviceAccount.create }}
{{- default (include "enipam.agent.fullname" .) .Values.agent.serviceAccount.name }}
{{- else }}
{{- required "agent.serviceAccount.name is required when agent.serviceAccount.create is false" .Values.agent.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "enipam.scheduler.serviceAccountName" -}}
{{- if .Values.scheduler.serviceAccount.create }}
{{- default (include "enipam.scheduler.fullname" .) .Values.scheduler.serviceAccount.name }}
{{- else }}
{{- required "scheduler.serviceAccount.name is required when scheduler.serviceAccount.create is false" .Values.scheduler.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Image reference: (list . .Values.operator.image). */}}
{{- define "enipam.image" -}}
{{- $root := index . 0 -}}
{{- $img := index . 1 -}}
{{- if $img.digest -}}
{{ $img.repository }}@{{ $img.digest }}
{{- else -}}
{{ $img.repository }}:{{ $img.tag | default $root.Chart.AppVersion }}
{{- end -}}
{{- end }}

{{/* Env vars that point client-go at the apiserver directly. */}}
{{- define "enipam.apiserverEnv" -}}
{{- if .Values.k8sServiceHost }}
- name: KUBERNETES_SERVICE_HOST
  value: {{ .Values.k8sServiceHost | quote }}
- name: KUBERNETES_SERVICE_PORT
  value: {{ .Values.k8sServicePort | default "443" | quote }}
{{- end }}
{{- end }}

{{/* Checks across values that the schema cannot express; each failure
names the values and the fix. */}}
{{- define "enipam.validate" -}}
{{- if not .Values.clusterName }}
{{- fail "clusterName is required: enipam tags every ENI it creates with it and collects only leaked ENIs carrying it. Set it to a name unique in the AWS account: helm install ... --set clusterName=<name>" }}
{{- end }}
{{- $p := .Values.pool }}
{{- if and (gt (int $p.maxAllocate) 0) (gt (int $p.minAllocate) (int $p.maxAllocate)) }}
{{- fail (printf "pool.minAllocate (%d) exceeds pool.maxAllocate (%d)" (int $p.minAllocate) (int $p.maxAllocate)) }}
{{- end }}
{{- if and (gt (int $p.maxAllocate) 0) (gt (int $p.preAllocate) (int $p.maxAllocate)) }}
{{- fail (printf "pool.preAllocate (%d) exceeds pool.maxAllocate (%d)" (int $p.preAllocate) (int $p.maxAllocate)) }}
{{- end }}
{{- if and (eq $p.headroom "Adaptive") (not .Values.operator.podDemand) }}
{{- fail "pool.headroom Adaptive learns from the pod watch: it needs operator.podDemand true" }}
{{- end }}
{{- range $k, $v := .Values.defaultPolicy.tags }}
{{- if or (hasPrefix "enipam.io/" $k) (hasPrefix "aws:" $k) }}
{{- fail (printf "defaultPolicy.tags: the key %q is reserved (keys starting with enipam.io/ or aws: are enipam's and AWS's own)" $k) }}
{{- end }}
{{- end }}
{{- if and .Values.agent.enabled (gt (int .Values.agent.ingressRulePriority) 0) (ge (int .Values.agent.ingressRulePriority) (int .Values.agent.egressRulePriority)) }}
{{- fail (printf "agent.ingressRulePriority (%d) must be lower than agent.egressRulePriority (%d), or 0 for none: traffic to a pod must reach the main table before the pod's egress rule" (int .Values.agent.ingressRulePriority) (int .Values.agent.egressRulePriority)) }}
{{- end }}
{{- if and (gt (int .Values.operator.replicas) 1) (not .Values.operator.leaderElection.enabled) }}
{{- fail (printf "operator.replicas is %d but operator.leaderElection.enabled is false: replicas would allocate from EC2 at the same time. Enable leader election or run 1 replica" (int .Values.operator.replicas)) }}
{{- end }}
{{- if eq (int .Values.operator.metricsPort) (int .Values.operator.healthPort) }}
{{- fail "operator.metricsPort and operator.healthPort must differ" }}
{{- end }}
{{- if eq (int .Values.agent.metricsPort) (int .Values.agent.healthPort) }}
{{- fail "agent.metricsPort and agent.healthPort must differ" }}
{{- end }}
{{- if .Values.scheduler.enabled }}
{{- $s := .Values.scheduler }}
{{- if eq $s.schedulerName "default-scheduler" }}
{{- fail "scheduler.schedulerName must not be default-scheduler: enipam's scheduler runs beside the cluster's own. To give the default scheduler the extender, see docs/install.md (self-managed control planes)" }}
{{- end }}
{{- if eq $s.leaderElection.leaseName "kube-scheduler" }}
{{- fail "scheduler.leaderElection.leaseName must not be kube-scheduler: that is the default scheduler's Lease, and enipam's scheduler would take turns with it" }}
{{- end }}
{{- if and (gt (int $s.replicas) 1) (not $s.leaderElection.enabled) }}
{{- fail (printf "scheduler.replicas is %d but scheduler.leaderElection.enabled is false: replicas would schedule the same pods at the same time. Enable leader election or run 1 replica" (int $s.replicas)) }}
{{- end }}
{{- $ports := list (int $s.kubeScheduler.port) (int $s.extender.port) (int $s.extender.healthPort) (int $s.extender.metricsPort) }}
{{- if ne (len (uniq $ports)) 4 }}
{{- fail (printf "scheduler.kubeScheduler.port and scheduler.extender's port, healthPort and metricsPort must differ (they share the pod): %v" $ports) }}
{{- end }}
{{- end }}
{{- if and .Values.operator.hostNetwork .Values.agent.enabled }}
{{- $op := list (int .Values.operator.metricsPort) (int .Values.operator.healthPort) }}
{{- if or (has (int .Values.agent.metricsPort) $op) (has (int .Values.agent.healthPort) $op) }}
{{- fail "the operator's and the agent's ports must differ: both run on the host network and may share a node" }}
{{- end }}
{{- end }}
{{- end }}

{{/* A series selector of the alerts: (list . "metric" "matchers"), with
prometheusRule.seriesSelector added. */}}
{{- define "enipam.series" -}}
{{- $root := index . 0 -}}
{{- $sel := tpl $root.Values.prometheusRule.seriesSelector $root -}}
{{- printf "%s{%s}" (index . 1) (join "," (compact (list (index . 2) $sel))) -}}
{{- end }}

{{/* The runbook of an alert: (list . "anchor"), the alert's name in
lower case, which is the anchor GitHub gives its section of
docs/operations.md. */}}
{{- define "enipam.runbook" -}}
{{- $root := index . 0 -}}
{{- $base := $root.Values.prometheusRule.runbookURL | default (printf "%s/blob/main/docs/operations.md" $root.Chart.Home) -}}
{{- printf "%s#%s" $base (index . 1) -}}
{{- end }}

{{/*
The upstream kube-scheduler's image: by digest if one is set, else by tag;
an empty tag is the cluster's own version, v<major>.<minor>.<patch> of
.Capabilities.KubeVersion without a vendor's suffix (v1.33.4-eks-… runs
registry.k8s.io/kube-scheduler:v1.33.4), so the scheduler is never newer
than the apiserver nor of another minor.
*/}}
{{- define "enipam.kubeScheduler.image" -}}
{{- $img := .Values.scheduler.kubeScheduler.image -}}
{{- if $img.digest -}}
{{- printf "%s@%s" $img.repository $img.digest -}}
{{- else if $img.tag -}}
{{- printf "%s:%s" $img.repository $img.tag -}}
{{- else -}}
{{- $v := semver .Capabilities.KubeVersion.Version -}}
{{- printf "%s:v%d.%d.%d" $img.repository $v.Major $v.Minor $v.Patch -}}
{{- end -}}
{{- end }}
