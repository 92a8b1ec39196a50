// Package ec2sim emulates the parts of Amazon EC2 that an ENI and IP
// address operator uses, closely enough that unmodified EC2 clients (the
// aws-sdk-go-v2 EC2 and IMDS clients, the AWS CLI) cannot tell it from the
// real service. enipam is tested, benchmarked and demonstrated against it.
//
// # Layers
//
// Each layer is a package under test/ec2sim; this package composes them
// into a [Sim] and names their types for scenarios and callers (State,
// Scenario, the request and response values, AdminClient, Counters and
// the behaviour configurations are aliases), so a caller imports ec2sim
// alone:
//
//   - state: EC2's model, no HTTP. The account and every rule of EC2
//     behaviour, with one method per action on plain values and EC2's
//     error codes; eventual consistency, lag, asynchronous reassignment
//     and the release cooldown (they decide what a describe shows); the
//     Scenario it is built from; what IMDS shows an instance; dry-run
//     checks. Everything the layers above ask of it is an exported
//     operation named for what EC2 does. See its package documentation
//     for the rules.
//   - iam: the IAM policy language (parsing, evaluation, the scenario's
//     principals, the encoded authorization failure), knowing neither EC2
//     nor HTTP.
//   - behaviour: throttling (token buckets shaped like EC2's), latency and
//     injected faults, and the durations everything's timing is made of;
//     it knows neither the wire nor the State.
//   - wire: EC2's Query protocol at the edge ([wire.EC2]): form decoding
//     into the State's requests, XML answers and errors, request IDs,
//     Signature Version 4, IAM authorization of each request (which
//     resources an action touches and their condition keys), call
//     counters; and IMDSv2 ([wire.IMDS]).
//   - admin: the admin API over HTTP and its client.
//   - cloudfake: the operator's own EC2 adapter over a State, in process.
//
// Imports point down: state imports behaviour and iam; wire imports
// state, behaviour and iam; admin imports state, wire and behaviour;
// ec2sim imports them all. Nothing imports ec2sim but its callers.
//
// The rules of EC2 behaviour the State holds, in short: subnets keep
// EC2's reserved addresses and answer "full" in EC2's three forms;
// instance types carry their real ENI, address, network card and EFA
// limits; an Elastic IP moves with its address; a reassignment lands
// after TimingConfig.ReassignDelay and a released address cools down;
// prefixes are aligned /28s, IPv6 prefixes aligned /80s of a subnet's
// /64 (IPv6 addresses and prefixes count against the type's
// Ipv6AddressesPerInterface); attachments and instance ends take time
// (lifecycle.go); describes filter and page as EC2 does, tokens bound to
// their filters and expiring; a new ENI can be hidden and any change can
// reach describes late ([TimingConfig], [LagConfig]). README.md lists each
// window, the realistic profile's figure and its source.
//
// A [Sim] puts a State behind EC2's Query protocol (form-encoded requests,
// XML answers and errors, request IDs), authentication and IAM (below),
// per-action token buckets
// ([ThrottleConfig], EC2's defaults from [DefaultBucket]), latency
// ([LatencyConfig]), fault injection ([FaultConfig]) and call [Counters];
// it also serves IMDSv2 for each instance and the admin API.
//
// Served actions: DescribeInstances, DescribeInstanceTypes,
// DescribeSubnets, DescribeVpcs, DescribeSecurityGroups,
// DescribeRouteTables, DescribeNetworkInterfaces, CreateNetworkInterface,
// AttachNetworkInterface, DetachNetworkInterface, DeleteNetworkInterface,
// ModifyNetworkInterfaceAttribute, AssignPrivateIpAddresses,
// UnassignPrivateIpAddresses, AssignIpv6Addresses, UnassignIpv6Addresses,
// CreateTags, DeleteTags, AllocateAddress,
// AssociateAddress, DisassociateAddress, ReleaseAddress, DescribeAddresses.
// Any other action is InvalidAction; a parameter an action does not know is
// UnknownParameter (DryRun included, for AssignPrivateIpAddresses,
// UnassignPrivateIpAddresses and their IPv6 twins, which have none on
// EC2). DryRun validates the
// request, checks the caller's IAM policy (UnauthorizedOperation if it
// refuses) and that the resources it names exist (a missing ENI is
// InvalidNetworkInterfaceID.NotFound, as on EC2), then answers
// DryRunOperation.
//
// # Credentials and IAM
//
// Every EC2 request is authenticated as EC2 does: Signature Version 4 in
// the Authorization header, recomputed with aws-sdk-go-v2's own signer
// over the headers the client signed and the body; the credential scoped
// to the scenario's region and the service ec2; X-Amz-Date within 15
// minutes of the wall clock (whatever clock the State runs on, clients
// sign with the real time); Version 2016-11-15. The answers are EC2's:
//
//	unsigned                                   MissingParameter (400) "must contain the parameter AWSAccessKeyId"
//	unknown access key, other region or service AuthFailure (401)
//	wrong secret, changed body or headers       SignatureDoesNotMatch (403)
//	dated more than 15 minutes off              RequestExpired (400)
//	no Version / another version                MissingParameter / NoSuchVersion (400)
//	refused by the principal's policy           UnauthorizedOperation (403), DryRun or not
//
// The access key names a principal of the scenario ([PrincipalSpec]); a
// scenario naming none has [DefaultPrincipal]: [DefaultAccessKeyID] and
// [DefaultSecretAccessKey] (what test/stack and the operator's test
// harness sign with) under the repository's IAM policy for enipam-operator,
// docs/iam/policy.json, with the README's example cluster name replaced by
// the scenario's clusterName. ec2sim's own tests use [AllowAllPrincipal].
//
//	clusterName: prod-1                # the repository's policy is written for it
//	principals:                        # replaces the default principal
//	- {name: enipam-operator, accessKeyID: AKIDENIPAMTEST, secretAccessKey: enipam}   # policy: enipam
//	- {name: admin, accessKeyID: AKIDADMIN, secretAccessKey: s, policy: allow-all}
//	- name: reader
//	  accessKeyID: AKIDREADER
//	  secretAccessKey: s
//	  policyDocument: {Version: "2012-10-17", Statement: [{Effect: Allow, Action: "ec2:Describe*", Resource: "*"}]}
//
// The policy is evaluated after the request is decoded and before it is
// carried out: an explicit Deny wins, else an Allow is needed. Actions and
// resource ARNs match with * and ?; conditions use StringEquals,
// StringNotEquals, StringEqualsIgnoreCase, StringLike, StringNotLike,
// Null and Bool, with IfExists and ForAllValues/ForAnyValue. Each action
// is evaluated on every resource it touches, with the condition keys EC2
// gives that resource (wire/iam_request.go): describes on "*";
// CreateNetworkInterface on its subnet, its security groups and
// network-interface/* (aws:RequestTag and aws:TagKeys of its
// TagSpecification); AllocateAddress on elastic-ip/* likewise; tagging
// at creation also needs ec2:CreateTags on the new resource with
// ec2:CreateAction; CreateTags and DeleteTags on each resource named;
// Attach, Detach and Associate on the interface and the instance;
// ReleaseAddress, AssociateAddress and DisassociateAddress on the
// elastic-ip; every existing resource with aws:ResourceTag (and
// ec2:ResourceTag) from its tags, and every request with
// aws:RequestedRegion and ec2:Region. A refusal's message ends with an
// encoded authorization failure message, base64 JSON here (EC2's is
// encrypted) that [DecodeAuthorizationMessage] reads: principal, action,
// resource, explicit deny and the condition keys the policy asked for. A
// policy using what is not evaluated (other operators, policy variables,
// Principal) is refused when the scenario loads. The in-process cloudfake
// checks no credentials and no policy.
//
// # Running it
//
// In a test:
//
//	sim, err := ec2sim.New(ec2sim.DemoScenario())       // or ParseScenario / LoadScenario
//	srv := httptest.NewServer(sim.Handler())             // or: ep, err := sim.Start(ctx, "127.0.0.1:0")
//	client := ec2.NewFromConfig(cfg, func(o *ec2.Options) {
//		o.BaseEndpoint = aws.String(srv.URL)
//		o.HTTPClient = ec2sim.NewHTTPClient() // see NewHTTPClient: keeps call counts exact
//	})
//	admin := ec2sim.NewAdminClient(srv.URL, nil)
//
// In a controller test that needs no wire, package cloudfake puts a State
// behind the operator's own EC2 adapter (operator/ec2, through its SDK
// interface, without HTTP), with call counts and hooks:
//
//	st, err := ec2sim.NewState(sc, ec2sim.NewManualClock(start).Now)
//	c := cloudfake.New(st)
//
// As a process (cmd/ec2sim):
//
//	ec2sim --scenario demo|FILE --listen 127.0.0.1:0 [--ready-file PATH] [--tls-listen ADDR --tls-cert-file PEM]
//
// prints one JSON line, {"ec2":"http://127.0.0.1:PORT","admin":"http://127.0.0.1:PORT"}
// (plus "ec2Tls" and "certFile" with TLS), to stdout and to the ready file.
//
// IMDS: the SDK's IMDS client drops any path from its endpoint, so each
// instance gets a listener of its own, opened on first request by
// [Sim.IMDSEndpoint] or GET /admin/instances/{id}/imds; point
// imds.Options.Endpoint (or AWS_EC2_METADATA_SERVICE_ENDPOINT) at it.
// Tokens come from PUT /latest/api/token as on EC2; metadata shows only
// attachments that have completed.
//
// # Admin API
//
// JSON over HTTP on the EC2 listener, under /admin/ ([AdminClient] wraps it):
//
//	GET     /admin/healthz               {"ok":true}
//	POST    /admin/instances             LaunchRequest -> InstanceInfo: a node joins (AddInstance)
//	DELETE  /admin/instances/{id}        terminate (TerminateInstance)
//	POST    /admin/instances/{id}/stop   stop (StopInstance)
//	GET     /admin/instances/{id}/imds   {"endpoint":"http://127.0.0.1:PORT"} (IMDSEndpoint)
//	GET     /admin/counters              Counters (Counters)
//	DELETE  /admin/counters              reset (ResetCounters)
//	GET|PUT /admin/faults                FaultConfig (SetFaults)
//	GET|PUT /admin/latency               LatencyConfig (SetLatency)
//	GET|PUT /admin/throttling            ThrottleConfig (SetThrottling)
//	GET|PUT /admin/timing                TimingConfig: delays, moves, cooldowns, eventual consistency (SetTiming)
//	GET     /admin/dump                  Dump: every resource (Dump)
//	GET     /admin/remaps                []Remap: each reassignment's remap, its drawn delay and outcome (Remaps)
//
// Counters read {"calls":{"AssignPrivateIpAddresses":3},"throttled":{...},
// "errors":{"Action":{"Code":n}}}: every request counts in calls, those
// refused by a token bucket in throttled, other error answers (injected
// faults included) in errors.
//
// # Scenarios
//
// A [Scenario] is YAML:
//
//	account: "123456789012"
//	region: us-east-1
//	seed: 1                      # IDs, MACs, delays and fault draws repeat for a seed
//	zones: [us-east-1a, us-east-1b]
//	vpcs:
//	- name: demo
//	  cidrs: [10.0.0.0/16]
//	  subnets:
//	  - {name: nodes-a, cidr: 10.0.0.0/20, zone: us-east-1a, tags: {kubernetes.io/role/internal-elb: "1"}}
//	  securityGroups:
//	  - {name: nodes, tags: {kubernetes.io/cluster/demo: owned}}
//	instances:
//	- name: node                 # the Name tag; with count, node-1, node-2, ...
//	  count: 2
//	  type: m5.large
//	  subnet: nodes-a            # name or ID
//	  securityGroups: [nodes]
//	  secondaryIPs: 3            # already on the primary ENI
//	  enis:                      # already attached: adoption tests, EFAs, other cards' interfaces
//	  - {deviceIndex: 1, secondaryIPs: 4, prefixes: 1, tags: {owner: someone}}
//	  - {networkCard: 1, deviceIndex: 0, interfaceType: efa-only}
//	instanceTypes: []            # add to or replace catalog entries
//	elasticIPLimit: 5
//	profile: realistic           # EC2's throttling, realistic latency and attach delays
//	timing:                      # realistic: these, and a 1 s lag for 2% of new ENIs (state/state.go)
//	  attachDelay: {min: 2s, max: 5s}
//	  detachDelay: {min: 1s, max: 3s}
//	  eventualConsistency: 0s    # new ENIs hidden from every describe
//	  mutationConsistency: 0s    # new ENIs NotFound to Attach, Assign, Unassign, Modify, Delete, tags
//	  consistencyShare: 0        # share of new ENIs that lag, drawn per seed; 0 = all
//	  reassignDelay: {min: 1s, max: 4s} # a reassigned address lands on its new ENI after this
//	  releaseCooldown: 5s        # a released address is nobody's, and unassignable, for this long
//	  lag:                       # changes reach describes late (realistic: 1-3 s, share 0.25)
//	    assign: {min: 1s, max: 3s}   # also unassign, reassign, attach, detach, tags, associate, disassociate
//	    share: 0.25              # share of changes that lag, drawn per seed; 0 = all
//	subnetFullError: ""          # force InsufficientFreeAddressesInSubnet, InvalidParameterValue or InsufficientCidrBlocks
//	throttling: {enabled: true, scale: 1, buckets: {AssignPrivateIpAddresses: {size: 100, refillPerSecond: 5}}}
//	latency: {default: {min: 150ms, max: 400ms}, actions: {DescribeNetworkInterfaces: {min: 50ms, max: 150ms}}}
//	faults: {rules: [{action: AttachNetworkInterface, code: InternalError, count: 2}]}
//
// [DemoScenario] is the scenario of `make demo`; [Catalog] lists the built-in
// instance types: every current EC2 type (Graviton, bare metal, Xen and the
// multi-card EFA types included) with its published limits, the table of
// package catalog that enipam-operator falls back to, generated by
// internal/instancetypes from the sources its data/README.md names.
//
// [LaunchRequest] (POST /admin/instances) boots an instance with extra
// interfaces, as RunInstances' NetworkInterface.N: AWS's recommended
// layout for an EFA instance with several cards is an EFA-only interface
// at card 0 device 1, and one at device 0 of every other card, with ENA
// interfaces at device 1 of those cards where IP traffic needs them.
//
// # Where EC2's behaviour is not documented
//
// Codes and messages are EC2's where clients have logged them; where
// nobody has, ec2sim picks and says so here rather than pretend:
//
//   - Eventual consistency: EC2 documents that a resource just created may
//     be NotFound to the next calls, not for how long nor how often. The
//     realistic profile's 1 s for 2% of new ENIs is a guess that keeps the
//     path exercised. Describe and mutation windows are separate knobs
//     because nothing says EC2 ends them together.
//   - A full subnet: which of InsufficientFreeAddressesInSubnet and
//     InvalidParameterValue EC2 answers for addresses is not documented
//     (both are reported); ec2sim answers the documented code unless told
//     otherwise, and InvalidParameterValue for prefixes the subnet has too
//     few addresses for, as Cilium's fallback expects.
//   - A device index at or above the type's interface count while a slot
//     is free: ec2sim answers InvalidParameterValue (the request names an
//     index the instance does not have); EC2's code is not documented. With
//     no slot free, EC2's AttachmentLimitExceeded comes first.
//   - Detaching an attachment still attaching: IncorrectState, as for one
//     already detaching; the message is ec2sim's. Force does not help.
//   - Authentication: EC2 documents its codes, not which one answers a
//     credential scoped to another region or service; ec2sim answers
//     AuthFailure, as for an unknown key. Authentication comes before
//     anything else, the version next, then the action and its parameters,
//     then IAM, then the resources' existence (a resource whose tags the
//     policy needs is looked up by IAM: its NotFound comes first).
//   - DryRun: IAM, then resource existence, is checked before DryRunOperation;
//     whether EC2 also checks limits, states and addresses under DryRun is
//     not documented.
//   - An instance's networkInterfaceSet hides ENIs inside the describe
//     window, but the DescribeInstances filters on network-interface.*
//     still match them.
//   - Network cards: EC2 documents that device indexes are per card, that
//     the primary interface is card 0's device 0, and each card's
//     interface limit; its answer for a NetworkCardIndex the type lacks is
//     not documented: ec2sim answers InvalidParameterValue. A full card is
//     AttachmentLimitExceeded, as a full single-card instance is.
//   - EFA: EC2 documents that an EFA is attached only at launch or to a
//     stopped instance and detached only from a stopped one, that an
//     EFA-only interface holds no IP address and cannot be the primary,
//     and the type's maximum EFA count. The codes are not documented:
//     ec2sim answers IncorrectInstanceState for attaching or detaching an
//     EFA on a running instance, InvalidParameterCombination for an
//     address on an EFA-only interface, an EFA-only primary or EFA on a
//     type without it, and AttachmentLimitExceeded past the EFA count.
//     Whether a card holds more than one EFA is not documented; ec2sim
//     limits only the instance's total. Whether IMDS lists local-ipv4s
//     for an EFA-only interface is not documented; ec2sim answers 404.
//   - IPv6: EC2 documents that an interface takes as many IPv6 addresses
//     as its type's Ipv6AddressesPerInterface, that a prefix counts as one
//     address, that addresses and their count (and prefixes and theirs)
//     exclude each other, and for CreateNetworkInterface that all four do;
//     not its codes. ec2sim answers PrivateIpAddressLimitExceeded past the
//     limit (also for attaching an interface that holds more than the
//     type allows), InvalidParameterCombination for parameters that
//     exclude each other, InvalidParameterValue for a subnet without an
//     IPv6 CIDR, a type without IPv6, an address outside the subnet's /64
//     or reserved (its first four and last, as for IPv4), and a prefix that
//     is not a free aligned /80, and InvalidIPAddress.InUse for an address
//     another interface holds or one inside another's prefix. EC2 picks
//     IPv6 addresses at random; ec2sim hands them out next-fit from the
//     subnet's first /80 and prefixes from the /80s after it, so a released
//     one is not handed out again soon (there is no IPv6 cooldown).
package ec2sim
