package poolcontroller

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/enipam/enipam/operator/metricsreg"
)

// servedRegistry is a registry as the operator's command serves it.
func servedRegistry() (prometheus.Registerer, prometheus.Gatherer) {
	reg := metricsreg.New(prometheus.NewRegistry())
	return reg, reg
}
