package v1alpha1

// Removing enipam from a node for good. Setting AnnotationCleanup on a
// node's NodeRouting tells that node's enipam-agent to remove everything
// it owns in the kernel (rules, routes, the connmark table, the rp_filter
// it loosened) and to route nothing until the annotation goes. The chart's
// pre-delete hook sets it on every NodeRouting before `helm uninstall`
// removes the DaemonSet; a rolling update or a restart never sets it, so
// routing that pods depend on survives those.
const (
	// AnnotationCleanup, when set to any non-empty value (who asked, for
	// the record), requests the removal of enipam's routing from the node.
	// Removing the annotation lets the agent route the node again.
	AnnotationCleanup = "enipam.io/cleanup"

	// ReasonCleanedUp is the reason of a Ready=False condition the agent
	// writes once it has removed the node's routing on request.
	ReasonCleanedUp = "CleanedUp"
)
