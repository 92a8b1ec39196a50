package cloud

// Tags enipam puts on every ENI and Elastic IP it creates. An ENI with
// TagCluster set to the operator's cluster name is the operator's to
// attach, repair and, once unattached, collect; an Elastic IP with it, the
// operator's to release once no claim records it.
const (
	// TagCluster holds the cluster name.
	TagCluster = "enipam.io/cluster"
	// TagInstance holds the instance the ENI was created for.
	TagInstance = "enipam.io/instance"
	// TagManagedBy holds ManagedBy.
	TagManagedBy = "enipam.io/managed-by"
	// TagCreatedAt holds when the operator asked for the ENI (RFC 3339,
	// UTC, on ENIs to the millisecond): EC2 tells no ENI's age, and the collector needs it to tell a
	// leak from an ENI about to be attached.
	TagCreatedAt = "enipam.io/created-at"
	// TagClaim holds, on an Elastic IP allocated for a StaticIPClaim, the
	// claim's "namespace/name"; TagClaimUID its UID. With TagCluster they
	// tell the collector whose it is.
	TagClaim    = "enipam.io/claim"
	TagClaimUID = "enipam.io/claim-uid"
	// ManagedBy is the value of TagManagedBy.
	ManagedBy = "enipam"
)
