package state

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"
)

// TimingConfig is how long EC2's asynchronous work takes: an attachment stays
// "attaching" for AttachDelay, a detachment "detaching" for DetachDelay;
// and how long a new ENI takes to propagate through EC2 (see
// [TimingConfig.EventualConsistency]). All zero by default: attachments
// complete within the call and new ENIs are known everywhere at once.
type TimingConfig struct {
	AttachDelay Range `json:"attachDelay"`
	DetachDelay Range `json:"detachDelay"`
	// EventualConsistency hides a new ENI from every describe (by ID:
	// InvalidNetworkInterfaceID.NotFound; by filter or in an instance's
	// networkInterfaceSet: absent) for this long after its creation.
	EventualConsistency Duration `json:"eventualConsistency,omitempty"`
	// MutationConsistency makes a new ENI InvalidNetworkInterfaceID.NotFound
	// to the calls that change it (Attach, Assign, Unassign, Modify,
	// Delete, CreateTags, DeleteTags, AssociateAddress) for this long. It is
	// apart from EventualConsistency so that a test can exercise either
	// path alone; set both for EC2's usual picture.
	MutationConsistency Duration `json:"mutationConsistency,omitempty"`
	// ConsistencyShare is the share of new ENIs the two windows apply to,
	// drawn per ENI from the scenario's seed (the n-th ENI created lags or
	// not the same way in every run); 0 means every new ENI.
	ConsistencyShare float64 `json:"consistencyShare,omitempty"`
	// Lag is how long each kind of change to an existing ENI or Elastic
	// IP takes to reach describes (lag.go).
	Lag LagConfig `json:"lag"`
	// ReassignDelay is how long an address AssignPrivateIpAddresses
	// moves from another ENI (AllowReassignment) takes to land: until
	// then describes, IMDS and its Elastic IP show it where it was
	// (see move in async.go). Zero moves it within the call.
	ReassignDelay Range `json:"reassignDelay"`
	// ReleaseCooldown keeps an address just unassigned, or freed with
	// its deleted ENI, from every new assignment (fresh or by name) and
	// out of the subnet's available count for this long (see
	// releaseAddr in async.go). Zero frees it within the call.
	ReleaseCooldown Duration `json:"releaseCooldown,omitempty"`
	// TerminateDelay is how long a terminated instance stays
	// shutting-down; StopDelay how long a stopped one stays stopping
	// (lifecycle.go). Zero: they end within the call.
	TerminateDelay Range `json:"terminateDelay"`
	StopDelay      Range `json:"stopDelay"`
	// TokenTTL is how long a describe's NextToken stays valid; older it
	// is InvalidPaginationToken (paging.go). Zero: tokens never expire.
	TokenTTL Duration `json:"tokenTTL,omitempty"`
}

// Validate rejects negative durations and a share outside 0..1.
func (c TimingConfig) Validate() error {
	if err := c.AttachDelay.Validate(); err != nil {
		return fmt.Errorf("attachDelay: %w", err)
	}
	if err := c.DetachDelay.Validate(); err != nil {
		return fmt.Errorf("detachDelay: %w", err)
	}
	if c.EventualConsistency < 0 {
		return fmt.Errorf("eventualConsistency is negative")
	}
	if c.MutationConsistency < 0 {
		return fmt.Errorf("mutationConsistency is negative")
	}
	if err := c.ReassignDelay.Validate(); err != nil {
		return fmt.Errorf("reassignDelay: %w", err)
	}
	if err := c.Lag.Validate(); err != nil {
		return fmt.Errorf("lag: %w", err)
	}
	if c.ReleaseCooldown < 0 {
		return fmt.Errorf("releaseCooldown is negative")
	}
	if err := c.TerminateDelay.Validate(); err != nil {
		return fmt.Errorf("terminateDelay: %w", err)
	}
	if err := c.StopDelay.Validate(); err != nil {
		return fmt.Errorf("stopDelay: %w", err)
	}
	if c.TokenTTL < 0 {
		return fmt.Errorf("tokenTTL is negative")
	}
	if c.ConsistencyShare < 0 || c.ConsistencyShare > 1 {
		return fmt.Errorf("consistencyShare %v outside 0..1", c.ConsistencyShare)
	}
	return nil
}

