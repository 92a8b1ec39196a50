package agentsim

import (
	"fmt"
	"slices"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/test/ec2sim"
)

// ClaimFindings count breaches of the static-IP claims' invariants seen
// in one look at the claims, the CiliumNodes, the claims' pods and EC2's
// own state.
type ClaimFindings struct {
	// InTwoPools: claimed addresses in the pools of two nodes or more.
	InTwoPools int
	// OnTwoENIs: claimed addresses EC2 has on two ENIs or more.
	OnTwoENIs int
	// TwoPods: claimed addresses held by two pods at once (listed used by
	// two nodes' agents, or the address of two live pods).
	TwoPods int
	// OtherPod: claimed addresses held by a pod other than the claim's
	// (an agent lists it used by another owner, or another live pod has
	// it as its address).
	OtherPod int
	// Unassigned: claimed addresses EC2 has on no ENI at all.
	Unassigned int
	// NotBound (at rest only): claims whose pod exists that are not Bound,
	// or Bound with no reason in their Ready condition.
	NotBound int
	// WrongAddress (at rest only): running pods of a claim with another
	// address than the claim's.
	WrongAddress int
	// Claims and Bound count the claims looked at and the Bound ones.
	Claims, Bound int
	// Details name the first breaches.
	Details []string
}

// Total is the number of breaches of every kind.
func (f ClaimFindings) Total() int {
	return f.InTwoPools + f.OnTwoENIs + f.TwoPods + f.OtherPod + f.Unassigned + f.NotBound + f.WrongAddress
}

// Add sums g into f (Details up to 40).
func (f *ClaimFindings) Add(g ClaimFindings) {
	f.InTwoPools += g.InTwoPools
	f.OnTwoENIs += g.OnTwoENIs
	f.TwoPods += g.TwoPods
	f.OtherPod += g.OtherPod
	f.Unassigned += g.Unassigned
	f.NotBound += g.NotBound
	f.WrongAddress += g.WrongAddress
	f.Claims += g.Claims
	f.Bound += g.Bound
	for _, d := range g.Details {
		if len(f.Details) < 40 {
			f.Details = append(f.Details, d)
		}
	}
}

// String prints the counts.
func (f ClaimFindings) String() string {
	return fmt.Sprintf("%d claimed addresses in two pools, %d on two ENIs, %d held by two pods, %d held by another pod, %d unassigned in EC2, %d claims not Bound, %d pods with another address; %d of %d claims Bound",
		f.InTwoPools, f.OnTwoENIs, f.TwoPods, f.OtherPod, f.Unassigned, f.NotBound, f.WrongAddress, f.Bound, f.Claims)
}

