package main

import (
	"fmt"
	"strings"
)

// The summary at the top of docs/benchmarks.md: each headline figure
// beside its goal and the peer or ceiling measured in the same run, with
// the ratio and whether the goal is met. Its cells read the results of the
// other sections, so it is rebuilt from whatever runs the document holds;
// the last column names the run a figure came from.

// goalCheck says whether q meets a goal: at least or at most target.
type goalCheck struct {
	q      quantity
	atMost bool
	target float64
	prec   int
	suffix string
}

// atLeast and atMost are goals on a figure or a ratio; prec and suffix
// print the shortfall.
func atLeast(q quantity, target float64, prec int, suffix string) goalCheck {
	return goalCheck{q: q, target: target, prec: prec, suffix: suffix}
}

func atMost(q quantity, target float64, prec int, suffix string) goalCheck {
	return goalCheck{q: q, atMost: true, target: target, prec: prec, suffix: suffix}
}

func (g goalCheck) text(r lookup) string {
	v, why, ok := g.q.get(r)
	if !ok {
		return why
	}
	met := v >= g.target
	if g.atMost {
		met = v <= g.target
	}
	if met {
		return "met"
	}
	return fmt.Sprintf("missed: %s%s against %s%s", number(v, g.prec), g.suffix, number(g.target, g.prec), g.suffix)
}

// constant is a published figure that was not measured here (a peer's own
// documented result), usable in a ratio.
type constant struct {
	v      float64
	prec   int
	suffix string
}

func (c constant) get(lookup) (float64, string, bool) { return c.v, "", true }
func (c constant) text(lookup) string                 { return number(c.v, c.prec) + c.suffix }

// from names the section a figure is explained in and the run that
// measured it.
type from struct {
	section string
	name    string // a result the row reads
}

func (f from) text(r lookup) string {
	link := "[" + f.section + "](#" + anchor(f.section) + ")"
	if rr, ok := r.(interface{ runOf(name string) string }); ok {
		if run := rr.runOf(f.name); run != "" {
			return link + ", " + run
		}
	}
	return link
}

