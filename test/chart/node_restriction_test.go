package chart

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// TestAgentWritesOnlyItsOwnNode: the chart's RBAC for enipam-agent with a
// start-up taint, and its node-restriction ValidatingAdmissionPolicy, on
// the real kube-apiserver. Two Nodes, node-a and node-b, each with an
// agent pod under the chart's ServiceAccount; each agent holds a token
// bound to its pod (TokenRequest, boundObjectRef kind Pod, as the kubelet
// mounts it), which names the pod's node. Before the policy, RBAC alone
// lets node-a's token write node-b's report. With it: node-a's token is
// refused on node-b's NodeRouting status and Node with a message naming
// both nodes, and admitted on its own NodeRouting status and start-up
// taint (a capacity it writes through the status subresource does not
// reach the operator's spec); on its own Node, a label, another taint or
// cordoning it is refused; a token of the ServiceAccount bound to no pod (no node name)
// is refused even on node-a's objects.
func TestAgentWritesOnlyItsOwnNode(t *testing.T) {
	const taint = "enipam.io/agent-not-ready"
	m := installRBAC(t, "--set", "agent.startupTaintKey="+taint)
	as(t, "rbac-agent", authorizationv1.ResourceAttributes{Group: "enipam.io", Resource: "noderoutings", Subresource: "status", Verb: "patch"})
	cs := kubernetes.NewForConfigOrDie(env.Config)

	nodes := []string{"node-a", "node-b"}
	tokens := map[string]*rest.Config{}
	for _, name := range nodes {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"zone": "a"}},
			Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-" + name, Taints: []corev1.Taint{
				{Key: "other.example/keep", Effect: corev1.TaintEffectNoSchedule},
				{Key: taint, Effect: corev1.TaintEffectNoSchedule},
			}}}
		create(t, node)
		create(t, &enipamv1alpha1.NodeRouting{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: enipamv1alpha1.NodeRoutingSpec{
			FirstInterfaceIndex: 1, Capacity: &enipamv1alpha1.NodeCapacity{MaxIPs: 27, PoolIPs: 4, CanGrow: true},
		}})
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: rbacNamespace, Name: "agent-" + name},
			Spec: corev1.PodSpec{ServiceAccountName: "rbac-agent", NodeName: name, Containers: []corev1.Container{{Name: "agent", Image: "agent"}}}}
		create(t, pod)
		tokens[name] = tokenConfig(t, cs, &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID})
	}
	a := asClient(t, tokens["node-a"])
	unbound := asClient(t, tokenConfig(t, cs, nil))

	// RBAC alone: node-a's token writes node-b's report.
	allowed(t, "without the policy, node-a's token on node-b's NodeRouting status", reportRouted(a, "node-b", 1))

	installNodeRestriction(t, m, "node-b")

	// NodeRouting status: its own, not another node's.
	refused(t, "node-a's token on node-b's NodeRouting status", reportRouted(a, "node-b", 3),
		"enipam-agent of node node-a", "not NodeRouting node-b")
	allowed(t, "node-a's token on its own NodeRouting status", reportRouted(a, "node-a", 1))
	refused(t, "a token bound to no pod on node-a's NodeRouting status", reportRouted(unbound, "node-a", 2),
		"names no node", "NodeRouting node-a")

	// The agent writes its report by server-side apply: the policy holds
	// it to its own node alike, and the status subresource never creates
	// a NodeRouting.
	refused(t, "node-a's token applying node-b's NodeRouting status", applyRouted(a, "node-b", 4),
		"enipam-agent of node node-a", "not NodeRouting node-b")
	allowed(t, "node-a's token applying its own NodeRouting status", applyRouted(a, "node-a", 1))
	if err := applyRouted(env.Client, "node-absent", 1); !apierrors.IsNotFound(err) {
		t.Errorf("applying the status of a NodeRouting that does not exist: %v, want NotFound", err)
	}

	// What the operator decides is out of the agent's reach: through the
	// status subresource, a capacity in spec is ignored and one in status
	// has no field to land in.
	allowed(t, "node-a's token writing a capacity through its status", a.Status().Patch(bg, &enipamv1alpha1.NodeRouting{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}},
		client.RawPatch(types.MergePatchType, []byte(`{"spec":{"capacity":{"maxIPs":999,"poolIPs":0,"canGrow":true}},"status":{"capacity":{"maxIPs":999}}}`))))
	own := &enipamv1alpha1.NodeRouting{}
	if err := env.Client.Get(bg, client.ObjectKey{Name: "node-a"}, own); err != nil {
		t.Fatal(err)
	}
	if own.Spec.Capacity == nil || own.Spec.Capacity.MaxIPs != 27 {
		t.Errorf("node-a's capacity %+v, want the operator's 27 addresses", own.Spec.Capacity)
	}

	// Nodes: only the start-up taint, only its own.
	refused(t, "node-a's token removing node-b's start-up taint", removeTaint(a, "node-b", 1, taint),
		"enipam-agent of node node-a", "not Node node-b")
	refused(t, "node-a's token labelling its own Node", patchNode(a, "node-a", `{"metadata":{"labels":{"zone":"b"}}}`),
		"may only add or remove the start-up taint "+taint, "Node node-a changes more")
	refused(t, "node-a's token cordoning its own Node", patchNode(a, "node-a", `{"spec":{"unschedulable":true}}`),
		"Node node-a changes more")
	refused(t, "node-a's token removing another taint of its own Node", removeTaint(a, "node-a", 0, "other.example/keep"),
		"Node node-a changes more")
	refused(t, "node-a's token removing its start-up taint and a label at once", patchNode(a, "node-a",
		`{"metadata":{"labels":{"zone":null}},"spec":{"taints":[{"key":"other.example/keep","effect":"NoSchedule"}]}}`),
		"Node node-a changes more")
	refused(t, "a token bound to no pod removing node-a's start-up taint", removeTaint(unbound, "node-a", 1, taint),
		"names no node", "Node node-a")
	allowed(t, "node-a's token reading its Node (empty patch)", patchNode(a, "node-a", `{}`))
	allowed(t, "node-a's token removing its own start-up taint", removeTaint(a, "node-a", 1, taint))

	// The apiserver adds node.kubernetes.io/not-ready to a new Node: only
	// the taints the test set are looked at.
	ours := func(node string) (keys []string) {
		got := &corev1.Node{}
		if err := env.Client.Get(bg, client.ObjectKey{Name: node}, got); err != nil {
			t.Fatal(err)
		}
		if got.Labels["zone"] != "a" || got.Spec.Unschedulable {
			t.Errorf("%s: labels %v, unschedulable %v; want them untouched", node, got.Labels, got.Spec.Unschedulable)
		}
		for _, tn := range got.Spec.Taints {
			if tn.Key == taint || tn.Key == "other.example/keep" {
				keys = append(keys, tn.Key)
			}
		}
		return keys
	}
	if got := ours("node-a"); !slices.Equal(got, []string{"other.example/keep"}) {
		t.Errorf("node-a has taints %v, want only the start-up taint gone", got)
	}
	if got := ours("node-b"); !slices.Equal(got, []string{"other.example/keep", taint}) {
		t.Errorf("node-b has taints %v, want both still there", got)
	}
	nr := &enipamv1alpha1.NodeRouting{}
	if err := env.Client.Get(bg, client.ObjectKey{Name: "node-b"}, nr); err != nil {
		t.Fatal(err)
	}
	if nr.Status.RoutedIPs != 1 {
		t.Errorf("node-b's report counts %d routed addresses, want the 1 written before the policy", nr.Status.RoutedIPs)
	}
}

