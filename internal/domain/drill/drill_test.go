package drill_test

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/failover"
	"github.com/purser-io/purser/internal/domain/drill"
	"github.com/purser-io/purser/internal/domain/placement"
)

const gvk = "batch/v1, Kind=Job"

// cluster is a Ready cluster in dc whose agent reports alloc CPUs, free
// of them.
func cluster(name, dc string, alloc, free int64) placement.Cluster {
	return placement.Cluster{Name: name, Labels: map[string]string{"dc": dc}, Ready: true, Free: &placement.Free{
		Allocatable: cpu(alloc), Free: cpu(free), NodeMax: cpu(free)}}
}

func cpu(n int64) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(n, resource.DecimalSI)}
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// job is a runnable of ns/name on cl asking for n CPUs, created i
// seconds after t0.
func job(name, cl string, n int64, prio int32, i int) drill.Runnable {
	return drill.Runnable{UID: "uid-" + name, Namespace: "team", Name: name, Cluster: cl, GVK: gvk,
		Demand: placement.Demand{Total: cpu(n), Pod: cpu(n)}, Priority: prio, Since: t0.Add(time.Duration(i) * time.Second)}
}

// usageOf is the namespace usage the runnables make, as quotas count it.
func usageOf(rs ...drill.Runnable) map[string]map[string]corev1.ResourceList {
	out := map[string]map[string]corev1.ResourceList{}
	for _, r := range rs {
		if out[r.Namespace] == nil {
			out[r.Namespace] = map[string]corev1.ResourceList{}
		}
		if out[r.Namespace][r.Cluster] == nil {
			out[r.Namespace][r.Cluster] = corev1.ResourceList{}
		}
		placement.AddTo(out[r.Namespace][r.Cluster], r.Demand.Total)
		placement.AddTo(out[r.Namespace][r.Cluster], placement.QuotaUsage([]map[string]string{nil}))
	}
	return out
}

