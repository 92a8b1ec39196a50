package state

// A request with DryRun=true is checked as EC2 checks it and then answered
// DryRunOperation instead of being carried out. EC2 documents only that
// DryRun checks permissions; clients see that it also validates the
// request and that the resources it names exist (a missing ENI is
// InvalidNetworkInterfaceID.NotFound, DryRun or not). So a dry run here
// decodes and validates the parameters, then a describe runs whole (it
// changes nothing), and any other action checks that each resource it
// names exists — to the calls that change ENIs, an ENI within the
// mutation window does not. Whether EC2 also checks limits and states
// (a full subnet, an ENI in use) under DryRun is not documented; ec2sim
// does not.

// Need is one such check, run under the State's lock.
type Need func(s *State) error

// DryRun answers a DryRun request: the first failing check's error, else
// DryRunOperation.
func (s *State) DryRun(needs []Need) error {
	s.lock()
	defer s.unlock()
	for _, n := range needs {
		if err := n(s); err != nil {
			return err
		}
	}
	return Errorf(CodeDryRunOperation, "Request would have succeeded, but DryRun flag is set.")
}

// NeedENI checks that the ENI exists and the calls that change ENIs may see it.
func NeedENI(id string) Need {
	return func(s *State) error { _, err := s.eniToChange(id); return err }
}

// NeedInstance checks that the instance exists.
func NeedInstance(id string) Need {
	return func(s *State) error { _, err := s.instanceByID(id); return err }
}

// NeedSubnet checks that the subnet exists.
func NeedSubnet(id string) Need {
	return func(s *State) error { _, err := s.subnetByID(id); return err }
}

// NeedGroups checks that every security group exists.
func NeedGroups(ids []string) Need {
	return func(s *State) error {
		for _, id := range ids {
			if _, err := s.groupByID(id); err != nil {
				return err
			}
		}
		return nil
	}
}

// NeedAttachment checks that the attachment exists.
func NeedAttachment(id string) Need {
	return func(s *State) error { _, err := s.attachmentByID(id); return err }
}

// NeedTaggable checks that every resource exists and takes tags.
func NeedTaggable(ids []string) Need {
	return func(s *State) error {
		for _, id := range ids {
			if _, err := s.taggable(id); err != nil {
				return err
			}
		}
		return nil
	}
}

// NeedAddress checks that the Elastic IP (by allocation ID or public IP) exists.
func NeedAddress(allocationID, publicIP string) Need {
	return func(s *State) error { _, err := s.addressByRef(allocationID, publicIP); return err }
}

// NeedAssociation checks that the Elastic IP association exists.
func NeedAssociation(id string) Need {
	return func(s *State) error { _, err := s.associationByID(id); return err }
}
