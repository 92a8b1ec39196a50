// Package behaviour is how the emulated EC2 behaves around its model of
// EC2 (package state): request throttling by token buckets shaped
// like EC2's, latency drawn per call, and injected faults, each with a
// configuration that scenario YAML and the admin API read and write, and
// the durations (Duration, Range) that these and the State's timing are
// made of. It knows nothing of the wire or of the State: the emulator's
// HTTP layer asks it whether to serve a call, how long to wait and
// whether to fail it, and answers.
package behaviour
