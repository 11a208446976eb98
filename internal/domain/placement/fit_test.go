package placement

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/purser-io/purser/api/v1alpha1"
)

func rlist(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

func freeCluster(name, alloc, free, nodeMax string) Cluster {
	return Cluster{Name: name, Ready: true, Free: &Free{
		Allocatable: rlist("cpu", alloc, "memory", "256Gi"),
		Free:        rlist("cpu", free, "memory", "200Gi"),
		NodeMax:     rlist("cpu", nodeMax, "memory", "100Gi"),
	}}
}

func cpuDemand(total, pod string) Demand {
	return Demand{Total: rlist("cpu", total), Pod: rlist("cpu", pod), Pods: 1}
}

const jobKind = "batch/v1, Kind=Job"

// TestChooseForFits: only clusters where the request fits are eligible;
// the reason gives the figures.
func TestChooseForFits(t *testing.T) {
	clusters := []Cluster{freeCluster("sandbox-1", "32", "8", "8"), freeCluster("sandbox-2", "96", "64", "32")}
	d := ChooseFor(v1alpha1.Placement{}, jobKind, cpuDemand("16", "16"), LeastAllocated, clusters)
	if d.Cluster != "sandbox-2" || len(d.Eligible) != 1 {
		t.Fatalf("decision %+v, want sandbox-2 alone", d)
	}
	for _, want := range []string{"sandbox-2: cpu 64 of 96 free", "sandbox-1: cpu 8 of 32 free, does not fit"} {
		if !strings.Contains(d.Reason, want) {
			t.Errorf("reason %q does not say %q", d.Reason, want)
		}
	}

	// The total fits sandbox-2 but one pod is larger than any node's free.
	d = ChooseFor(v1alpha1.Placement{}, jobKind, cpuDemand("40", "40"), LeastAllocated, clusters)
	if d.Cluster != "" || d.Never || !strings.Contains(d.Reason, "the most free on one node is 32") || !strings.Contains(d.Reason, "waiting for capacity") {
		t.Fatalf("decision %+v: want none, waiting, naming the node figure", d)
	}

	// More than any cluster's whole allocatable: never.
	d = ChooseFor(v1alpha1.Placement{}, jobKind, cpuDemand("100", "1"), LeastAllocated, clusters)
	if d.Cluster != "" || !d.Never || !strings.Contains(d.Reason, "whole allocatable") {
		t.Fatalf("decision %+v: want never", d)
	}

	// An extended resource no cluster has.
	gpu := Demand{Total: rlist("nvidia.com/gpu", "1"), Pod: rlist("nvidia.com/gpu", "1")}
	if d = ChooseFor(v1alpha1.Placement{}, jobKind, gpu, LeastAllocated, clusters); d.Cluster != "" || !d.Never {
		t.Fatalf("decision %+v: no cluster has a GPU", d)
	}
}

// TestChooseForScore: least allocated by default, best fit on request;
// in-flight placements count against the free figure.
func TestChooseForScore(t *testing.T) {
	clusters := []Cluster{freeCluster("a", "32", "20", "20"), freeCluster("b", "96", "40", "32")}
	// a keeps 18/32 = 56% cpu free, b 38/96 = 40%; memory the same share.
	if d := ChooseFor(v1alpha1.Placement{}, jobKind, cpuDemand("2", "2"), LeastAllocated, clusters); d.Cluster != "a" {
		t.Fatalf("least allocated chose %q: %s", d.Cluster, d.Reason)
	}
	if d := ChooseFor(v1alpha1.Placement{}, jobKind, cpuDemand("2", "2"), BestFit, clusters); d.Cluster != "b" {
		t.Fatalf("best fit chose %q: %s", d.Cluster, d.Reason)
	}
	clusters[0].Free.InFlight, clusters[0].Free.InFlightCount = rlist("cpu", "19"), 5
	d := ChooseFor(v1alpha1.Placement{}, jobKind, cpuDemand("2", "2"), LeastAllocated, clusters)
	if d.Cluster != "b" || !strings.Contains(d.Reason, "a: cpu 1 of 32 free (after 5 placed and not yet reported), does not fit") {
		t.Fatalf("in flight not counted: %+v", d)
	}
}

// TestChooseForBurst: placing one after another, each counted in flight,
// never puts more on a cluster than it has free.
func TestChooseForBurst(t *testing.T) {
	clusters := []Cluster{freeCluster("a", "8", "8", "8"), freeCluster("b", "4", "4", "4")}
	placed := map[string]int{}
	for range 50 {
		d := ChooseFor(v1alpha1.Placement{}, jobKind, cpuDemand("1", "1"), LeastAllocated, clusters)
		if d.Cluster == "" {
			continue
		}
		placed[d.Cluster]++
		for i := range clusters {
			if clusters[i].Name != d.Cluster {
				continue
			}
			f := clusters[i].Free
			if f.InFlight == nil {
				f.InFlight = corev1.ResourceList{}
			}
			q := f.InFlight[corev1.ResourceCPU]
			q.Add(resource.MustParse("1"))
			f.InFlight[corev1.ResourceCPU] = q
			f.InFlightCount++
		}
	}
	if placed["a"] != 8 || placed["b"] != 4 {
		t.Fatalf("placed %v, want a 8 and b 4: exactly what is free", placed)
	}
}

// TestChooseForUnreported: a cluster whose agent has not reported comes
// after every cluster that fits, and takes the work when none does.
func TestChooseForUnreported(t *testing.T) {
	clusters := []Cluster{{Name: "new", Ready: true}, freeCluster("a", "32", "8", "8")}
	if d := ChooseFor(v1alpha1.Placement{}, jobKind, cpuDemand("2", "2"), LeastAllocated, clusters); d.Cluster != "a" || len(d.Eligible) != 2 {
		t.Fatalf("decision %+v, want a then new", d)
	}
	d := ChooseFor(v1alpha1.Placement{}, jobKind, cpuDemand("16", "16"), LeastAllocated, clusters)
	if d.Cluster != "new" || !strings.Contains(d.Reason, "not reported") {
		t.Fatalf("decision %+v, want new", d)
	}
}

// TestChooseForDependencies: a cluster that lacks a dependency is not
// eligible, and the reason says what and where.
func TestChooseForDependencies(t *testing.T) {
	a, b := freeCluster("a", "32", "32", "32"), freeCluster("b", "32", "8", "8")
	a.Lacks = "deployable cfg not synced there yet"
	d := ChooseFor(v1alpha1.Placement{}, jobKind, cpuDemand("2", "2"), LeastAllocated, []Cluster{a, b})
	if d.Cluster != "b" {
		t.Fatalf("chose %q: %s", d.Cluster, d.Reason)
	}
	b.Lacks = "deployable cfg not synced at generation 2 (Synced at generation 1)"
	d = ChooseFor(v1alpha1.Placement{}, jobKind, cpuDemand("2", "2"), LeastAllocated, []Cluster{a, b})
	if d.Cluster != "" || d.Never || !d.Lacking || !strings.Contains(d.Reason, "a lacks deployable cfg not synced there yet") ||
		!strings.Contains(d.Reason, "b lacks deployable cfg not synced at generation 2") {
		t.Fatalf("decision %+v", d)
	}
	if d := Choose(v1alpha1.Placement{}, jobKind, []Cluster{a, b}); d.Cluster != "" || !strings.Contains(d.Reason, "lacks deployable cfg") {
		t.Fatalf("failover's choice %+v", d)
	}
}

// TestQuota: usage sums the active runnables' requests; one more that
// would pass a limit is held, naming the quota and the figures.
func TestQuota(t *testing.T) {
	used := QuotaUsage([]map[string]string{{"cpu": "4", "memory": "1Gi"}, {"cpu": "6"}})
	limits := map[string]string{"cpu": "12", "runnables": "3"}
	if ok, why := QuotaAllows("team-a", limits, used, cpuDemand("2", "2")); !ok {
		t.Fatalf("2 more cpu within 12 (10 used): %s", why)
	}
	ok, why := QuotaAllows("team-a", limits, used, cpuDemand("4", "4"))
	if ok || why != "over quota team-a: cpu 10 of 12 used, asks for 4" {
		t.Fatalf("allowed %v: %q", ok, why)
	}
	used = QuotaUsage([]map[string]string{{"cpu": "1"}, {"cpu": "1"}, {"cpu": "1"}})
	if ok, why := QuotaAllows("team-a", limits, used, Demand{}); ok || !strings.Contains(why, "runnables 3 of 3 used, asks for 1") {
		t.Fatalf("a fourth runnable: allowed %v: %q", ok, why)
	}
	if ok, _ := QuotaAllows("team-a", map[string]string{"nvidia.com/gpu": "0"}, used, cpuDemand("64", "64")); !ok {
		t.Fatal("a limit on a resource the runnable does not ask for holds it")
	}
}

// TestDominantShare: the largest share over the resources the farm has.
func TestDominantShare(t *testing.T) {
	total := rlist("cpu", "100", "memory", "400Gi", "nvidia.com/gpu", "8")
	if got := DominantShare(rlist("cpu", "10", "memory", "200Gi"), total); got != 0.5 {
		t.Errorf("share %v, want 0.5 (memory)", got)
	}
	if got := DominantShare(rlist("cpu", "10", "nvidia.com/gpu", "6"), total); got != 0.75 {
		t.Errorf("share %v, want 0.75 (gpu)", got)
	}
	if got := DominantShare(rlist("example.com/x", "10"), total); got != 0 {
		t.Errorf("share %v of a resource the farm does not have", got)
	}
}
