package state

import (
	"errors"
	"net/netip"
	"sort"
)

// LaunchRequest adds a running instance: a node joining the cluster.
type LaunchRequest struct {
	// InstanceID is optional; one is generated when empty.
	InstanceID   string `json:"instanceId,omitempty"`
	InstanceType string `json:"instanceType"`
	// SubnetID is a subnet ID or the value of its Name tag.
	SubnetID string `json:"subnetId"`
	// SecurityGroupIDs default to the VPC's default group.
	SecurityGroupIDs []string `json:"securityGroupIds,omitempty"`
	// PrivateIP defaults to the subnet's lowest free address.
	PrivateIP string `json:"privateIp,omitempty"`
	Tags      []Tag  `json:"tags,omitempty"`
	// NetworkInterfaces are the interfaces the instance boots with besides
	// its primary ENI, as RunInstances' NetworkInterface.N: EFAs and the
	// interfaces of other network cards.
	NetworkInterfaces []LaunchInterface `json:"networkInterfaces,omitempty"`
}

// LaunchInterface is one interface an instance boots with, made in the
// instance's subnet with its security groups and deleted with it.
type LaunchInterface struct {
	NetworkCardIndex int `json:"networkCardIndex"`
	DeviceIndex      int `json:"deviceIndex"`
	// InterfaceType is interface (the default), efa or efa-only.
	InterfaceType string `json:"interfaceType,omitempty"`
	// SecondaryIPs are addresses besides the interface's primary one.
	SecondaryIPs int `json:"secondaryIPs,omitempty"`
}

// AddInstance launches an instance, running at once, with its primary ENI
// (network card 0, device index 0, DeleteOnTermination) and the
// interfaces of req.NetworkInterfaces attached, all or nothing. Its ENIs
// never lag (TimingConfig.EventualConsistency): a node joins a cluster long
// after EC2 made its instance.
func (s *State) AddInstance(req LaunchRequest) (Instance, error) {
	s.lock()
	defer s.unlock()
	if sn, err := s.subnetRef(req.SubnetID); err == nil {
		req.SubnetID = sn.id
	}
	in, err := s.launch(req)
	if err != nil {
		return Instance{}, err
	}
	return s.instanceView(in), nil
}

func (s *State) launch(req LaunchRequest) (*instance, error) {
	typ, ok := s.types[req.InstanceType]
	if !ok {
		return nil, Errorf(CodeInvalidParameterValue, "Invalid value '%s' for InstanceType.", req.InstanceType)
	}
	sn, err := s.subnetByID(req.SubnetID)
	if err != nil {
		return nil, err
	}
	if req.InstanceID != "" {
		if !wellFormedID(req.InstanceID, "i") {
			return nil, Errorf(CodeInstanceMalformed, "Invalid id: %q", req.InstanceID)
		}
		if _, dup := s.instances.get(req.InstanceID); dup {
			return nil, Errorf(CodeInvalidParameterValue, "Instance %s already exists", req.InstanceID)
		}
	}
	var ips []netip.Addr
	if req.PrivateIP != "" {
		ip, err := netip.ParseAddr(req.PrivateIP)
		if err != nil {
			return nil, Errorf(CodeInvalidParameterValue, "Invalid private IP address %q", req.PrivateIP)
		}
		ips = append(ips, ip)
	}
	for _, t := range req.Tags {
		if err := validateTag(t); err != nil {
			return nil, err
		}
	}
	e, err := s.createENI(eniSpec{subnet: sn, groupIDs: req.SecurityGroupIDs, ips: ips})
	if err != nil {
		return nil, err
	}
	in := &instance{
		meta: s.newMeta("i", req.InstanceID), typ: typ, subnet: sn, groups: e.groups,
		state: instanceRunning, launched: s.now(), imageID: "ami-0" + s.ids.hex(16),
		reservationID: s.ids.newID("r"), primaryIP: e.ips[0], slots: map[slot]*eni{},
	}
	in.tags = append([]Tag(nil), req.Tags...)
	sort.Slice(in.tags, func(i, j int) bool { return in.tags[i].Key < in.tags[j].Key })
	s.instances.add(in)
	a, err := s.attach(e, in, primarySlot, true)
	if err != nil {
		// Cannot happen for a fresh instance and ENI.
		panic(err)
	}
	a.deleteOnTermination = true
	for i, li := range req.NetworkInterfaces {
		if err := s.launchInterface(in, li); err != nil {
			// All or nothing: the instance never existed.
			s.terminate(in)
			s.instances.remove(in)
			var ae *APIError
			if errors.As(err, &ae) {
				return nil, Errorf(ae.Code, "NetworkInterface.%d: %s", i+1, ae.Message)
			}
			return nil, err
		}
	}
	return in, nil
}

// launchInterface makes and attaches one boot interface of in.
func (s *State) launchInterface(in *instance, li LaunchInterface) error {
	switch li.InterfaceType {
	case "", typeInterface, typeEFA, typeEFAOnly:
	default:
		return Errorf(CodeInvalidParameterValue, "Invalid value '%s' for InterfaceType", li.InterfaceType)
	}
	var groupIDs []string
	for _, g := range in.groups {
		groupIDs = append(groupIDs, g.id)
	}
	e, err := s.createENI(eniSpec{subnet: in.subnet, groupIDs: groupIDs, secondaries: li.SecondaryIPs, interfaceType: li.InterfaceType})
	if err != nil {
		return err
	}
	a, err := s.attach(e, in, slot{card: li.NetworkCardIndex, device: li.DeviceIndex}, true)
	if err != nil {
		s.deleteENI(e)
		return err
	}
	a.deleteOnTermination = true
	return nil
}