// CheckClaims holds the static-IP claims to their invariants. At every
// moment, for each claim that has an address and is not being deleted:
// the address is in at most one pool, on exactly one ENI in EC2 (never
// unassigned while the claim exists), held by at most one pod, and, once
// the claim's own pod held it, by no other pod: no agent lists it used by
// another owner, no other live pod of pods has it. (A first placement may
// stamp an address an agent handed out unseen; the operator then picks
// another, and no pod of the claim ever had the first.) At rest (atRest),
// also: no pod but the claim's holds its address, every claim whose pod
// exists is Bound with a reason, and its pod, once running, has the
// claim's address. pods are the pods of the claims' namespaces.
//
// held remembers, look after look, the claims (by UID) whose pod was seen
// with their address; CheckClaims adds to it.
//
// A caller looking while claims come and go should pass only the claims
// it saw, with the same UID and address, both before and after it read
// the rest (StableClaims): a claim deleted in between releases its
// address.
func CheckClaims(claims []enipamv1alpha1.StaticIPClaim, nodes []ciliumv2.CiliumNode, pods []corev1.Pod, dump ec2sim.Dump, held map[types.UID]string, atRest bool) ClaimFindings {
	var f ClaimFindings
	detail := func(format string, args ...any) {
		if len(f.Details) < 40 {
			f.Details = append(f.Details, fmt.Sprintf(format, args...))
		}
	}
	pools := map[string][]string{} // address → nodes whose pool lists it
	type user struct{ owner, node string }
	usedBy := map[string][]user{} // address → owners agents list it used by
	for i := range nodes {
		cn := &nodes[i]
		for ip := range cn.Spec.IPAM.Pool {
			pools[ip] = append(pools[ip], cn.Name)
		}
		for ip, e := range cn.Status.IPAM.Used {
			usedBy[ip] = append(usedBy[ip], user{owner: e.Owner, node: cn.Name})
		}
	}
	enis := map[string][]string{} // address → ENIs EC2 has it on
	for _, e := range dump.NetworkInterfaces {
		for _, a := range e.PrivateIPAddresses {
			enis[a.PrivateIPAddress] = append(enis[a.PrivateIPAddress], e.NetworkInterfaceID)
		}
	}
	live := map[string][]string{} // address → live pods ("namespace/name") with it
	pod := map[string]*corev1.Pod{}
	for i := range pods {
		p := &pods[i]
		pod[p.Namespace+"/"+p.Name] = p
		if p.Status.PodIP != "" && p.DeletionTimestamp == nil {
			live[p.Status.PodIP] = append(live[p.Status.PodIP], p.Namespace+"/"+p.Name)
		}
	}
	for i := range claims {
		c := &claims[i]
		owner, ip := c.Owner(), c.Status.Address
		f.Claims++
		if c.Status.Phase == enipamv1alpha1.ClaimBound {
			f.Bound++
		}
		if ip != "" && c.DeletionTimestamp == nil && c.Status.Phase != enipamv1alpha1.ClaimInvalid {
			if n := pools[ip]; len(n) > 1 {
				f.InTwoPools++
				detail("claim %s: %s in the pools of %v", owner, ip, n)
			}
			switch n := enis[ip]; {
			case len(n) == 0:
				f.Unassigned++
				detail("claim %s: %s is on no ENI in EC2", owner, ip)
			case len(n) > 1:
				f.OnTwoENIs++
				detail("claim %s: %s on the ENIs %v", owner, ip, n)
			}
			users := usedBy[ip]
			if slices.ContainsFunc(users, func(u user) bool { return u.owner == owner }) || slices.Contains(live[ip], owner) {
				held[c.UID] = ip
			}
			strict := atRest || held[c.UID] == ip
			if len(users) > 1 || len(live[ip]) > 1 {
				f.TwoPods++
				detail("claim %s: %s held by %v (agents) and %v (pods)", owner, ip, users, live[ip])
			}
			for _, u := range users {
				if u.owner != owner && strict {
					f.OtherPod++
					detail("claim %s: %s used by %s on %s", owner, ip, u.owner, u.node)
				}
			}
			for _, p := range live[ip] {
				if p != owner && strict {
					f.OtherPod++
					detail("claim %s: %s is the address of pod %s", owner, ip, p)
				}
			}
		}
		if !atRest || c.DeletionTimestamp != nil {
			continue
		}
		p, ok := pod[owner]
		if !ok {
			continue
		}
		ready := meta.FindStatusCondition(c.Status.Conditions, enipamv1alpha1.ClaimReady)
		if c.Status.Phase != enipamv1alpha1.ClaimBound || ready == nil || ready.Reason == "" {
			f.NotBound++
			reason := "no reason"
			if ready != nil {
				reason = ready.Reason + ": " + ready.Message
			}
			detail("claim %s of an existing pod is %s (%s)", owner, c.Status.Phase, reason)
		}
		if p.Status.PodIP != "" && p.DeletionTimestamp == nil && p.Status.PodIP != ip {
			f.WrongAddress++
			detail("pod %s runs with %s, its claim has %q", owner, p.Status.PodIP, ip)
		}
	}
	return f
}

// StableClaims returns the claims of before that after still has with the
// same UID and address: those that existed throughout a look.
func StableClaims(before, after []enipamv1alpha1.StaticIPClaim) []enipamv1alpha1.StaticIPClaim {
	later := map[string]enipamv1alpha1.StaticIPClaim{}
	for _, c := range after {
		later[c.Owner()] = c
	}
	var out []enipamv1alpha1.StaticIPClaim
	for _, c := range before {
		if a, ok := later[c.Owner()]; ok && a.UID == c.UID && a.Status.Address == c.Status.Address && (a.DeletionTimestamp == nil) == (c.DeletionTimestamp == nil) {
			out = append(out, a)
		}
	}
	return out
}
