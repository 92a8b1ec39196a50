// Package admin is the emulator's admin API, JSON over HTTP under /admin/
// on the EC2 listener (admin.go lists the routes), and [Client], its
// typed client. [Register] serves it for a [Target], the running
// emulator: instances join, stop and end, IMDS endpoints open, counters
// are read and reset, throttling, latency, faults and timing are read and
// replaced, and the whole state is dumped.
package admin