// installNodeRestriction creates the chart's node-restriction policy and
// its binding, and waits until the apiserver enforces them: a status patch
// of the NodeRouting probe by the agent's ServiceAccount, impersonated
// without a node name, is refused.
func installNodeRestriction(t *testing.T, m manifest, probe string) {
	t.Helper()
	for _, kind := range []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
		objs := m.ofKind(kind)
		if len(objs) != 1 {
			t.Fatalf("the chart renders %d %s, want 1", len(objs), kind)
		}
		create(t, objs[0].DeepCopy())
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + rbacNamespace + ":rbac-agent"}
	c := asClient(t, cfg)
	eventually(t, "the node restriction in force", 30*time.Second, func() bool {
		err := c.Status().Patch(bg, &enipamv1alpha1.NodeRouting{ObjectMeta: metav1.ObjectMeta{Name: probe}}, client.RawPatch(types.MergePatchType, []byte("{}")))
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "names no node")
	})
}

// onNode makes cfg, which impersonates the agent's ServiceAccount, carry
// the node name that the agent's pod-bound token would: the identity the
// node-restriction policy admits on that node's objects.
func onNode(cfg *rest.Config, node string) *rest.Config {
	cfg.Impersonate.Extra = map[string][]string{"authentication.kubernetes.io/node-name": {node}}
	return cfg
}