// anchor is the GitHub anchor of a heading.
func anchor(heading string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(heading) {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
			b.WriteRune(c)
		case c == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

var summary = section{ID: "summary",
	Columns: []string{"headline", "purser", "goal", "peer or ceiling (same run unless said)", "purser / peer", "goal met", "where, run"},
	Rows:    summaryRows(),
}

func summaryRows() [][]cell {
	submitPG := metric("server.BenchmarkSubmit/postgres", "submissions/s", 0, "/s")
	ceilingPG := best(metric("store.BenchmarkInsertRunnableWithAuditAndOutbox/postgres/serial", "ops/s", 0, ""),
		metric("store.BenchmarkInsertRunnableWithAuditAndOutbox/postgres/parallel", "ops/s", 0, ""))
	throughPurser := metric("submitter.TestBenchmarkSubmit", "runnables/s", 1, "/s")
	direct := metric("submitter.TestBenchmarkSubmit", "direct-objects/s", 1, "/s")
	placed := metric("submitter.TestBenchmarkPlacementScale", "postgres-runnables/s", 0, "/s")
	ingest := metric("inventory.BenchmarkIngestEvents/postgres", "events/s", 0, "/s")
	upsert := metric("inventory.BenchmarkRawUpsert/postgres", "rows/s", 0, "/s")
	reconcile := secs("inventory.BenchmarkReconcileSnapshot/postgres", 2)
	listPurser := millis("server.BenchmarkInventoryList/purser-postgres/selector", 1)
	listKube := millis("server.BenchmarkInventoryList/kube-apiserver/selector", 1)
	watchPurser := metric("kubeapi.BenchmarkK8sWatchLatency", "purser-ms-p50", 0, " ms")
	watchKube := metric("kubeapi.BenchmarkK8sWatchLatency", "kube-apiserver-ms-p50", 0, " ms")
	trimmed := metric("agent.BenchmarkInformerMemory/trimmed", "B/object", 0, " B")
	plain := metric("agent.BenchmarkInformerMemory/untrimmed", "B/object", 0, " B")
	repair := metric("syncer.BenchmarkSyncer", "ms/repair-p99", 0, " ms")
	appFailover := metric("failover.BenchmarkFailoverApplication", "created-beyond-toleration-s", 2, " s")
	cluster500 := metric("failover.BenchmarkFailoverCluster/500", "all-running-s", 1, " s")
	drainMax := metric("failover.BenchmarkDrain", "move-downtime-max-s", 2, " s")
	failoverMax := metric("failover.BenchmarkDrain", "failover-downtime-max-s", 2, " s")
	kueueUsage := metric("submitter.TestBenchmarkKueueBaselineOneCohort", "usage-%", 1, " %")
	dcAccepted := metric("soak.TestBenchmarkDCAccept", "sync-5ms-grouped/s", 0, "/s")
	designIngest := designSize("ingest-objects/s", 0, "/s")
	designNamespace := designSizeMs("ns-p99-s", 1)
	designSelector := designSizeMs("sel-p99-s", 1)
	designReconcile := designSizeMs("snap-p99-s", 0)
	designFrom := func(name string) from { return from{"The inventory at design size", name} }
	return [][]cell{
		{lit("submissions accepted by the API (PostgreSQL, 16 clients)"), submitPG, lit("≥ 100/s (design size)"),
			join(" ", ceilingPG, lit("raw transactions/s")), percent(submitPG, ceilingPG), atLeast(submitPG, 100, 0, "/s"),
			from{"Accepting submissions (control plane core)", "server.BenchmarkSubmit/postgres"}},
		{lit("runnables created on a cluster through purser (1,000)"), throughPurser, lit("≥ 80 % of client-go direct"),
			join(" ", direct, lit("client-go direct")), percent(throughPurser, direct), atLeast(ratio(throughPurser, direct, 2), 0.8, 2, ""),
			from{"Submitting runnables (submitter)", "submitter.TestBenchmarkSubmit"}},
		{lit("placement, 10,000 queued over 100 clusters (PostgreSQL)"), placed, lit("≥ 100/s (design size)"),
			lit(""), lit(""), atLeast(placed, 100, 0, "/s"),
			from{"Placement and queueing at scale", "submitter.TestBenchmarkPlacementScale"}},
		{lit("Kueue's own scheduling baseline, 1 of its 5 cohorts: CPU in use over the quota"), kueueUsage, lit("at least Kueue's"),
			lit("58.7 % (Kueue's published mean of the whole baseline; not this run)"), ratio(kueueUsage, constant{58.7, 1, " %"}, 2),
			atLeast(kueueUsage, 58.7, 1, " %"), from{"Placement and queueing at scale", "submitter.TestBenchmarkKueueBaselineOneCohort"}},
		{lit("inventory ingest (PostgreSQL)"), ingest, lit("≥ 10,000/s"),
			join(" ", upsert, lit("raw batched upsert")), percent(ingest, upsert), atLeast(ingest, 10000, 0, "/s"),
			from{"Inventory (agent and ingester)", "inventory.BenchmarkIngestEvents/postgres"}},
		{lit("snapshot reconcile of 100,000 records (PostgreSQL)"), reconcile, lit("< 2 s"),
			lit(""), lit(""), atMost(reconcile, 2, 2, " s"), from{"Inventory (agent and ingester)", "inventory.BenchmarkReconcileSnapshot/postgres"}},
		{lit("inventory ingest at design size: 1,000,000 objects of 100 clusters (PostgreSQL)"), designIngest, lit("≥ 10,000/s"),
			lit(""), lit(""), atLeast(designIngest, 10000, 0, "/s"), designFrom("scale.TestBenchmarkInventoryDesignSize")},
		{lit("inventory list of one namespace among 1,000,000 records under 1,000 changes/s, p99"), designNamespace, lit("< 50 ms"),
			lit(""), lit(""), atMost(designNamespace, 50, 1, " ms"), designFrom("scale.TestBenchmarkInventoryDesignSize")},
		{lit("inventory list by label selector across 1,000,000 records under churn, p99"), designSelector, lit("< 50 ms"),
			lit(""), lit(""), atMost(designSelector, 50, 1, " ms"), designFrom("scale.TestBenchmarkInventoryDesignSize")},
		{lit("snapshot reconcile of one cluster of 10,000 objects under churn, p99 of 100"), designReconcile, lit("< 1 s"),
			lit(""), lit(""), atMost(designReconcile, 1000, 0, " ms"), designFrom("scale.TestBenchmarkInventoryDesignSize")},
		{lit("inventory list by label selector, 100 of 10,001 (PostgreSQL)"), listPurser, lit("no slower than the kube-apiserver"),
			join(" ", listKube, lit("kube-apiserver")), ratio(listPurser, listKube, 2), atMost(ratio(listPurser, listKube, 2), 1, 2, "×"),
			from{"Inventory list against the kube-apiserver", "server.BenchmarkInventoryList/purser-postgres/selector"}},
		{lit("`kubectl get -w` through `/k8s`, change to line, p50"), watchPurser, lit("under 1 s"),
			join(" ", watchKube, lit("directly on the member")), ratio(watchPurser, watchKube, 1), atMost(watchPurser, 1000, 0, " ms"),
			from{"The farm through kubectl (`/k8s`)", "kubeapi.BenchmarkK8sWatchLatency"}},
		{lit("agent heap per watched object"), trimmed, lit("≤ 0.5 of a plain informer"),
			join(" ", plain, lit("plain informer")), ratio(trimmed, plain, 2), atMost(ratio(trimmed, plain, 2), 0.5, 2, ""),
			from{"Inventory (agent and ingester)", "agent.BenchmarkInformerMemory/trimmed"}},
		{lit("drift repair of a deployable, p99"), repair, lit("< 2 s"),
			lit("Argo CD 120–180 s, OCM 4–6 min (their documented periods; not this run)"), lit(""), atMost(repair, 2000, 0, " ms"),
			from{"Deployables (syncer)", "syncer.BenchmarkSyncer"}},
		{lit("application failover: unhealthy to the new copy created, beyond the toleration"), appFailover, lit("≤ 1 s"),
			lit(""), lit(""), atMost(appFailover, 1, 2, " s"), from{"Failover", "failover.BenchmarkFailoverApplication"}},
		{lit("cluster failover of 500 FlinkDeployments: all running elsewhere"), cluster500, lit("bounded by the eviction rate (20/s: 25 s)"),
			lit(""), lit(""), atMost(cluster500, 30, 1, " s"), from{"Failover", "failover.BenchmarkFailoverCluster/500"}},
		{lit("planned move (drain): a job's longest downtime"), drainMax, lit("below a failover's"),
			join(" ", failoverMax, lit("failover of the same jobs")), ratio(drainMax, failoverMax, 2), atMost(ratio(drainMax, failoverMax, 2), 1, 2, "×"),
			from{"Drain by planned moves", "failover.BenchmarkDrain"}},
		{lit("submissions accepted over three DCs (5 ms, synchronous standby, grouped)"), dcAccepted, lit("≥ 100/s (design size)"),
			lit(""), lit(""), atLeast(dcAccepted, 100, 0, "/s"), from{"What a data center costs", "soak.TestBenchmarkDCAccept"}},
	}
}