// RealisticTiming is what EC2 is seen to take: attachments complete in 2-5 s,
// detachments in 1-3 s; one new ENI in fifty is unknown to describes and
// to the calls that change it for its first second; a reassigned address
// lands after 1-4 s; a released address cools down for 5 s; and a quarter
// of all other changes reach describes 1-3 s late (LagConfig); a
// NextToken expires after 10 minutes; an instance is shutting-down or
// stopping for 10-30 s. README.md
// lists the sources; every share and window is a guess that keeps the
// paths exercised, not a measurement.
func RealisticTiming() TimingConfig {
	lag := Range{Min: Duration(time.Second), Max: Duration(3 * time.Second)}
	return TimingConfig{
		AttachDelay:         Range{Min: Duration(2 * time.Second), Max: Duration(5 * time.Second)},
		DetachDelay:         Range{Min: Duration(1 * time.Second), Max: Duration(3 * time.Second)},
		EventualConsistency: Duration(time.Second),
		MutationConsistency: Duration(time.Second),
		ConsistencyShare:    0.02,
		ReassignDelay:       Range{Min: Duration(1 * time.Second), Max: Duration(4 * time.Second)},
		ReleaseCooldown:     Duration(5 * time.Second),
		TokenTTL:            Duration(10 * time.Minute),
		TerminateDelay:      Range{Min: Duration(10 * time.Second), Max: Duration(30 * time.Second)},
		StopDelay:           Range{Min: Duration(10 * time.Second), Max: Duration(30 * time.Second)},
		Lag: LagConfig{
			Assign: lag, Unassign: lag, Reassign: lag, Attach: lag, Detach: lag,
			Tags: lag, Associate: lag, Disassociate: lag, Share: 0.25,
		},
	}
}

// State is the emulated EC2 account in one region: every resource and every
// rule of EC2 behaviour, with one method per EC2 action taking and returning
// plain values. It knows nothing of HTTP. Every error it returns is an
// *APIError carrying EC2's code. It is safe for concurrent use; each method
// holds one lock for its whole run and never blocks on anything else.
type State struct {
	mu  sync.Mutex
	now func() time.Time
	ids *idSource
	rng *rand.Rand
	// lagRNG draws which new ENIs lag (TimingConfig.ConsistencyShare); a
	// stream of its own, so turning lag on moves no other draw.
	lagRNG *rand.Rand
	// changeRNG draws which changes lag and for how long (lag.go).
	changeRNG *rand.Rand

	account   string
	region    string
	dnsSuffix string
	zones     map[string]zone
	types     map[string]*InstanceType
	// maxIPv4PerENI bounds the addresses of an unattached ENI.
	maxIPv4PerENI int
	// maxIPv6PerENI bounds the IPv6 addresses and prefixes of an
	// unattached ENI.
	maxIPv6PerENI int
	timing        TimingConfig
	subnetFull    string
	eipLimit      int
	eipPool       *addrSpace

	seq         uint64
	vpcs        registry[*vpc]
	subnets     registry[*subnet]
	groups      registry[*securityGroup]
	routeTables registry[*routeTable]
	instances   registry[*instance]
	enis        registry[*eni]
	addresses   registry[*address]
	attachments map[string]*attachment
	assocs      map[string]*address
	// pending is the asynchronous work to run when due (async.go);
	// moves and cooling are the address moves and cooldowns in it.
	pending  events
	eventSeq uint64
	moves    map[addrKey]*move
	cooling  map[addrKey]time.Time
	// remapLog records the moves, remapSeq numbers them (remaplog.go).
	remapLog []remapEntry
	remapSeq uint64
	// laggingENIs are the ENIs whose describes lag a change (lag.go).
	laggingENIs map[*eni]struct{}
	tokens      map[string]clientTokenRecord
}

type clientTokenRecord struct {
	fingerprint string
	response    CreateNetworkInterfaceResponse
}

