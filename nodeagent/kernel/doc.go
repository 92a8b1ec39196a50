// Package kernel is the Linux implementation of routing.Host: netlink
// through a *netlink.Handle, sysctls through /proc/sys/net (or a mount of
// it, WithProcSysNet) read and written from a thread inside the handle's
// network namespace, and enipam's nf_tables table (the connmark rules)
// through a minimal NETLINK_NETFILTER client of its own.
//
// Everything acts on one network namespace, chosen by the caller: the
// node's own in production, a namespace created by a test otherwise. The
// process's namespace is never switched; only a dedicated, throwaway OS
// thread enters the target namespace for sysctls.
package kernel
