package agent

import (
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
}

// Defaults of Config.
const (
	DefaultResyncInterval  = time.Minute
	DefaultLinkWaitBackoff = time.Second
	DefaultLinkWaitTimeout = 2 * time.Minute
)

// DefaultConfig returns the configuration for the node called nodeName.
func DefaultConfig(nodeName string) Config {
	return Config{
		NodeName:        nodeName,
		Routing:         routing.DefaultConfig(),
		ResyncInterval:  DefaultResyncInterval,
		LinkWaitBackoff: DefaultLinkWaitBackoff,
		LinkWaitTimeout: DefaultLinkWaitTimeout,
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
