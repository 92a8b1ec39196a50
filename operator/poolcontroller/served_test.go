package poolcontroller

import "github.com/prometheus/client_golang/prometheus"

// servedRegistry is a registry as the operator's command serves it.
func servedRegistry() (prometheus.Registerer, prometheus.Gatherer) {
	reg := prometheus.NewRegistry()
	return reg, reg
}