func TestPlan(t *testing.T) {
	savepoint := &v1alpha1.RestorePoint{Path: "s3://sp/savepoint-1", Kind: v1alpha1.RestoreSavepoint}
	flink := func(r drill.Runnable, policy string, rp *v1alpha1.RestorePoint) drill.Runnable {
		r.Flink, r.RestorePolicy, r.RestorePoint = true, policy, rp
		r.GVK = "flink.apache.org/v1beta1, Kind=FlinkDeployment"
		return r
	}
	running := func(r drill.Runnable) drill.Runnable { r.Running = true; return r }
	pinned := job("pinned", "a1", 1, 0, 0)
	pinned.Placement.ClusterAffinity = &v1alpha1.ClusterAffinity{ClusterNames: []string{"a1"}}
	cases := []struct {
		name     string
		clusters []placement.Cluster
		run      []drill.Runnable
		quotas   map[string]v1alpha1.QuotaSpec
		target   drill.Target
		verdict  string
		// moves is "runnable>cluster@downtime" in order.
		moves []string
		// restore is "kind path-or-source" of the moves that carry one.
		restore     map[string]string
		unplaceable []string // "runnable: a word of the reason"
	}{{
		name:     "a DC absorbed by the other, at the secondary rate",
		clusters: []placement.Cluster{cluster("a1", "a", 8, 4), cluster("b1", "b", 8, 8)},
		run:      []drill.Runnable{job("j1", "a1", 2, 0, 0), job("j2", "a1", 2, 0, 1)},
		target:   drill.Target{Kind: drill.TargetDC, Name: "a"},
		verdict:  drill.Absorbed,
		moves:    []string{"team/j1>b1@0.5", "team/j2>b1@1"},
	}, {
		name:     "priority goes first when room is short",
		clusters: []placement.Cluster{cluster("a1", "a", 8, 0), cluster("b1", "b", 8, 3)},
		run:      []drill.Runnable{job("old", "a1", 2, 0, 0), job("urgent", "a1", 2, 10, 5)},
		target:   drill.Target{Kind: drill.TargetDC, Name: "a"},
		verdict:  drill.Partial,
		moves:    []string{"team/urgent>b1@0.5"},
		// waiting for capacity: partial, not for good
		unplaceable: []string{"team/old: no cluster has it free now"},
	}, {
		name: "what one takes is reserved before the next",
		clusters: []placement.Cluster{cluster("a1", "a", 8, 0), cluster("b1", "b", 8, 4),
			cluster("c1", "c", 8, 4)},
		run:     []drill.Runnable{job("x", "a1", 3, 0, 0), job("y", "a1", 3, 0, 1)},
		target:  drill.Target{Kind: drill.TargetDC, Name: "a"},
		verdict: drill.Absorbed,
		moves:   []string{"team/x>b1@0.5", "team/y>c1@1"},
	}, {
		name:        "bigger than any cluster left",
		clusters:    []placement.Cluster{cluster("a1", "a", 32, 0), cluster("b1", "b", 8, 8)},
		run:         []drill.Runnable{job("big", "a1", 16, 0, 0)},
		target:      drill.Target{Kind: drill.TargetDC, Name: "a"},
		verdict:     drill.NotAbsorbed,
		unplaceable: []string{"team/big: more than any eligible cluster's whole allocatable"},
	}, {
		name:        "a placement rule that only the lost cluster meets",
		clusters:    []placement.Cluster{cluster("a1", "a", 8, 0), cluster("b1", "b", 8, 8)},
		run:         []drill.Runnable{pinned},
		target:      drill.Target{Kind: drill.TargetCluster, Name: "a1"},
		verdict:     drill.NotAbsorbed,
		unplaceable: []string{"team/pinned: b1 not in clusterNames"},
	}, {
		name:     "a quota per DC that the other DC has used up",
		clusters: []placement.Cluster{cluster("a1", "a", 8, 0), cluster("b1", "b", 8, 8)},
		run:      []drill.Runnable{job("j1", "a1", 2, 0, 0), job("there", "b1", 2, 0, 0)},
		quotas: map[string]v1alpha1.QuotaSpec{"team": {Limits: map[string]string{"cpu": "100"},
			PerLabel: &v1alpha1.QuotaPerLabel{Label: "dc", Limits: map[string]string{"cpu": "3"}}}},
		target:      drill.Target{Kind: drill.TargetDC, Name: "a"},
		verdict:     drill.NotAbsorbed,
		unplaceable: []string{"team/j1: b1 lacks room in its quota team for dc=b"},
	}, {
		name:     "the namespace's quota holds with the moving ones counted once",
		clusters: []placement.Cluster{cluster("a1", "a", 8, 0), cluster("b1", "b", 8, 8)},
		run:      []drill.Runnable{job("j1", "a1", 2, 0, 0), job("j2", "a1", 2, 0, 1)},
		quotas:   map[string]v1alpha1.QuotaSpec{"team": {Limits: map[string]string{"cpu": "4", "runnables": "2"}}},
		target:   drill.Target{Kind: drill.TargetDC, Name: "a"},
		verdict:  drill.Absorbed,
		moves:    []string{"team/j1>b1@0.5", "team/j2>b1@1"},
	}, {
		name:     "one cluster of a DC that keeps others: the farm's rate",
		clusters: []placement.Cluster{cluster("a1", "a", 8, 0), cluster("a2", "a", 8, 8), cluster("b1", "b", 8, 0)},
		run:      []drill.Runnable{job("j1", "a1", 2, 0, 0), job("j2", "a1", 2, 0, 1)},
		target:   drill.Target{Kind: drill.TargetCluster, Name: "a1"},
		verdict:  drill.Absorbed,
		moves:    []string{"team/j1>a2@0.05", "team/j2>a2@0.1"},
	}, {
		name:     "a label selector over clusters",
		clusters: []placement.Cluster{cluster("a1", "a", 8, 0), cluster("b1", "b", 8, 0), cluster("c1", "c", 8, 8)},
		run:      []drill.Runnable{job("j1", "a1", 2, 0, 0), job("j2", "b1", 2, 0, 1)},
		target:   drill.Target{Kind: drill.TargetSelector, Name: "dc in (a,b)"},
		verdict:  drill.Absorbed,
		moves:    []string{"team/j1>c1@0.5", "team/j2>c1@0.5"},
	}, {
		name:     "Flink: a running job moves by its stop's savepoint; one that does not run carries what is recorded; Required without one waits",
		clusters: []placement.Cluster{cluster("a1", "a", 8, 0), cluster("b1", "b", 8, 8)},
		run: []drill.Runnable{flink(job("with", "a1", 1, 0, 0), v1alpha1.RestorePointRequired, savepoint),
			running(flink(job("running", "a1", 1, 0, 1), v1alpha1.RestorePointRequired, nil)),
			flink(job("without", "a1", 1, 0, 2), v1alpha1.RestorePointRequired, nil)},
		target:      drill.Target{Kind: drill.TargetDC, Name: "a"},
		verdict:     drill.Partial,
		moves:       []string{"team/with>b1@0.5", "team/running>b1@1"},
		restore:     map[string]string{"team/with": "Savepoint s3://sp/savepoint-1", "team/running": "Savepoint " + drill.SavepointOfTheStop},
		unplaceable: []string{"team/without: its job does not run, so no savepoint can be taken, no restore point is recorded"},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			farm := drill.Farm{Clusters: c.clusters, Runnables: c.run, Usage: usageOf(c.run...), Quotas: c.quotas}
			for i := range farm.Clusters {
				for _, r := range c.run {
					if r.Cluster == farm.Clusters[i].Name {
						farm.Clusters[i].Active++
					}
				}
			}
			rep, err := drill.Plan(farm, c.target)
			if err != nil {
				t.Fatal(err)
			}
			var moves []string
			for _, m := range rep.Moves {
				moves = append(moves, fmt.Sprintf("%s>%s@%g", m.Runnable, m.To, m.DowntimeSeconds))
			}
			if strings.Join(moves, " ") != strings.Join(c.moves, " ") {
				t.Errorf("moves %v, want %v", moves, c.moves)
			}
			for _, m := range rep.Moves {
				got := ""
				if rp := m.RestorePoint; rp != nil {
					got = rp.Kind + " " + cmp.Or(rp.Path, rp.Source)
				}
				if got != c.restore[m.Runnable] {
					t.Errorf("%s carries %q, want %q", m.Runnable, got, c.restore[m.Runnable])
				}
			}
			if len(rep.Unplaceable) != len(c.unplaceable) {
				t.Fatalf("unplaceable %+v, want %v", rep.Unplaceable, c.unplaceable)
			}
			for i, u := range rep.Unplaceable {
				name, word, _ := strings.Cut(c.unplaceable[i], ": ")
				if u.Runnable != name || !strings.Contains(u.Reason, word) {
					t.Errorf("unplaceable %d: %s: %s, want %s", i, u.Runnable, u.Reason, c.unplaceable[i])
				}
			}
			if rep.Verdict != c.verdict {
				t.Errorf("verdict %s (%s), want %s", rep.Verdict, rep.Message, c.verdict)
			}
			if (rep.Short != nil) != (len(c.unplaceable) > 0) {
				t.Errorf("short %+v with %d unplaceable", rep.Short, len(c.unplaceable))
			}
		})
	}
}