// NewState builds the state a scenario describes. now is the clock that
// drives attach and detach delays and eventual consistency; nil means
// time.Now.
func NewState(sc *Scenario, now func() time.Time) (*State, error) {
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	if now == nil {
		now = time.Now
	}
	types, err := buildCatalog(sc.InstanceTypes)
	if err != nil {
		return nil, &ScenarioError{Path: "instanceTypes", Err: err}
	}
	s := &State{
		now:         now,
		ids:         newIDSource(sc.Seed),
		rng:         rand.New(rand.NewPCG(sc.Seed, 0x7374617465)),
		lagRNG:      rand.New(rand.NewPCG(sc.Seed, 0x6c6167)),
		changeRNG:   rand.New(rand.NewPCG(sc.Seed, 0x636867)),
		subnetFull:  sc.SubnetFullError,
		account:     sc.Account,
		region:      sc.Region,
		dnsSuffix:   sc.Region + ".compute.internal",
		zones:       map[string]zone{},
		types:       types,
		eipLimit:    sc.ElasticIPLimit,
		eipPool:     newAddrSpace(netip.MustParsePrefix("198.51.100.0/24")),
		vpcs:        newRegistry[*vpc](),
		subnets:     newRegistry[*subnet](),
		groups:      newRegistry[*securityGroup](),
		routeTables: newRegistry[*routeTable](),
		instances:   newRegistry[*instance](),
		enis:        newRegistry[*eni](),
		addresses:   newRegistry[*address](),
		attachments: map[string]*attachment{},
		assocs:      map[string]*address{},
		tokens:      map[string]clientTokenRecord{},
		moves:       map[addrKey]*move{},
		cooling:     map[addrKey]time.Time{},
		laggingENIs: map[*eni]struct{}{},
	}
	if sc.Region == "us-east-1" {
		s.dnsSuffix = "ec2.internal"
	}
	if s.eipLimit == 0 {
		s.eipLimit = 5
	}
	for _, t := range types {
		s.maxIPv4PerENI = max(s.maxIPv4PerENI, t.IPv4PerENI)
		s.maxIPv6PerENI = max(s.maxIPv6PerENI, t.IPv6PerENI)
	}
	if sc.Timing != nil {
		s.timing = *sc.Timing
	} else if sc.Profile == ProfileRealistic {
		s.timing = RealisticTiming()
	}
	if err := s.build(sc); err != nil {
		return nil, err
	}
	for i, e := range sc.ElasticIPs {
		spec := TagSpecification{ResourceType: "elastic-ip"}
		for _, k := range slices.Sorted(maps.Keys(e.Tags)) {
			spec.Tags = append(spec.Tags, Tag{Key: k, Value: e.Tags[k]})
		}
		if _, err := s.AllocateAddress(AllocateAddressRequest{TagSpecifications: []TagSpecification{spec}}); err != nil {
			return nil, scenarioErr(fmt.Sprintf("elasticIPs[%d]", i), "%v", err)
		}
	}
	return s, nil
}

