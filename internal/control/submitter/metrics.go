package submitter

import "github.com/prometheus/client_golang/prometheus"

// metrics are the submitter's Prometheus series. They exist even when no
// Registerer is given, so that the code records them unconditionally.
type metrics struct {
	messages         *prometheus.CounterVec
	attempts         *prometheus.CounterVec
	retries          *prometheus.CounterVec
	outcomes         *prometheus.CounterVec
	placementSeconds prometheus.Histogram
	backlog          prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "purser_submitter_messages_total",
			Help: "Submission messages received, by event (submit, cancel); redeliveries included.",
		}, []string{"event"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "purser_submitter_attempts_total",
			Help: "Attempts started (placement decisions committed), by cluster.",
		}, []string{"cluster"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "purser_submitter_retries_total",
			Help: "Transient failures talking to member clusters that led to a retry, by reason.",
		}, []string{"reason"}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "purser_submitter_outcomes_total",
			Help: "Runnables the submitter moved to Submitted, Failed or Expired.",
		}, []string{"phase"}),
		placementSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "purser_submitter_placement_seconds",
			Help:    "Time to gather the clusters and choose one for a runnable.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		backlog: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "purser_submitter_backlog",
			Help: "Runnables found waiting (Queued, Scheduled, or Cancelled with an open attempt) at the last rescan.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.messages, m.attempts, m.retries, m.outcomes, m.placementSeconds, m.backlog)
	}
	return m
}
