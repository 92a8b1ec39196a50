package ec2sim

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

// need is one such check, run under the State's lock.
type need func(s *State) error

// dryRun answers a DryRun request: the first failing check's error, else
// DryRunOperation.
func (s *State) dryRun(needs []need) error {
	s.lock()
	defer s.unlock()
	for _, n := range needs {
		if err := n(s); err != nil {
			return err
		}
	}
	return apiErr(codeDryRunOperation, "Request would have succeeded, but DryRun flag is set.")
}

func needENI(id string) need {
	return func(s *State) error { _, err := s.eniToChange(id); return err }
}

func needInstance(id string) need {
	return func(s *State) error { _, err := s.instanceByID(id); return err }
}

func needSubnet(id string) need {
	return func(s *State) error { _, err := s.subnetByID(id); return err }
}

func needGroups(ids []string) need {
	return func(s *State) error {
		for _, id := range ids {
			if _, err := s.groupByID(id); err != nil {
				return err
			}
		}
		return nil
	}
}

func needAttachment(id string) need {
	return func(s *State) error { _, err := s.attachmentByID(id); return err }
}

func needTaggable(ids []string) need {
	return func(s *State) error {
		for _, id := range ids {
			if _, err := s.taggable(id); err != nil {
				return err
			}
		}
		return nil
	}
}

func needAddress(allocationID, publicIP string) need {
	return func(s *State) error { _, err := s.addressByRef(allocationID, publicIP); return err }
}

func needAssociation(id string) need {
	return func(s *State) error { _, err := s.associationByID(id); return err }
}
