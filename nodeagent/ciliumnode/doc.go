// Package ciliumnode translates the node's CiliumNode, under the policy
// values of its NodeRouting spec, into the routing package's Node: which
// ENIs enipam manages, and which addresses live on each (status.eni.enis
// addresses and prefixes, the addresses the node holds in its pool or in
// use, minus the released ones). An ENI the policy no longer selects
// keeps routing the addresses the node still holds on it until they are
// released: a policy change applies to new addresses only.
package ciliumnode
