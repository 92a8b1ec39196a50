package inventory

import "github.com/prometheus/client_golang/prometheus"

var subnetFreeDesc = prometheus.NewDesc("enipam_subnet_available_ips",
	"Free addresses of each known subnet, as EC2 last reported them and adjusted by the operator's own changes.",
	[]string{"subnet", "availability_zone", "vpc"}, nil)

// Describe implements prometheus.Collector.
func (inv *Inventory) Describe(ch chan<- *prometheus.Desc) { ch <- subnetFreeDesc }

// Collect implements prometheus.Collector: free addresses per subnet.
func (inv *Inventory) Collect(ch chan<- prometheus.Metric) {
	for _, s := range inv.Subnets() {
		ch <- prometheus.MustNewConstMetric(subnetFreeDesc, prometheus.GaugeValue, float64(s.Available), s.ID, s.AZ, s.VPCID)
	}
}
