package state

// An instance ends as on EC2, over time. TerminateInstance puts it in
// shutting-down for TimingConfig.TerminateDelay: its attachments other
// than the primary go detaching at once; those without
// DeleteOnTermination finish detaching after a DetachDelay (no later
// than the end) and leave their ENI available; at the end the instance
// is terminated, its DeleteOnTermination ENIs deleted and the rest
// detached. StopInstance puts it in stopping for TimingConfig.StopDelay,
// then stopped, its ENIs still attached. Neither state takes new
// attachments (IncorrectInstanceState) until stopped; IMDS answers until
// the instance is stopped or terminated. With no delay both end within
// the call.

// Instance states besides running and terminated (model.go).
const (
	instanceShuttingDown = "shutting-down"
	instanceStopping     = "stopping"
	instanceStopped      = "stopped"
)

// TerminateInstance terminates an instance: through shutting-down when
// TimingConfig.TerminateDelay is set, at once otherwise. The instance
// stays visible as terminated. Terminating it again is a no-op.
func (s *State) TerminateInstance(id string) error {
	s.lock()
	defer s.unlock()
	in, err := s.instanceByID(id)
	if err != nil {
		return err
	}
	if in.state == instanceTerminated || in.state == instanceShuttingDown {
		return nil
	}
	d := s.timing.TerminateDelay.Sample(s.rng)
	if d <= 0 {
		s.terminate(in)
		return nil
	}
	in.state = instanceShuttingDown
	end := s.now().Add(d)
	for at, e := range in.slots {
		a := e.attachment
		if at == primarySlot || a.status == detaching {
			continue
		}
		a.status = detaching
		if a.deleteOnTermination {
			continue // deleted at the end
		}
		due := s.now().Add(min(s.timing.DetachDelay.Sample(s.rng), d))
		a.due = due
		s.after(due, func() {
			if a.status == detaching && a.eni.attachment == a {
				s.finishDetach(a)
			}
		})
	}
	s.after(end, func() { s.terminate(in) })
	return nil
}

// terminate ends in now: its DeleteOnTermination ENIs are deleted, the
// others detached and left available.
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

// StopInstance stops a running instance: stopping for
// TimingConfig.StopDelay, then stopped, its ENIs left attached. Stopping
// one stopping or stopped is a no-op; a terminated or shutting-down one
// is IncorrectInstanceState.
func (s *State) StopInstance(id string) error {
	s.lock()
	defer s.unlock()
	in, err := s.instanceByID(id)
	if err != nil {
		return err
	}
	switch in.state {
	case instanceStopping, instanceStopped:
		return nil
	case instanceRunning:
	default:
		return Errorf(CodeIncorrectInstanceState, "This instance '%s' is not in a state from which it can be stopped.", in.id)
	}
	d := s.timing.StopDelay.Sample(s.rng)
	if d <= 0 {
		in.state = instanceStopped
		return nil
	}
	in.state = instanceStopping
	s.after(s.now().Add(d), func() {
		if in.state == instanceStopping {
			in.state = instanceStopped
		}
	})
	return nil
}

// takesAttachments reports whether an instance in its state can take a
// new attachment: running or stopped, as on EC2.
func (in *instance) takesAttachments() bool {
	return in.state == instanceRunning || in.state == instanceStopped
}

// servesIMDS reports whether the instance is up to answer IMDS.
func (in *instance) servesIMDS() bool {
	return in.state != instanceStopped && in.state != instanceTerminated
}
