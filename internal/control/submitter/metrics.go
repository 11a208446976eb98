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
	sumsDivergence   *prometheus.CounterVec
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
		sumsDivergence: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "purser_submitter_sums_divergence_total",
			Help: "Times the placement sums kept in memory differed from the store, by who found it: the periodic recount, or the re-check of a placement's cluster and quota.",
		}, []string{"found"}),
	}
	if reg != nil {
		reg.MustRegister(m.messages, m.attempts, m.retries, m.outcomes, m.placementSeconds, m.backlog, m.sumsDivergence)
	}
	return m
}
