// Package state is EC2's model, without HTTP. A [State] is the account:
// VPCs, subnets, security groups, route tables, instances, ENIs,
// addresses, prefixes and Elastic IPs, with one method per EC2 action on
// plain request and response values and EC2's error codes as [*APIError]
// ([Errorf], the Code constants). It holds every rule of EC2 behaviour:
//
//   - subnets keep EC2's five reserved addresses and report an exact
//     availableIpAddressCount; fresh addresses are the lowest free ones; a
//     subnet without room answers in one of EC2's three forms
//     (InsufficientFreeAddressesInSubnet; InvalidParameterValue "There
//     aren't sufficient free Ipv4 addresses or prefixes";
//     InsufficientCidrBlocks), by cause or forced (Scenario.SubnetFullError);
//   - instance types carry their real ENI and per-ENI IPv4 limits
//     (AttachmentLimitExceeded, PrivateIpAddressLimitExceeded), network
//     cards each with its own interface limit and device indexes 0 to
//     MaxENIs-1 (a card other than 0 has a device 0 of its own; Attach
//     honours NetworkCardIndex and answers it), and EFA: at most
//     EfaInfo.MaximumEfaInterfaces, attached only at launch, never
//     detached from a running instance, an EFA-only interface holding no
//     address and never the primary. DescribeInstanceTypes lists the
//     cards (NetworkCards, maximumNetworkCards, interface types per card)
//     and EFA (efaSupported, efaInfo); maximumNetworkInterfaces counts
//     every card's interfaces, as on EC2. It pages every current type
//     (over 1 300) in name order, 100 a page without MaxResults, 5 to 100
//     with it;
//   - an Elastic IP is associated with one private address of one ENI
//     (AssociateAddress refuses an associated one without
//     AllowReassociation: Resource.AlreadyAssociated); it moves with its
//     address when AssignPrivateIpAddresses reassigns the address to
//     another ENI, and is disassociated when the address is unassigned or
//     its ENI deleted; an associated one cannot be released;
//   - a reassignment (AssignPrivateIpAddresses with AllowReassignment) is
//     asynchronous, as EC2 documents: the call answers with the address,
//     which stays on its old ENI (describes, IMDS local-ipv4s, its Elastic
//     IP) for TimingConfig.ReassignDelay and then lands; an address
//     unassigned or freed with its ENI cools down for
//     TimingConfig.ReleaseCooldown before anyone can have it again;
//   - prefixes are aligned /28s taking one IPv4 slot each, and a fragmented
//     subnet answers InsufficientCidrBlocks;
//   - IPv6 (ipv6.go): a VPC may have an Amazon /56 and a subnet a /64 of
//     it; an ENI in such a subnet holds IPv6 addresses and aligned /80
//     prefixes, each taking one of the type's Ipv6AddressesPerInterface
//     slots (apart from the IPv4 ones), assigned and unassigned all or
//     nothing, shown by describes (with the lag windows) and IMDS;
//   - attachments go attaching -> attached and detaching -> detached after
//     configurable delays; an attachment still attaching or already
//     detaching cannot be detached (IncorrectState); an ENI attached,
//     attaching or detaching cannot be deleted; the primary ENI cannot be
//     detached; terminating an instance takes it through shutting-down
//     (its attachments detaching) before it deletes its DeleteOnTermination
//     ENIs and leaves the others available, stopping through stopping
//     (lifecycle.go); IMDS shows public-ipv4, public-ipv4s and
//     ipv4-associations/ for Elastic IPs; DNS names are the region's;
//   - CreateNetworkInterface honours ClientToken, and a refused create
//     consumes and names no ENI ID; describes filter (values OR'd, filters
//     AND'd, * and ? wildcards, tag:key, tag-key; every documented filter
//     of DescribeNetworkInterfaces and DescribeInstances' network-interface.*)
//     and page in creation order as EC2 does: MaxResults resources scanned
//     a page, so filtered pages come short or empty with a token; tokens
//     are bound to their filters and expire (TimingConfig.TokenTTL);
//   - eventual consistency ([TimingConfig]): a new ENI can be hidden from
//     every describe for one window, and NotFound to the calls that change
//     it for another, for all new ENIs or a seeded share of them; every
//     change to an ENI or Elastic IP (assign, unassign, a landed
//     reassignment, attach, detach, tags, association) can reach describes
//     late ([LagConfig]). test/ec2sim/README.md lists each window, the realistic
//     profile's figure and its source.
//
// What decides what EC2 would answer lives here, the timing included:
// eventual consistency and lag (consistency.go, lag.go) and asynchronous
// reassignment (async.go) change what a describe shows, so they are part
// of the model, not of the behaviour around it; their durations are
// package behaviour's Duration and Range, drawn from the scenario's seed
// on the State's clock. A [Scenario] (YAML) is what a State is built from;
// it also carries the configurations of the layers above (principals,
// throttling, latency, faults), which this package only holds and
// validates.
//
// The edge asks the State through operations named for what EC2 does:
// one method per action on plain request and response values; [State.DryRun]
// with the [Need] of each resource a call names; [State.InstanceMetadata],
// what IMDS shows an instance; [State.ResourceTags],
// [State.AttachmentParties] and [State.AllocationOf], what IAM's
// conditions need of a resource; [State.Dump], everything at once. This
// package imports behaviour (durations and the configurations a Scenario
// holds) and iam (to validate a Scenario's principals), never wire or
// admin.
package state
