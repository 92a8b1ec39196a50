package v1alpha1

// Removing enipam from a node for good. Setting AnnotationCleanup on a
// node's NodeRouting tells that node's enipam-agent to remove everything
// it owns in the kernel (rules, routes, the connmark table, the rp_filter
// it loosened) and to route nothing until the annotation goes; the
// operator pools nothing for a node that is not routed.
//
// The annotation's lifecycle under the chart:
//
//   - `helm uninstall`: the pre-delete hook (enipam-agent --uninstall)
//     sets it, with the value "enipam-agent --uninstall", on every
//     NodeRouting and waits for each running agent's CleanedUp. The
//     NodeRoutings outlive the release (Helm never deletes CRDs, and they
//     are owned by CiliumNodes), and so does the annotation.
//   - `helm install`, `helm upgrade`, `helm rollback`: the pre-install,
//     pre-upgrade and pre-rollback hook (enipam-agent --resume) removes
//     it where it still holds that value, before the release's agents
//     start, so every node is routed again: after an uninstall, and after
//     an uninstall that stopped half-way (Helm leaves that release
//     uninstalling; `helm rollback` deploys it again). A value set by
//     anyone else (a request for one node, by hand) stays.
//   - Nothing that runs continuously removes it: an agent or an operator
//     starting cannot tell a new install from an uninstall in progress
//     (the pre-delete hook runs while the old agents still do).
//   - By hand, `kubectl annotate nrt --all enipam.io/cleanup-` aborts an
//     uninstall, or resumes a release installed without the hooks.
//
// A rolling update or a restart never sets it, so routing that pods
// depend on survives those.
const (
	// AnnotationCleanup, when set to any non-empty value (who asked, for
	// the record), requests the removal of enipam's routing from the node.
	// Removing the annotation lets the agent route the node again.
	AnnotationCleanup = "enipam.io/cleanup"

	// ReasonCleanedUp is the reason of a Ready=False condition the agent
	// writes once it has removed the node's routing on request.
	ReasonCleanedUp = "CleanedUp"
)
