package kernel_test

import (
	"testing"

	"github.com/enipam/enipam/nodeagent/kernel/kerneltest"
	"github.com/enipam/enipam/nodeagent/routing"
)

func TestProbeConnmark(t *testing.T) {
	ns := kerneltest.New(t)
	k := ns.Kernel()
	c, err := k.Connmark()
	t.Logf("read empty: %v %v", c, err)
	err = k.SetConnmark(&routing.Connmark{Primary: "eth0", Mark: 0x80})
	t.Logf("set: %v", err)
	c, err = k.Connmark()
	t.Logf("read: %v %v", c, err)
	err = k.SetConnmark(&routing.Connmark{Primary: "eth0", Mark: 0x80})
	t.Logf("set again: %v", err)
	c, err = k.Connmark()
	t.Logf("read: %v %v", c, err)
	err = k.SetConnmark(nil)
	t.Logf("del: %v", err)
	err = k.SetConnmark(nil)
	t.Logf("del again: %v", err)
	c, err = k.Connmark()
	t.Logf("read: %v %v", c, err)
}