// create makes obj as an admin and deletes it when the test ends.
func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := env.Client.Create(bg, obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(bg, obj) })
}

// tokenConfig returns a client config carrying a token of the chart's
// agent ServiceAccount, bound to ref (nil: bound to nothing).
func tokenConfig(t *testing.T, cs kubernetes.Interface, ref *authenticationv1.BoundObjectReference) *rest.Config {
	t.Helper()
	tr, err := cs.CoreV1().ServiceAccounts(rbacNamespace).CreateToken(bg, "rbac-agent", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{BoundObjectRef: ref},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting a token bound to %+v: %v", ref, err)
	}
	cfg := rest.AnonymousClientConfig(env.Config)
	cfg.BearerToken = tr.Status.Token
	return cfg
}

// reportRouted patches the NodeRouting's status as the agent does, with
// routedIPs set to n.
func reportRouted(c client.Client, node string, n int32) error {
	patch := fmt.Appendf(nil, `{"status":{"routedIPs":%d}}`, n)
	return c.Status().Patch(bg, &enipamv1alpha1.NodeRouting{ObjectMeta: metav1.ObjectMeta{Name: node}}, client.RawPatch(types.MergePatchType, patch))
}

// applyRouted applies the NodeRouting's status as the agent does (server-
// side apply through the status subresource, as enipam-agent), with
// routedIPs set to n.
func applyRouted(c client.Client, node string, n int32) error {
	patch := fmt.Appendf(nil, `{"apiVersion":"enipam.io/v1alpha1","kind":"NodeRouting","metadata":{"name":%q},"status":{"routedIPs":%d}}`, node, n)
	return c.Status().Patch(bg, &enipamv1alpha1.NodeRouting{ObjectMeta: metav1.ObjectMeta{Name: node}}, client.RawPatch(types.ApplyPatchType, patch),
		client.FieldOwner(enipamv1alpha1.FieldManagerAgent), client.ForceOwnership)
}

// removeTaint removes the taint at index i as the agent does: a JSON
// patch testing the key first.
func removeTaint(c client.Client, node string, i int, key string) error {
	ops, err := json.Marshal([]map[string]any{
		{"op": "test", "path": fmt.Sprintf("/spec/taints/%d/key", i), "value": key},
		{"op": "remove", "path": fmt.Sprintf("/spec/taints/%d", i)},
	})
	if err != nil {
		return err
	}
	return c.Patch(bg, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, client.RawPatch(types.JSONPatchType, ops))
}

func patchNode(c client.Client, node, mergePatch string) error {
	return c.Patch(bg, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, client.RawPatch(types.MergePatchType, []byte(mergePatch)))
}

// refused asserts a Forbidden answer whose message holds every part.
func refused(t *testing.T, what string, err error, parts ...string) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Errorf("%s: %v, want Forbidden", what, err)
		return
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("%s: refused with %q, want it to say %q", what, err.Error(), p)
		}
	}
}