func TestPlanClustersBeforeAfter(t *testing.T) {
	farm := drill.Farm{Clusters: []placement.Cluster{cluster("a1", "a", 8, 4), cluster("b1", "b", 8, 8)},
		Runnables: []drill.Runnable{job("j1", "a1", 3, 0, 0)}}
	farm.Clusters[0].Active = 1
	farm.Usage = usageOf(farm.Runnables...)
	rep, err := drill.Plan(farm, drill.Target{Kind: drill.TargetDC, Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Clusters) != 2 || !rep.Clusters[0].Lost || rep.Clusters[0].After != nil || rep.Clusters[0].Before.Runnables != 1 {
		t.Fatalf("lost cluster %+v", rep.Clusters)
	}
	b := rep.Clusters[1]
	if b.Before.Free["cpu"] != "8" || b.After == nil || b.After.Free["cpu"] != "5" || b.After.Runnables != 1 {
		t.Fatalf("b1 before %+v after %+v, want cpu 8 then 5 free and one runnable", b.Before, b.After)
	}
	// The snapshot given is not changed by the what-if.
	if len(farm.Clusters[1].Free.InFlight) != 0 {
		t.Fatalf("the farm's figures were changed: %v", farm.Clusters[1].Free.InFlight)
	}
	if rep.DurationSeconds != 0.5 {
		t.Fatalf("duration %g, want 0.5", rep.DurationSeconds)
	}
}

func TestPlanBadTarget(t *testing.T) {
	farm := drill.Farm{Clusters: []placement.Cluster{cluster("a1", "a", 8, 4)}}
	for _, tg := range []drill.Target{{Kind: drill.TargetDC, Name: "nowhere"}, {Kind: drill.TargetCluster, Name: "zz"},
		{Kind: drill.TargetSelector, Name: "dc in ("}, {Kind: drill.TargetSelector, Name: ""}, {Kind: "zone", Name: "a"}} {
		_, err := drill.Plan(farm, tg)
		var te *drill.TargetError
		if !errors.As(err, &te) || !strings.Contains(err.Error(), tg.Name) {
			t.Errorf("%s: error %v, want a TargetError naming it", tg, err)
		}
	}
}

// The rates are the failover controller's.
func TestDefaultRates(t *testing.T) {
	if drill.DefaultEvictionRate != failover.DefaultEvictionRate || drill.DefaultZoneRate != failover.DefaultSecondaryEvictionRate {
		t.Fatalf("drill rates %g/%g, failover %g/%g", drill.DefaultEvictionRate, drill.DefaultZoneRate,
			failover.DefaultEvictionRate, failover.DefaultSecondaryEvictionRate)
	}
}
