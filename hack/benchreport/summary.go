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

// designSection is the heading of BenchmarkAgentDesignSize's section.
const designSection = "The agent at design size (100,000 objects)"

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
	placedSQLite := metric("submitter.TestBenchmarkPlacementScale", "sqlite-runnables/s", 0, "/s")
	decisionP99 := func(eng string) fig {
		return fig{name: "submitter.TestBenchmarkPlacementScale", unit: eng + "-p99-s", scale: 1e3, prec: 1, suffix: " ms"}
	}
	ingest := metric("inventory.BenchmarkIngestEvents/postgres", "events/s", 0, "/s")
	upsert := metric("inventory.BenchmarkRawUpsert/postgres", "rows/s", 0, "/s")
	reconcile := secs("inventory.BenchmarkReconcileSnapshot/postgres", 2)
	listPurser := millis("server.BenchmarkInventoryList/purser-postgres/selector", 1)
	listKube := millis("server.BenchmarkInventoryList/kube-apiserver/selector", 1)
	watchPurser := metric("kubeapi.BenchmarkK8sWatchLatency", "purser-ms-p50", 0, " ms")
	watchKube := metric("kubeapi.BenchmarkK8sWatchLatency", "kube-apiserver-ms-p50", 0, " ms")
	watchesPushed := metric("kubeapi.BenchmarkK8sWatches/watches=1000/pushed", "ms-p50-to-last-watcher", 1, " ms")
	watchesPolled := metric("kubeapi.BenchmarkK8sWatches/watches=1000", "ms-p50-to-last-watcher", 1, " ms")
	trimmed := metric("agent.BenchmarkInformerMemory/trimmed", "B/object", 0, " B")
	plain := metric("agent.BenchmarkInformerMemory/untrimmed", "B/object", 0, " B")
	designAgent := metric(agentDesignSize, "agent-B/object", 0, " B")
	designPlain := metric(agentDesignSize, "plain-B/object", 0, " B")
	designSnapshot := metric(agentDesignSize, "snapshot-s", 2, " s")
	repair := metric("syncer.BenchmarkSyncer", "ms/repair-p99", 0, " ms")
	appFailover := metric("failover.BenchmarkFailoverApplication", "created-beyond-toleration-s", 2, " s")
	cluster1000 := metric("failover.BenchmarkFailoverCluster/1000", "all-running-s", 1, " s")
	cluster1000Tuned := metric("failover.BenchmarkFailoverCluster/1000-tuned", "all-running-s", 1, " s")
	appMany := metric("failover.BenchmarkFailoverApplicationMany", "max-beyond-toleration-s", 2, " s")
	drainMax := metric("failover.BenchmarkDrain", "move-downtime-max-s", 2, " s")
	failoverMax := metric("failover.BenchmarkDrain", "failover-downtime-max-s", 2, " s")
	kueueUsage := metric("submitter.TestBenchmarkKueueBaselineOneCohort", "usage-%", 1, " %")
	dcAccepted := metric("soak.TestBenchmarkDCAccept", "sync-5ms-grouped/s", 0, "/s")
	primaryRTO := metric("soak.TestDCPrimaryLoss", "rto-s", 1, " s")
	karmada := "failover.TestBenchmarkKarmada"
	appPurser, appKarmada := metric(karmada, "application-purser-s", 2, " s"), metric(karmada, "application-karmada-s", 2, " s")
	clusterPurser, clusterKarmada := metric(karmada, "cluster-tuned-purser-s", 2, " s"), metric(karmada, "cluster-tuned-karmada-s", 2, " s")
	designIngest := designSize("ingest-objects/s", 0, "/s")
	designNamespace := designSizeMs("ns-p99-s", 1)
	designSelector := designSizeMs("sel-p99-s", 1)
	designReconcile := designSizeMs("snap-p99-s", 0)
	designFrom := func(name string) from { return from{"The inventory at design size", name} }
	scheduleP99 := func(eng, unit string) fig {
		return fig{name: "scheduler.TestBenchmarkSchedules", unit: eng + unit, scale: 1, prec: 2, suffix: " s"}
	}
	whatIfRow := func(label, eng string) []cell {
		total := fig{name: "drill.TestBenchmarkDrill", unit: eng + "-total-s", scale: 1, prec: 2, suffix: " s"}
		return []cell{lit("what-if of losing a DC, 100 clusters running 10,000 runnables (" + label + "): snapshot and plan"), total, lit("< 1 s"),
			lit(""), lit(""), atMost(total, 1, 2, " s"), from{"Drills: the what-if of losing a DC", "drill.TestBenchmarkDrill"}}
	}
	drillTotal := metric(drillFlink, "drill-total-s", 1, " s")
	drillFailover := metric(drillFlink, "failover-total-s", 1, " s")
	scheduleRow := func(label, eng string) []cell {
		p99, ceiling := scheduleP99(eng, "-p99-s"), scheduleP99(eng, "-ceiling-p99-s")
		return []cell{lit("10,000 schedules firing each minute over 100 clusters (" + label + "): tick to runnable accepted, p99"), p99, lit("< 1 s"),
			join(" ", ceiling, lit("as many plain creates through the gate, one loop")), ratio(p99, ceiling, 2), atMost(p99, 1, 2, " s"),
			from{"Schedules", "scheduler.TestBenchmarkSchedules"}}
	}
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
		{lit("placement decision, 10,000 queued over 100 clusters (PostgreSQL), p99"), decisionP99("postgres"), lit("< 10 ms"),
			lit(""), lit(""), atMost(decisionP99("postgres"), 10, 1, " ms"),
			from{"Placement and queueing at scale", "submitter.TestBenchmarkPlacementScale"}},
		{lit("placement, 10,000 queued over 100 clusters (SQLite)"), placedSQLite, lit("≥ 100/s (design size)"),
			lit(""), lit(""), atLeast(placedSQLite, 100, 0, "/s"),
			from{"Placement and queueing at scale", "submitter.TestBenchmarkPlacementScale"}},
		{lit("placement decision, 10,000 queued over 100 clusters (SQLite), p99"), decisionP99("sqlite"), lit("< 10 ms"),
			lit(""), lit(""), atMost(decisionP99("sqlite"), 10, 1, " ms"),
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
		{lit("`kubectl get -w` through `/k8s`, change on a member to line, p50"), watchPurser, lit("< 50 ms"),
			join(" ", watchKube, lit("directly on the member")), ratio(watchPurser, watchKube, 1), atMost(watchPurser, 50, 0, " ms"),
			from{"The farm through kubectl (`/k8s`)", "kubeapi.BenchmarkK8sWatchLatency"}},
		{lit("1,000 `/k8s` watches open, change stored to its event at the last watcher, p50 (feed woken by the ingester)"), watchesPushed, lit("< 50 ms"),
			join(" ", watchesPolled, lit("polling every 50 ms")), ratio(watchesPushed, watchesPolled, 2), atMost(watchesPushed, 50, 0, " ms"),
			from{"The farm through kubectl (`/k8s`)", "kubeapi.BenchmarkK8sWatches/watches=1000/pushed"}},
		{lit("agent heap per watched object"), trimmed, lit("≤ 0.5 of a plain informer"),
			join(" ", plain, lit("plain informer")), ratio(trimmed, plain, 2), atMost(ratio(trimmed, plain, 2), 0.5, 2, ""),
			from{"Inventory (agent and ingester)", "agent.BenchmarkInformerMemory/trimmed"}},
		{lit("agent heap per tracked object, 100,000 objects on one cluster (design size)"), designAgent, lit("≤ 0.5 of a plain informer"),
			join(" ", designPlain, lit("plain informer")), ratio(designAgent, designPlain, 2), atMost(ratio(designAgent, designPlain, 2), 0.5, 2, ""),
			from{designSection, agentDesignSize}},
		{lit("agent snapshot of 100,000 objects: cache list to last chunk acknowledged"), designSnapshot, lit("a few seconds (< 3 s)"),
			lit(""), lit(""), atMost(designSnapshot, 3, 2, " s"), from{designSection, agentDesignSize}},
		{lit("drift repair of a deployable, p99"), repair, lit("< 2 s"),
			lit("Argo CD 120–180 s, OCM 4–6 min (their documented periods; not this run)"), lit(""), atMost(repair, 2000, 0, " ms"),
			from{"Deployables (syncer)", "syncer.BenchmarkSyncer"}},
		{lit("application failover: unhealthy to the new copy created, beyond the toleration"), appFailover, lit("≤ 1 s"),
			lit(""), lit(""), atMost(appFailover, 1, 2, " s"), from{"Failover", "failover.BenchmarkFailoverApplication"}},
		{lit("cluster failover of 1,000 FlinkDeployments as shipped: all running elsewhere, each from its exact checkpoint"), cluster1000,
			lit("bounded by the eviction rate (20/s: 50 s, plus the 2 s grace)"),
			join(" ", cluster1000Tuned, lit("tuned (eviction rate and client limits raised)")), ratio(cluster1000, cluster1000Tuned, 1),
			atMost(cluster1000, 55, 1, " s"), from{"Failover", "failover.BenchmarkFailoverCluster/1000"}},
		{lit("application failover of 100 jobs at once: the last running elsewhere, beyond the toleration"), appMany,
			lit("bounded by the eviction rate (20/s: 100 in 4 s after a burst of 20)"),
			lit(""), lit(""), atMost(appMany, 6, 2, " s"), from{"Failover", "failover.BenchmarkFailoverApplicationMany"}},
		{lit("planned move (drain): a job's longest downtime"), drainMax, lit("below a failover's"),
			join(" ", failoverMax, lit("failover of the same jobs")), ratio(drainMax, failoverMax, 2), atMost(ratio(drainMax, failoverMax, 2), 1, 2, "×"),
			from{"Drain by planned moves", "failover.BenchmarkDrain"}},
		whatIfRow("SQLite", "sqlite"),
		whatIfRow("PostgreSQL", "postgres"),
		{lit("a real drill of 100 FlinkDeployments: all moved; jobs not restored from the savepoint their stop wrote (any seen running twice fails the run)"),
			join(", ", drillTotal, join(" ", metric(drillFlink, "drill-not-from-own-savepoint", 0, ""), lit("not from their own savepoint"))),
			lit("none reprocessed, never two running"), join(" ", drillFailover, lit("failover of the same jobs, from their checkpoints")),
			ratio(drillTotal, drillFailover, 2), atMost(metric(drillFlink, "drill-not-from-own-savepoint", 0, ""), 0, 0, ""),
			from{"A real drill of 100 Flink jobs, beside their failover", drillFlink}},
		{lit("application failover of a FlinkDeployment beside Karmada (toleration 10 s): fault to the copy running elsewhere"), appPurser, lit("no slower than Karmada"),
			join(" ", appKarmada, lit("Karmada v1.18.2, same clusters")), ratio(appPurser, appKarmada, 2), atMost(ratio(appPurser, appKarmada, 2), 1, 2, "×"),
			from{"Beside Karmada", karmada}},
		{lit("cluster failover of a Job beside Karmada, both tuned: kube-apiserver stopped to the Job running elsewhere"), clusterPurser, lit("no slower than Karmada"),
			join(" ", clusterKarmada, lit("Karmada v1.18.2, same clusters")), ratio(clusterPurser, clusterKarmada, 2), atMost(ratio(clusterPurser, clusterKarmada, 2), 1, 2, "×"),
			from{"Beside Karmada", karmada}},
		{lit("submissions accepted over three DCs (5 ms, synchronous standby, grouped)"), dcAccepted, lit("≥ 100/s (design size)"),
			lit(""), lit(""), atLeast(dcAccepted, 100, 0, "/s"), from{"What a data center costs", "soak.TestBenchmarkDCAccept"}},
		scheduleRow("SQLite", "sqlite"),
		scheduleRow("PostgreSQL", "postgres"),
		{lit("writes again after the database primary's DC is lost (Patroni 4.0)"), primaryRTO, lit("< 12 s"),
			lit("20 s: Patroni's leader key `ttl`, its minimum"), ratio(primaryRTO, constant{20, 0, " s"}, 2), atMost(primaryRTO, 12, 1, " s"),
			from{"Losing the primary's data center", "soak.TestDCPrimaryLoss"}},
	}
}
