package server

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The standing headroom of each DC as metrics: the DC list's what-if
// (dcHeadroom, computed at most once per DCHeadroomTTL whoever asks),
// read at each scrape, so that an alert can say when the farm could no
// longer absorb losing a DC, and by how much.
var (
	dcAbsorbableDesc = prometheus.NewDesc("purser_dc_headroom_absorbable",
		"1 when the farm could absorb losing the DC now (the drill's what-if says Absorbed), 0 when not.", []string{"dc"}, nil)
	dcShortRunnablesDesc = prometheus.NewDesc("purser_dc_headroom_short_runnables",
		"Runnables of the DC that would be left queued, were it lost now.", []string{"dc"}, nil)
	dcShortDesc = prometheus.NewDesc("purser_dc_headroom_short",
		"What the runnables left queued ask for, by resource (cpu in cores, memory in bytes, others in their own units).",
		[]string{"dc", "resource"}, nil)
)

// dcScrapeTimeout bounds the what-if a scrape may wait for (about 2 s at
// 10,000 runnables).
const dcScrapeTimeout = 20 * time.Second

// dcCollector exports the headroom of the DCs of s.
type dcCollector struct{ s *Server }

func (c dcCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- dcAbsorbableDesc
	ch <- dcShortRunnablesDesc
	ch <- dcShortDesc
}

func (c dcCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), dcScrapeTimeout)
	defer cancel()
	items, err := c.s.dcHeadroom(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(dcAbsorbableDesc, err)
		return
	}
	for _, dc := range items {
		name, hr := dc.Metadata.Name, dc.Status.Headroom
		absorbable, short := 0.0, 0.0
		if hr.Absorbable {
			absorbable = 1
		}
		if hr.Short != nil {
			short = float64(hr.Short.Runnables)
			for res, q := range hr.Short.Requests {
				if v, err := resource.ParseQuantity(q); err == nil {
					ch <- prometheus.MustNewConstMetric(dcShortDesc, prometheus.GaugeValue, v.AsApproximateFloat64(), name, res)
				}
			}
		}
		ch <- prometheus.MustNewConstMetric(dcAbsorbableDesc, prometheus.GaugeValue, absorbable, name)
		ch <- prometheus.MustNewConstMetric(dcShortRunnablesDesc, prometheus.GaugeValue, short, name)
	}
}
