package ec2

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/enipam/enipam/operator/cloud"
)

// Metrics of the EC2 chokepoint.
type Metrics struct {
	duration    *prometheus.HistogramVec
	throttled   *prometheus.CounterVec
	limiterWait *prometheus.HistogramVec
}

// NewMetrics registers the adapter's metrics on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "enipam_ec2_api_duration_seconds",
			Help:    "Duration of EC2 API attempts by action and EC2 error code (OK on success).",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"action", "code"}),
		throttled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "enipam_ec2_api_throttled_total",
			Help: "EC2 API attempts refused by EC2's throttling, by action.",
		}, []string{"action"}),
		limiterWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "enipam_ec2_rate_limit_wait_seconds",
			Help:    "Time EC2 calls waited for the client-side token bucket, by action.",
			Buckets: []float64{0, .01, .1, .5, 1, 5, 10, 30, 60},
		}, []string{"action"}),
	}
	for _, c := range []prometheus.Collector{m.duration, m.throttled, m.limiterWait} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) observe(action string, err error, d time.Duration) {
	code := "OK"
	var ce *cloud.Error
	switch {
	case errors.As(err, &ce) && ce.Code != "":
		code = ce.Code
	case err != nil:
		code = "Error"
	}
	m.duration.WithLabelValues(action, code).Observe(d.Seconds())
}
