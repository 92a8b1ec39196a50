package chart

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	awstypes "github.com/cilium/cilium/pkg/aws/types"
	iputil "github.com/cilium/cilium/pkg/ip"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/nodeagent/agent"
	"github.com/enipam/enipam/nodeagent/routing"
	"github.com/enipam/enipam/nodeagent/routing/routingtest"
)

// TestAgentServiceAccountDoesItsJobAndNothingElse: the chart's RBAC for
// enipam-agent with a start-up taint configured, impersonating its
// ServiceAccount with its node's name (as its pod-bound token carries it),
// under the chart's node restriction. The real agent core runs under that
// identity with the
// settings the chart renders, on an in-memory kernel holding the link of
// the node's one secondary ENI: it reads its NodeRouting and CiliumNode,
// routes the pool IP, turns ready, reports the IP in the NodeRouting's
// status, removes the start-up taint from its Node and records its
// RoutingReady event. Call by call: listing and watching its CiliumNode
// and NodeRouting by name, patching the NodeRouting's status and the Node,
// and creating and patching events are allowed; writing CiliumNodes in any
// way (the operator's job), writing a NodeRouting's spec, a plain get,
// Secrets, listing Nodes, policies, Deployments and Leases are refused.
func TestAgentServiceAccountDoesItsJobAndNothingElse(t *testing.T) {
	const taint = "enipam.io/agent-not-ready"
	m := installRBAC(t, "--set", "agent.startupTaintKey="+taint)
	cfg := as(t, "rbac-agent", authorizationv1.ResourceAttributes{Group: "cilium.io", Resource: "ciliumnodes", Verb: "watch"})
	var ds appsv1.DaemonSet
	m.typed(t, "DaemonSet", "rbac-agent", &ds)

	// The node: a CiliumNode with one secondary ENI and one pool IP on it,
	// written as the operator does (status first, then the pool).
	const mac = "02:00:00:00:09:01"
	cn := &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-9-10.ec2.internal"}}
	if err := env.Client.Create(bg, cn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(bg, cn) })
	cn.Status.ENI.ENIs = map[string]awstypes.ENI{"eni-rbac": {
		ID: "eni-rbac", Number: 1, MAC: mac,
		Subnet: awstypes.AwsSubnet{ID: "subnet-rbac", CIDR: iputil.PrefixFrom(netip.MustParsePrefix("10.0.9.0/24"))},
	}}
	if err := env.Client.Status().Update(bg, cn); err != nil {
		t.Fatal(err)
	}
	cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{"10.0.9.30": {Resource: "eni-rbac"}}
	if err := env.Client.Update(bg, cn); err != nil {
		t.Fatal(err)
	}
	nr := &enipamv1alpha1.NodeRouting{ObjectMeta: metav1.ObjectMeta{Name: cn.Name}, Spec: enipamv1alpha1.NodeRoutingSpec{FirstInterfaceIndex: 1}}
	if err := env.Client.Create(bg, nr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(bg, nr) })
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: cn.Name}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: taint, Effect: corev1.TaintEffectNoSchedule}}}}
	if err := env.Client.Create(bg, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(bg, node) })
	// The node restriction in force, and the agent's identity as its
	// pod-bound token gives it: the ServiceAccount on its node.
	installNodeRestriction(t, m, cn.Name)
	onNode(cfg, cn.Name)
	hw, _ := net.ParseMAC(mac)
	host := &routingtest.Host{}
	host.AddLink(routing.Link{Index: 3, Name: "eth1", MAC: hw, MTU: 1500, RPFilter: 1})

	// The real agent under the ServiceAccount, with the chart's settings.
	conf := agentOptions(t, &ds).Config
	conf.NodeName = cn.Name
	var logs lockedBuffer
	log := slog.New(slog.NewTextHandler(logTo(&logs), nil))
	klog.SetSlogLogger(log)
	t.Cleanup(klog.ClearLogger)
	a, err := agent.New(conf, cfg, host, prometheus.NewRegistry(), log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	done := make(chan error, 1)
	go func() { done <- a.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent stopped with %v", err)
		}
	})
	eventually(t, "the pool IP routed and the agent ready", 30*time.Second, func() bool {
		rules, _ := host.Rules()
		return a.Ready() == nil && slices.ContainsFunc(rules, func(r routing.Rule) bool {
			return r.Src == netip.MustParsePrefix("10.0.9.30/32") && r.Table == routing.TableOffset+1
		})
	})
	eventually(t, "the pool IP reported routed", 30*time.Second, func() bool {
		got := &enipamv1alpha1.NodeRouting{}
		return env.Client.Get(bg, client.ObjectKeyFromObject(nr), got) == nil && got.Status.Routes("eni-rbac", "10.0.9.30")
	})
	eventually(t, "the start-up taint removed", 30*time.Second, func() bool {
		got := &corev1.Node{}
		return env.Client.Get(bg, client.ObjectKeyFromObject(node), got) == nil &&
			!slices.ContainsFunc(got.Spec.Taints, func(t corev1.Taint) bool { return t.Key == taint })
	})
	eventually(t, "RoutingReady event on the CiliumNode", 30*time.Second, func() bool {
		var list corev1.EventList
		if err := env.Client.List(bg, &list, client.InNamespace(metav1.NamespaceDefault)); err != nil {
			return false
		}
		return slices.ContainsFunc(list.Items, func(e corev1.Event) bool {
			return e.InvolvedObject.Kind == "CiliumNode" && e.InvolvedObject.Name == cn.Name && e.Reason == agent.ReasonRoutingReady
		})
	})
	if l := strings.ToLower(logs.String()); strings.Contains(l, "forbidden") {
		t.Errorf("the agent met a refusal:\n%s", logs.String())
	}

	// Call by call.
	c := asClient(t, cfg)
	own := &client.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", cn.Name)}
	var list ciliumv2.CiliumNodeList
	allowed(t, "list its CiliumNode by name", c.List(bg, &list, own))
	if len(list.Items) != 1 {
		t.Errorf("listed %d CiliumNodes, want its own", len(list.Items))
	}
	w, err := c.Watch(bg, &ciliumv2.CiliumNodeList{}, own)
	allowed(t, "watch its CiliumNode by name", err)
	if err == nil {
		w.Stop()
	}
	var nrs enipamv1alpha1.NodeRoutingList
	allowed(t, "list its NodeRouting by name", c.List(bg, &nrs, own))
	w, err = c.Watch(bg, &enipamv1alpha1.NodeRoutingList{}, own)
	allowed(t, "watch its NodeRouting by name", err)
	if err == nil {
		w.Stop()
	}
	currentNR := &enipamv1alpha1.NodeRouting{}
	if err := env.Client.Get(bg, client.ObjectKeyFromObject(nr), currentNR); err != nil {
		t.Fatal(err)
	}
	reportedNR := currentNR.DeepCopy()
	reportedNR.Status.RoutedIPs++
	allowed(t, "patch its NodeRouting's status", c.Status().Patch(bg, reportedNR, client.MergeFrom(currentNR)))
	respec := currentNR.DeepCopy()
	respec.Spec.FirstInterfaceIndex = 0
	denied(t, "patch a NodeRouting's spec", c.Patch(bg, respec, client.MergeFrom(currentNR)))
	denied(t, "get a NodeRouting (it lists by name)", c.Get(bg, client.ObjectKeyFromObject(nr), &enipamv1alpha1.NodeRouting{}))
	denied(t, "create a NodeRouting", c.Create(bg, &enipamv1alpha1.NodeRouting{ObjectMeta: metav1.ObjectMeta{Name: "rbac-agent-created"}}))
	denied(t, "delete a NodeRouting", c.Delete(bg, currentNR.DeepCopy()))
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "rbac-agent-event", Namespace: metav1.NamespaceDefault},
		InvolvedObject: corev1.ObjectReference{APIVersion: "cilium.io/v2", Kind: "CiliumNode", Name: cn.Name},
		Reason:         agent.ReasonLinkNotFound, Message: "no link", Type: corev1.EventTypeWarning, Count: 1,
	}
	allowed(t, "create an Event", c.Create(bg, ev))
	t.Cleanup(func() { _ = env.Client.Delete(bg, ev) })
	ev2 := ev.DeepCopy()
	ev2.Count = 2
	allowed(t, "patch an Event", c.Patch(bg, ev2, client.MergeFrom(ev)))

	// Outside its job.
	current := &ciliumv2.CiliumNode{}
	if err := env.Client.Get(bg, client.ObjectKeyFromObject(cn), current); err != nil {
		t.Fatal(err)
	}
	grown := current.DeepCopy()
	grown.Spec.IPAM.Pool["10.0.9.31"] = ipamtypes.AllocationIP{Resource: "eni-rbac"}
	denied(t, "patch a CiliumNode's pool", c.Patch(bg, grown, client.MergeFrom(current)))
	marked := current.DeepCopy()
	marked.Status.IPAM.ReleaseIPs = map[string]ipamtypes.IPReleaseStatus{"10.0.9.30": "ready-for-release"}
	denied(t, "patch a CiliumNode's status", c.Status().Patch(bg, marked, client.MergeFrom(current)))
	denied(t, "update a CiliumNode", c.Update(bg, grown.DeepCopy()))
	denied(t, "create a CiliumNode", c.Create(bg, &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: "rbac-agent-created"}}))
	denied(t, "delete a CiliumNode", c.Delete(bg, current.DeepCopy()))
	denied(t, "get a CiliumNode (it lists by name)", c.Get(bg, client.ObjectKeyFromObject(cn), &ciliumv2.CiliumNode{}))
	denied(t, "get a Secret", c.Get(bg, client.ObjectKey{Namespace: rbacNamespace, Name: "anything"}, &corev1.Secret{}))
	denied(t, "list Secrets", c.List(bg, &corev1.SecretList{}))
	denied(t, "list Nodes", c.List(bg, &corev1.NodeList{}))
	denied(t, "get a Node (it patches)", c.Get(bg, client.ObjectKeyFromObject(node), &corev1.Node{}))
	denied(t, "delete a Node", c.Delete(bg, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: cn.Name}}))
	denied(t, "list ENIPolicies", c.List(bg, &enipamv1alpha1.ENIPolicyList{}))
	denied(t, "update a Deployment", c.Update(bg, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: rbacNamespace, Name: "rbac-operator"}}))
	denied(t, "create a Lease", c.Create(bg, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: rbacNamespace, Name: "enipam-operator"}}))
	denied(t, "create an events.k8s.io Event", c.Create(bg, &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "rbac-agent-new-event"},
		EventTime:  metav1.NowMicro(), Reason: "X", Action: "Y", Type: corev1.EventTypeNormal,
		Regarding: corev1.ObjectReference{Kind: "CiliumNode", Name: cn.Name}, ReportingController: "enipam-agent", ReportingInstance: "x",
	}))
}
