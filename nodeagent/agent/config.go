package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/enipam/enipam/nodeagent/routing"
)

// Config is what the core needs; Options turns flags into it.
type Config struct {
	// NodeName is the name of the node and of its CiliumNode.
	NodeName string
	// Routing lays out links, tables and rules.
	Routing routing.Config
	// ResyncInterval is how often the kernel is re-read and repaired
	// without any change to the CiliumNode.
	ResyncInterval time.Duration
	// LinkWaitBackoff is the first delay before converging again while an
	// ENI's link is missing or a write failed; it doubles up to
	// ResyncInterval.
	LinkWaitBackoff time.Duration
	// LinkWaitTimeout is how long an ENI's link may stay missing before a
	// LinkNotFound event is raised.
	LinkWaitTimeout time.Duration
	// StartupTaintKey names a taint the agent removes from its Node once
	// routing is ready; empty turns that off.
	StartupTaintKey string
	// RemapPoll is how soon the instance metadata is read again while an
	// address the operator asked about (spec.remapQueries) has not landed
	// on its ENI yet.
	RemapPoll time.Duration
	// Metadata reads the instance metadata; nil answers no remap query
	// (the operator then waits for EC2's describes).
	Metadata Metadata
}

// Metadata is the part of the instance metadata the agent reads.
type Metadata interface {
	// LocalIPv4s returns the private addresses listed on the ENI with
	// MAC mac (network/interfaces/macs/MAC/local-ipv4s).
	LocalIPv4s(ctx context.Context, mac string) ([]string, error)
}

// Defaults of Config.
const (
	DefaultResyncInterval  = time.Minute
	DefaultLinkWaitBackoff = time.Second
	DefaultLinkWaitTimeout = 2 * time.Minute
	DefaultRemapPoll       = 100 * time.Millisecond
)

// DefaultConfig returns the configuration for the node called nodeName.
func DefaultConfig(nodeName string) Config {
	return Config{
		NodeName:        nodeName,
		Routing:         routing.DefaultConfig(),
		ResyncInterval:  DefaultResyncInterval,
		LinkWaitBackoff: DefaultLinkWaitBackoff,
		LinkWaitTimeout: DefaultLinkWaitTimeout,
		RemapPoll:       DefaultRemapPoll,
	}
}

// Validate reports every invalid field.
func (c Config) Validate() error {
	var errs []error
	if c.NodeName == "" {
		errs = append(errs, errors.New("node name is required"))
	}
	if err := c.Routing.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.ResyncInterval <= 0 {
		errs = append(errs, fmt.Errorf("resync interval %v must be positive", c.ResyncInterval))
	}
	if c.LinkWaitBackoff <= 0 {
		errs = append(errs, fmt.Errorf("link wait backoff %v must be positive", c.LinkWaitBackoff))
	}
	if c.RemapPoll <= 0 {
		errs = append(errs, fmt.Errorf("remap poll interval %v must be positive", c.RemapPoll))
	}
	if c.LinkWaitTimeout <= 0 {
		errs = append(errs, fmt.Errorf("link wait timeout %v must be positive", c.LinkWaitTimeout))
	}
	if c.StartupTaintKey != "" {
		for _, msg := range validation.IsQualifiedName(c.StartupTaintKey) {
			errs = append(errs, fmt.Errorf("start-up taint key %q: %s", c.StartupTaintKey, msg))
		}
	}
	return errors.Join(errs...)
}
