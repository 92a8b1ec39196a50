package chart

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestRenderedManifestsAreCreatedInTheAPIServer: every object the chart
// renders, with the defaults (plus the default ENIPolicy) and with every
// option on, is created in the
// real kube-apiserver with strict field validation (a misspelled or
// misplaced field is an error, not silently dropped) and read back: RBAC,
// ServiceAccounts, Services, PDB, Deployment, DaemonSet, the ENIPolicy
// (through its CRD's CEL rules), the uninstall hook's objects, the
// dashboard's ConfigMap, the ServiceMonitors and the PrometheusRule.
//
// ServiceMonitor is Prometheus Operator's kind, not installed here. The
// test shows the apiserver refuses it without its CRD (so
// serviceMonitor.enabled needs Prometheus Operator), then installs a
// stand-in CRD for monitoring.coreos.com/v1 ServiceMonitor whose schema
// covers the fields the chart writes and creates them against it; the
// same for PrometheusRule.
func TestRenderedManifestsAreCreatedInTheAPIServer(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"defaults", []string{"--set", "clusterName=apply", "--set", "defaultPolicy.enabled=true", "--set", "defaultPolicy.name=apply-defaults"}},
		{"every option on", []string{"-f", ciValues(t, "full-values.yaml"), "--set", "fullnameOverride=apply-full", "--set", "defaultPolicy.name=apply-full"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := "enipam-apply-" + map[string]string{"defaults": "defaults", "every option on": "full"}[tc.name]
			createNamespace(t, ns)
			m := render(t, "enipam", ns, tc.args...)

			if sms := m.ofKind("ServiceMonitor"); len(sms) > 0 {
				c := newClient(t)
				err := c.Create(bg, sms[0].DeepCopy())
				if !meta.IsNoMatchError(err) {
					t.Fatalf("ServiceMonitor without Prometheus Operator's CRD: %v, want no match for the kind", err)
				}
				installServiceMonitorCRD(t)
			}
			if prs := m.ofKind("PrometheusRule"); len(prs) > 0 {
				if err := newClient(t).Create(bg, prs[0].DeepCopy()); !meta.IsNoMatchError(err) {
					t.Fatalf("PrometheusRule without Prometheus Operator's CRD: %v, want no match for the kind", err)
				}
				installPrometheusRuleCRD(t)
			}

			c := newClient(t) // a fresh REST mapper that knows the new kind
			for _, u := range m {
				obj := u.DeepCopy()
				if err := c.Create(bg, obj, client.FieldValidation("Strict")); err != nil {
					t.Errorf("creating %s/%s: %v", u.GetKind(), u.GetName(), err)
					continue
				}
				t.Cleanup(func() { _ = c.Delete(bg, obj) })
			}
			for _, u := range m {
				got := &unstructured.Unstructured{}
				got.SetGroupVersionKind(u.GroupVersionKind())
				if err := c.Get(bg, client.ObjectKeyFromObject(u), got); err != nil {
					t.Errorf("reading back %s/%s: %v", u.GetKind(), u.GetName(), err)
				}
			}
		})
	}
}

// newClient returns an admin client with its own REST mapper.
func newClient(t *testing.T) client.WithWatch {
	t.Helper()
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func createNamespace(t *testing.T, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := env.Client.Create(bg, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// installServiceMonitorCRD installs, for the rest of the package, a
// stand-in for Prometheus Operator's ServiceMonitor CRD: its group, kind
// and scope, with a schema for the subset of fields the chart writes
// (anything else is unknown, so strict validation refuses it).
func installServiceMonitorCRD(t *testing.T) {
	t.Helper()
	str := apiextensionsv1.JSONSchemaProps{Type: "string"}
	strMap := apiextensionsv1.JSONSchemaProps{Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Schema: &str}}
	strList := apiextensionsv1.JSONSchemaProps{Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &str}}
	obj := func(props map[string]apiextensionsv1.JSONSchemaProps, required ...string) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "object", Properties: props, Required: required}
	}
	list := func(item apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &item}}
	}
	spec := obj(map[string]apiextensionsv1.JSONSchemaProps{
		"selector": obj(map[string]apiextensionsv1.JSONSchemaProps{
			"matchLabels":      strMap,
			"matchExpressions": list(obj(map[string]apiextensionsv1.JSONSchemaProps{"key": str, "operator": str, "values": strList})),
		}),
		"namespaceSelector": obj(map[string]apiextensionsv1.JSONSchemaProps{"any": {Type: "boolean"}, "matchNames": strList}),
		"endpoints": list(obj(map[string]apiextensionsv1.JSONSchemaProps{
			"port": str, "path": str, "interval": str, "scrapeTimeout": str,
			"relabelings": list(obj(map[string]apiextensionsv1.JSONSchemaProps{
				"sourceLabels": strList, "targetLabel": str, "action": str, "regex": str, "replacement": str, "separator": str,
			})),
		})),
	}, "selector", "endpoints")
	installMonitoringCRD(t, "servicemonitors", "ServiceMonitor", spec)
}

// installPrometheusRuleCRD installs a stand-in for Prometheus Operator's
// PrometheusRule CRD, with a schema for the fields the chart writes.
func installPrometheusRuleCRD(t *testing.T) {
	t.Helper()
	str := apiextensionsv1.JSONSchemaProps{Type: "string"}
	strMap := apiextensionsv1.JSONSchemaProps{Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Schema: &str}}
	obj := func(props map[string]apiextensionsv1.JSONSchemaProps, required ...string) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "object", Properties: props, Required: required}
	}
	list := func(item apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &item}}
	}
	spec := obj(map[string]apiextensionsv1.JSONSchemaProps{
		"groups": list(obj(map[string]apiextensionsv1.JSONSchemaProps{
			"name": str,
			"rules": list(obj(map[string]apiextensionsv1.JSONSchemaProps{
				"alert": str, "record": str, "expr": str, "for": str, "labels": strMap, "annotations": strMap,
			}, "expr")),
		}, "name")),
	})
	installMonitoringCRD(t, "prometheusrules", "PrometheusRule", spec)
}

// installMonitoringCRD installs, for the rest of the package, a
// monitoring.coreos.com/v1 kind with the given spec schema.
func installMonitoringCRD(t *testing.T, plural, kind string, spec apiextensionsv1.JSONSchemaProps) {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + ".monitoring.coreos.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "monitoring.coreos.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Singular: strings.ToLower(kind), Kind: kind, ListKind: kind + "List"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": spec},
				}},
			}},
		},
	}
	if err := env.Client.Create(bg, crd); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(bg, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
			return false, err
		}
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("%s stand-in CRD never established: %v", kind, err)
	}
}
