package agentsim_test

import (
	"os"
	"testing"

	"github.com/enipam/enipam/test/cluster"
)

// env is the control plane all tests of this package share; each test
// uses its own node names and its own Sim (and so its own Ledger).
var env *cluster.Cluster

func TestMain(m *testing.M) {
	os.Exit(cluster.Main(m, func(c *cluster.Cluster) { env = c }))
}