// SetTiming changes attach and detach delays and the eventual-consistency
// window for operations started from now on.
func (s *State) SetTiming(c TimingConfig) error {
	if err := c.Validate(); err != nil {
		return Errorf(CodeInvalidParameterValue, "%v", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.timing = c
	return nil
}

// Timing returns the timing in force.
func (s *State) Timing() TimingConfig {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.timing
}

// Account is the owner ID of every resource; Region is the state's region.
func (s *State) Account() string { return s.account }

// Region is the region the state emulates.
func (s *State) Region() string { return s.region }

func (s *State) nextSeq() uint64 {
	s.seq++
	return s.seq
}

func (s *State) newMeta(prefix, id string) meta {
	if id == "" {
		id = s.ids.newID(prefix)
	} else {
		s.ids.reserve(id)
	}
	return meta{id: id, seq: s.nextSeq()}
}

// lock takes the state's lock and runs the asynchronous work that is
// due (attachments, detachments, address moves, cooldowns; see async.go),
// so every action sees time having passed.
func (s *State) lock() {
	s.mu.Lock()
	s.runDue(s.now())
}

func (s *State) unlock() { s.mu.Unlock() }

// schedule moves a to its next state after a delay drawn from r, at once
// when the delay is zero.
func (s *State) schedule(a *attachment, r Range) {
	d := r.Sample(s.rng)
	if d <= 0 {
		s.advance(a)
		return
	}
	a.due = s.now().Add(d)
	from := a.status
	s.after(a.due, func() {
		if a.status == from && a.eni.attachment == a {
			s.advance(a) // else overtaken: detached early, terminated, deleted
		}
	})
}

// advance completes an attaching or detaching attachment.
func (s *State) advance(a *attachment) {
	switch a.status {
	case attaching:
		a.status = attached
	case detaching:
		s.finishDetach(a)
	}
}

// finishDetach frees the instance's device slot and leaves the ENI available.
func (s *State) finishDetach(a *attachment) {
	if a.instance.slots[a.slot()] == a.eni {
		delete(a.instance.slots, a.slot())
	}
	delete(s.attachments, a.id)
	a.eni.attachment = nil
	a.status = "detached"
}

// Lookups by ID, answering EC2's Malformed and NotFound errors.

func (s *State) eniByID(id string) (*eni, error) {
	if !wellFormedID(id, "eni") {
		return nil, Errorf(CodeENIMalformed, "Invalid id: %q (expecting \"eni-...\")", id)
	}
	e, ok := s.enis.get(id)
	if !ok {
		return nil, eniNotFound(id)
	}
	return e, nil
}

func eniNotFound(id string) *APIError {
	return Errorf(CodeENINotFound, "The networkInterface ID '%s' does not exist", id)
}

func (s *State) attachmentByID(id string) (*attachment, error) {
	a, ok := s.attachments[id]
	if !ok {
		return nil, Errorf(CodeAttachmentNotFound, "Interface attachment '%s' does not exist.", id)
	}
	return a, nil
}

func (s *State) instanceByID(id string) (*instance, error) {
	if !wellFormedID(id, "i") {
		return nil, Errorf(CodeInstanceMalformed, "Invalid id: %q", id)
	}
	in, ok := s.instances.get(id)
	if !ok {
		return nil, Errorf(CodeInstanceNotFound, "The instance ID '%s' does not exist", id)
	}
	return in, nil
}

func (s *State) subnetByID(id string) (*subnet, error) {
	if !wellFormedID(id, "subnet") {
		return nil, Errorf(CodeSubnetMalformed, "Invalid id: %q", id)
	}
	sn, ok := s.subnets.get(id)
	if !ok {
		return nil, Errorf(CodeSubnetNotFound, "The subnet ID '%s' does not exist", id)
	}
	return sn, nil
}

// groupsByID resolves security group IDs within v; empty ids means v's
// default group.
func (s *State) groupsByID(v *vpc, ids []string) ([]*securityGroup, error) {
	if len(ids) == 0 {
		return []*securityGroup{v.defaultSG}, nil
	}
	var out []*securityGroup
	for _, id := range ids {
		if !wellFormedID(id, "sg") {
			return nil, Errorf(CodeGroupMalformed, "Invalid id: %q (expecting \"sg-...\")", id)
		}
		g, ok := s.groups.get(id)
		if !ok {
			return nil, Errorf(CodeGroupNotFound, "The security group '%s' does not exist", id)
		}
		if g.vpc != v {
			return nil, Errorf(CodeInvalidParameterValue, "Security group %s and subnet belong to different networks.", id)
		}
		out = append(out, g)
	}
	return out, nil
}

// privateDNSName is EC2's internal host name of addr.
func (s *State) privateDNSName(addr netip.Addr) string {
	return "ip-" + strings.ReplaceAll(addr.String(), ".", "-") + "." + s.dnsSuffix
}

// publicDNSName is EC2's public host name of a public address:
// ec2-<address>.compute-1.amazonaws.com in us-east-1,
// ec2-<address>.<region>.compute.amazonaws.com elsewhere.
func (s *State) publicDNSName(addr netip.Addr) string {
	host := "ec2-" + strings.ReplaceAll(addr.String(), ".", "-")
	if s.region == "us-east-1" {
		return host + ".compute-1.amazonaws.com"
	}
	return host + "." + s.region + ".compute.amazonaws.com"
}

// zoneID turns us-east-1a into use1-az1, the shape of EC2's zone IDs.
func zoneID(region, name string) string {
	short := ""
	for i, part := range strings.Split(region, "-") {
		if i == 0 || part[0] >= '0' && part[0] <= '9' {
			short += part
		} else {
			short += part[:1]
		}
	}
	return fmt.Sprintf("%s-az%d", short, int(name[len(name)-1]-'a')+1)
}
