package chart

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator"
	"github.com/enipam/enipam/operator/demand"
)

// TestOperatorServiceAccountDoesItsJobAndNothingElse: the chart's RBAC
// for enipam-operator, against the real apiserver, impersonating its
// ServiceAccount with nothing but what the chart binds to it.
//
// First the real operator runs under that identity, with the flags the
// chart renders (leader election in the release namespace) and an EC2
// endpoint that does not answer: it becomes ready (its caches list and
// watch CiliumNodes, Nodes and ENIPolicies; its pod watch lists and
// watches the pods bound without an address), wins the Lease, writes the
// status of two overlapping ENIPolicies, records a PolicyConflict event
// (events.k8s.io) and its leader-election event (core, on the Lease), and
// releases the Lease when stopped; its logs hold no refusal.
//
// Then, call by call, what needs EC2 to happen in that run: merge patches
// of a CiliumNode's spec (the pool) and status, event patches. And what is
// outside its job is refused: reading Secrets, a plain get of a CiliumNode
// (reads go through the cache), creating, updating or deleting
// CiliumNodes, deleting or patching Nodes, changing a policy's spec,
// updating Deployments, creating, deleting or binding Pods, creating
// StaticIPClaims, other Leases, core events outside its namespace. Its
// pod reads are allowed: list and watch (the pods bound without an
// address, by field selector; RBAC cannot narrow a list by field), get
// (one pod, uncached). Its static-IP verbs are allowed: list and watch
// StatefulSets; list, patch (finalizer) and delete StaticIPClaims, patch
// their status.
func TestOperatorServiceAccountDoesItsJobAndNothingElse(t *testing.T) {
	m := installRBAC(t)
	cfg := as(t, "rbac-operator", authorizationv1.ResourceAttributes{Group: "cilium.io", Resource: "ciliumnodes", Verb: "list"})
	var d appsv1.Deployment
	m.typed(t, "Deployment", "rbac-operator", &d)
	opts := operatorOptions(t, &d)

	// The world: one node, its CiliumNode, two policies that both match it.
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-9-9.ec2.internal", Labels: map[string]string{"enipam.io/rbac-test": "yes"}},
		Spec:       corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-0123456789abcdef0"},
	}
	cn := &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: node.Name}}
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"enipam.io/rbac-test": "yes"}}
	first := &enipamv1alpha1.ENIPolicy{ObjectMeta: metav1.ObjectMeta{Name: "rbac-first"}, Spec: enipamv1alpha1.ENIPolicySpec{NodeSelector: selector, Priority: 1}}
	second := &enipamv1alpha1.ENIPolicy{ObjectMeta: metav1.ObjectMeta{Name: "rbac-second"}, Spec: enipamv1alpha1.ENIPolicySpec{NodeSelector: selector, Priority: 2}}
	for _, o := range []client.Object{node, cn, first, second} {
		if err := env.Client.Create(bg, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(bg, o) })
	}

	// The real operator under the ServiceAccount.
	opts.EC2Endpoint = "http://" + freeAddr(t)
	opts.EC2MaxAttempts = 1
	opts.MetricsAddress = "0"
	health := freeAddr(t)
	opts.HealthAddress = health
	awsCfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")}
	var logs lockedBuffer
	log := slog.New(slog.NewTextHandler(logTo(&logs), nil))
	// client-go's reflectors report a refused list or watch through klog.
	klog.SetSlogLogger(log)
	t.Cleanup(klog.ClearLogger)
	op, err := operator.New(opts, cfg, awsCfg, prometheus.NewRegistry(), log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	done := make(chan error, 1)
	go func() { done <- op.Run(ctx) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("operator stopped with %v", err)
			}
		}
	}
	t.Cleanup(stop)

	leaseKey := types.NamespacedName{Namespace: rbacNamespace, Name: opts.LeaderElectionID}
	eventually(t, "readiness (caches of CiliumNodes, Nodes, ENIPolicies synced)", 30*time.Second, func() bool {
		return httpStatus("http://"+health+"/readyz") == 200
	})
	eventually(t, "the Lease held", 30*time.Second, func() bool {
		var l coordinationv1.Lease
		return env.Client.Get(bg, leaseKey, &l) == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != ""
	})
	eventually(t, "both policies' status written", 30*time.Second, func() bool {
		var a, b enipamv1alpha1.ENIPolicy
		if env.Client.Get(bg, client.ObjectKeyFromObject(first), &a) != nil || env.Client.Get(bg, client.ObjectKeyFromObject(second), &b) != nil {
			return false
		}
		return a.Status.MatchedNodes == 1 && apimeta.IsStatusConditionTrue(a.Status.Conditions, enipamv1alpha1.ConditionAccepted) &&
			apimeta.IsStatusConditionTrue(b.Status.Conditions, enipamv1alpha1.ConditionConflict)
	})
	eventually(t, "PolicyConflict event (events.k8s.io) on rbac-second", 30*time.Second, func() bool {
		var list eventsv1.EventList
		if err := env.Client.List(bg, &list, client.InNamespace(metav1.NamespaceDefault)); err != nil {
			return false
		}
		return slices.ContainsFunc(list.Items, func(e eventsv1.Event) bool {
			return e.Regarding.Kind == "ENIPolicy" && e.Regarding.Name == second.Name && e.Reason == "PolicyConflict" && e.ReportingController == "enipam-operator"
		})
	})
	eventually(t, "leader-election event (core) on the Lease", 30*time.Second, func() bool {
		var list corev1.EventList
		if err := env.Client.List(bg, &list, client.InNamespace(rbacNamespace)); err != nil {
			return false
		}
		return slices.ContainsFunc(list.Items, func(e corev1.Event) bool {
			return e.InvolvedObject.Kind == "Lease" && e.InvolvedObject.Name == opts.LeaderElectionID && e.Reason == "LeaderElection"
		})
	})
	stop()
	var lease coordinationv1.Lease
	if err := env.Client.Get(bg, leaseKey, &lease); err != nil || lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "" {
		t.Errorf("Lease after stop: %v holder %v, want released", err, lease.Spec.HolderIdentity)
	}
	if l := strings.ToLower(logs.String()); strings.Contains(l, "forbidden") {
		t.Errorf("the operator met a refusal:\n%s", logs.String())
	}

	// Call by call.
	c := asClient(t, cfg)
	var cnList ciliumv2.CiliumNodeList
	allowed(t, "list CiliumNodes", c.List(bg, &cnList))
	w, err := c.Watch(bg, &ciliumv2.CiliumNodeList{})
	allowed(t, "watch CiliumNodes", err)
	if err == nil {
		w.Stop()
	}
	orig := &ciliumv2.CiliumNode{}
	if err := env.Client.Get(bg, client.ObjectKeyFromObject(cn), orig); err != nil {
		t.Fatal(err)
	}
	withPool := orig.DeepCopy()
	withPool.Spec.IPAM.Pool = ipamtypes.AllocationMap{"10.0.9.20": {Resource: "eni-0a1b2c3d4e5f60718"}}
	allowed(t, "merge-patch a CiliumNode's pool", c.Patch(bg, withPool, client.MergeFrom(orig)))
	withStatus := orig.DeepCopy()
	withStatus.Status.IPAM.OperatorStatus.Error = "subnet subnet-0a1b2c3d is full"
	allowed(t, "merge-patch a CiliumNode's status", c.Status().Patch(bg, withStatus, client.MergeFrom(orig)))
	var nodes corev1.NodeList
	allowed(t, "list Nodes", c.List(bg, &nodes))
	w, err = c.Watch(bg, &corev1.NodeList{})
	allowed(t, "watch Nodes", err)
	if err == nil {
		w.Stop()
	}
	var policies enipamv1alpha1.ENIPolicyList
	allowed(t, "list ENIPolicies", c.List(bg, &policies))
	waiting := &client.ListOptions{FieldSelector: fields.ParseSelectorOrDie(demand.Selector)}
	allowed(t, "list pods bound without an address", c.List(bg, &corev1.PodList{}, waiting))
	w, err = c.Watch(bg, &corev1.PodList{}, waiting)
	allowed(t, "watch pods bound without an address", err)
	if err == nil {
		w.Stop()
	}
	var sets appsv1.StatefulSetList
	allowed(t, "list StatefulSets", c.List(bg, &sets))
	claim := &enipamv1alpha1.StaticIPClaim{ObjectMeta: metav1.ObjectMeta{Name: "db-0", Namespace: rbacNamespace},
		Spec: enipamv1alpha1.StaticIPClaimSpec{ReclaimPolicy: enipamv1alpha1.ReclaimRetain}}
	if err := env.Client.Create(bg, claim); err != nil {
		t.Fatal(err)
	}
	var claims enipamv1alpha1.StaticIPClaimList
	allowed(t, "list StaticIPClaims", c.List(bg, &claims))
	withFinalizer := claim.DeepCopy()
	withFinalizer.Finalizers = []string{enipamv1alpha1.StaticIPClaimFinalizer}
	allowed(t, "merge-patch a StaticIPClaim (finalizer)", c.Patch(bg, withFinalizer, client.MergeFrom(claim)))
	withClaimStatus := withFinalizer.DeepCopy()
	withClaimStatus.Status.Phase = enipamv1alpha1.ClaimPending
	allowed(t, "merge-patch a StaticIPClaim's status", c.Status().Patch(bg, withClaimStatus, client.MergeFrom(withFinalizer)))
	unfinalized := withClaimStatus.DeepCopy()
	unfinalized.Finalizers = nil
	allowed(t, "merge-patch a StaticIPClaim (finalizer removed)", c.Patch(bg, unfinalized, client.MergeFrom(withClaimStatus)))
	denied(t, "create a StaticIPClaim", c.Create(bg, &enipamv1alpha1.StaticIPClaim{ObjectMeta: metav1.ObjectMeta{Name: "db-9", Namespace: rbacNamespace}}))
	allowed(t, "delete a StaticIPClaim (its policy released it)", c.Delete(bg, unfinalized.DeepCopy()))

	ev := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: "rbac-operator-event", Namespace: metav1.NamespaceDefault},
		EventTime:           metav1.NowMicro(),
		Regarding:           corev1.ObjectReference{APIVersion: "cilium.io/v2", Kind: "CiliumNode", Name: cn.Name},
		Reason:              "SubnetExhausted",
		Action:              "Allocate",
		Type:                corev1.EventTypeWarning,
		Note:                "subnet full",
		ReportingController: "enipam-operator",
		ReportingInstance:   "enipam-operator-test",
	}
	allowed(t, "create an events.k8s.io Event", c.Create(bg, ev))
	t.Cleanup(func() { _ = env.Client.Delete(bg, ev) })
	evSeries := ev.DeepCopy()
	evSeries.Series = &eventsv1.EventSeries{Count: 2, LastObservedTime: metav1.NowMicro()}
	allowed(t, "patch an events.k8s.io Event (series)", c.Patch(bg, evSeries, client.MergeFrom(ev)))
	coreEv := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "rbac-operator-core-event", Namespace: rbacNamespace},
		InvolvedObject: corev1.ObjectReference{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Namespace: rbacNamespace, Name: opts.LeaderElectionID},
		Reason:         "LeaderElection", Message: "became leader", Type: corev1.EventTypeNormal, Count: 1,
	}
	allowed(t, "create a core Event in the release namespace", c.Create(bg, coreEv))
	t.Cleanup(func() { _ = env.Client.Delete(bg, coreEv) })
	coreEv2 := coreEv.DeepCopy()
	coreEv2.Count = 2
	allowed(t, "patch a core Event in the release namespace", c.Patch(bg, coreEv2, client.MergeFrom(coreEv)))

	// Outside its job.
	deployment := d.DeepCopy()
	if err := env.Client.Create(bg, deployment); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(bg, deployment) })
	denied(t, "get a Secret in its namespace", c.Get(bg, client.ObjectKey{Namespace: rbacNamespace, Name: "anything"}, &corev1.Secret{}))
	denied(t, "list Secrets", c.List(bg, &corev1.SecretList{}))
	denied(t, "get a CiliumNode without the cache", c.Get(bg, client.ObjectKeyFromObject(cn), &ciliumv2.CiliumNode{}))
	denied(t, "create a CiliumNode", c.Create(bg, &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: "rbac-created"}}))
	denied(t, "update a CiliumNode", c.Update(bg, withPool.DeepCopy()))
	denied(t, "delete a CiliumNode", c.Delete(bg, orig.DeepCopy()))
	denied(t, "delete a Node", c.Delete(bg, node.DeepCopy()))
	labelled := node.DeepCopy()
	labelled.Labels = map[string]string{"x": "y"}
	denied(t, "patch a Node", c.Patch(bg, labelled, client.MergeFrom(node)))
	changed := first.DeepCopy()
	changed.Spec.Priority = 7
	denied(t, "patch an ENIPolicy's spec", c.Patch(bg, changed, client.MergeFrom(first)))
	denied(t, "delete an ENIPolicy", c.Delete(bg, first.DeepCopy()))
	scaled := deployment.DeepCopy()
	scaled.Spec.Replicas = ptr(int32(5))
	denied(t, "update a Deployment", c.Update(bg, scaled))
	err = c.Get(bg, client.ObjectKey{Namespace: rbacNamespace, Name: "db-0"}, &corev1.Pod{})
	allowed(t, "get a Pod (uncached)", client.IgnoreNotFound(err))
	denied(t, "delete a Pod", c.Delete(bg, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: rbacNamespace, Name: "db-0"}}))
	denied(t, "bind a Pod", c.SubResource("binding").Create(bg, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: rbacNamespace, Name: "db-0"}},
		&corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: rbacNamespace, Name: "db-0"}, Target: corev1.ObjectReference{Kind: "Node", Name: node.Name}}))
	denied(t, "create a Pod", c.Create(bg, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: rbacNamespace, Name: "rbac-created"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}}))
	denied(t, "get another Lease in its namespace", c.Get(bg, client.ObjectKey{Namespace: rbacNamespace, Name: "someone-else"}, &coordinationv1.Lease{}))
	denied(t, "get a Lease in kube-system", c.Get(bg, client.ObjectKey{Namespace: "kube-system", Name: opts.LeaderElectionID}, &coordinationv1.Lease{}))
	denied(t, "create a core Event in default", c.Create(bg, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "rbac-core-default", Namespace: metav1.NamespaceDefault},
		InvolvedObject: corev1.ObjectReference{Kind: "CiliumNode", Name: cn.Name}, Reason: "X",
	}))
}

func ptr[T any](v T) *T { return &v }
