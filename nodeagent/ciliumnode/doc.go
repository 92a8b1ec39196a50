// Package ciliumnode reads the one CiliumNode an agent cares about: it
// watches it by name (never the whole cluster) and translates it into the
// routing package's Node, applying the contract with the operator: which
// ENIs enipam manages and which pool IP lives on which ENI.
package ciliumnode
