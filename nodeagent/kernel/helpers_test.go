package kernel_test

import (
	"github.com/vishvananda/netlink"

	"github.com/enipam/enipam/nodeagent/kernel"
	"github.com/enipam/enipam/nodeagent/kernel/kerneltest"
)

func kernelOn(h *netlink.Handle, ns *kerneltest.Namespace) *kernel.Kernel {
	return kernel.New(h, ns.NS)
}
