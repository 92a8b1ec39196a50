// Package ciliumnode translates the node's CiliumNode and its NodeRouting
// spec (the ENIs it lists, and the policy values) into the routing
// package's Node: which ENIs enipam manages, and which addresses live on
// each (the listed addresses and prefixes of spec.enis, or of
// status.eni.enis for an ENI only an earlier operator lists there, the
// addresses the node holds in its pool or in use, minus the released
// ones). An ENI the policy no longer selects
// keeps routing the addresses the node still holds on it until they are
// released: a policy change applies to new addresses only.
package ciliumnode
