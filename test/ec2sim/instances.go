package ec2sim

import (
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
}

// AddInstance launches an instance, running at once, with its primary ENI
// (device index 0, DeleteOnTermination) attached. The primary ENI never
// lags (TimingConfig.EventualConsistency): a node joins a cluster long
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

// TerminateInstance terminates an instance at once: its DeleteOnTermination
// ENIs are deleted, the others detached and left available. The instance
// stays visible as terminated. Terminating it again is a no-op.
func (s *State) TerminateInstance(id string) error {
	s.lock()
	defer s.unlock()
	in, err := s.instanceByID(id)
	if err != nil {
		return err
	}
	s.terminate(in)
	return nil
}

func (s *State) launch(req LaunchRequest) (*instance, error) {
	typ, ok := s.types[req.InstanceType]
	if !ok {
		return nil, apiErr(codeInvalidParameterValue, "Invalid value '%s' for InstanceType.", req.InstanceType)
	}
	sn, err := s.subnetByID(req.SubnetID)
	if err != nil {
		return nil, err
	}
	if req.InstanceID != "" {
		if !wellFormedID(req.InstanceID, "i") {
			return nil, apiErr(codeInstanceMalformed, "Invalid id: %q", req.InstanceID)
		}
		if _, dup := s.instances.get(req.InstanceID); dup {
			return nil, apiErr(codeInvalidParameterValue, "Instance %s already exists", req.InstanceID)
		}
	}
	var ips []netip.Addr
	if req.PrivateIP != "" {
		ip, err := netip.ParseAddr(req.PrivateIP)
		if err != nil {
			return nil, apiErr(codeInvalidParameterValue, "Invalid private IP address %q", req.PrivateIP)
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
		reservationID: s.ids.newID("r"), primaryIP: e.ips[0], slots: map[int]*eni{},
	}
	in.tags = append([]Tag(nil), req.Tags...)
	sort.Slice(in.tags, func(i, j int) bool { return in.tags[i].Key < in.tags[j].Key })
	s.instances.add(in)
	a, err := s.attach(e, in, 0, true)
	if err != nil {
		// Cannot happen for a fresh instance and ENI.
		panic(err)
	}
	a.deleteOnTermination = true
	return in, nil
}

func (s *State) terminate(in *instance) {
	if in.state == instanceTerminated {
		return
	}
	in.state = instanceTerminated
	for _, e := range in.slots {
		if e.attachment.deleteOnTermination {
			s.deleteENI(e)
		} else {
			s.finishDetach(e.attachment)
		}
	}
}
