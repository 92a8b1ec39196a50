// Package ciliumnode translates the node's CiliumNode, under the policy
// values of its NodeRouting spec, into the routing package's Node: which
// ENIs enipam manages, and which addresses live on each (status.eni.enis
// addresses and prefixes, the pool's IPs, minus the released ones).
package ciliumnode
