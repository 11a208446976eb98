package placement

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/purser-io/purser/api/v1alpha1"
)

func cluster(name string, labels map[string]string, taints ...corev1.Taint) Cluster {
	return Cluster{Name: name, Labels: labels, Taints: taints, Ready: true}
}

func TestMatches(t *testing.T) {
	prod := map[string]string{"tier": "prod", "dc": "dc1"}
	noSchedule := corev1.Taint{Key: "maintenance", Effect: corev1.TaintEffectNoSchedule}
	noExecute := corev1.Taint{Key: "purser.io/unreachable", Effect: corev1.TaintEffectNoExecute}
	prefer := corev1.Taint{Key: "busy", Effect: corev1.TaintEffectPreferNoSchedule}
	sel := func(s string) *metav1.LabelSelector {
		ls, _ := metav1.ParseToLabelSelector(s)
		return ls
	}
	cases := []struct {
		name   string
		p      v1alpha1.Placement
		c      Cluster
		want   bool
		reason string
	}{
		{"empty placement matches anything", v1alpha1.Placement{}, cluster("a", nil), true, ""},
		{"named", v1alpha1.Placement{ClusterAffinity: &v1alpha1.ClusterAffinity{ClusterNames: []string{"a", "b"}}}, cluster("b", nil), true, ""},
		{"not named", v1alpha1.Placement{ClusterAffinity: &v1alpha1.ClusterAffinity{ClusterNames: []string{"a"}}}, cluster("b", nil), false, "not in clusterNames"},
		{"excluded", v1alpha1.Placement{ClusterAffinity: &v1alpha1.ClusterAffinity{Exclude: []string{"a"}}}, cluster("a", nil), false, "excluded"},
		{"named and excluded", v1alpha1.Placement{ClusterAffinity: &v1alpha1.ClusterAffinity{ClusterNames: []string{"a"}, Exclude: []string{"a"}}}, cluster("a", nil), false, "excluded"},
		{"a malformed selector matches nothing", v1alpha1.Placement{ClusterAffinity: &v1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "dc", Operator: "Near"}}}}}, cluster("a", prod), false, "does not parse"},
		{"selector matches", v1alpha1.Placement{ClusterAffinity: &v1alpha1.ClusterAffinity{LabelSelector: sel("tier=prod,dc in (dc1,dc2)")}}, cluster("a", prod), true, ""},
		{"selector does not", v1alpha1.Placement{ClusterAffinity: &v1alpha1.ClusterAffinity{LabelSelector: sel("tier=staging")}}, cluster("a", prod), false, "labels do not match"},
		{"NoSchedule taint", v1alpha1.Placement{}, cluster("a", nil, noSchedule), false, "taint maintenance:NoSchedule not tolerated"},
		{"NoExecute taint", v1alpha1.Placement{}, cluster("a", nil, noExecute), false, "not tolerated"},
		{"PreferNoSchedule does not exclude", v1alpha1.Placement{}, cluster("a", nil, prefer), true, ""},
		{"tolerated by key", v1alpha1.Placement{ClusterTolerations: []corev1.Toleration{{Key: "maintenance", Operator: corev1.TolerationOpExists}}}, cluster("a", nil, noSchedule), true, ""},
		{"tolerated by everything", v1alpha1.Placement{ClusterTolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}}, cluster("a", nil, noSchedule, noExecute), true, ""},
		{"toleration of another effect", v1alpha1.Placement{ClusterTolerations: []corev1.Toleration{{Key: "maintenance", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}}, cluster("a", nil, noSchedule), false, "not tolerated"},
		{"Equal needs the value", v1alpha1.Placement{ClusterTolerations: []corev1.Toleration{{Key: "k", Value: "v1"}}}, cluster("a", nil, corev1.Taint{Key: "k", Value: "v2", Effect: corev1.TaintEffectNoSchedule}), false, "k=v2:NoSchedule"},
	}
	for _, c := range cases {
		got, why := Matches(c.p, c.c)
		if got != c.want || !strings.Contains(why, c.reason) {
			t.Errorf("%s: Matches = %v %q, want %v %q", c.name, got, why, c.want, c.reason)
		}
	}
}

func TestChoose(t *testing.T) {
	jobs := "batch/v1, Kind=Job"
	only := func(kinds ...string) func(string) bool {
		return func(g string) bool {
			for _, k := range kinds {
				if k == g {
					return true
				}
			}
			return false
		}
	}
	clusters := []Cluster{
		{Name: "c", Ready: true, Active: 1, Capacity: cpu(10)},
		{Name: "a", Ready: true, Active: 5, Capacity: cpu(10)},
		{Name: "b", Ready: true, Active: 2, Capacity: cpu(20)},
		{Name: "down", Ready: false},
		{Name: "noflink", Ready: true, Serves: only(jobs)},
	}
	d := Choose(v1alpha1.Placement{}, jobs, clusters)
	if d.Cluster != "noflink" {
		// 0 active with unknown capacity is the least loaded (taken as
		// the median, 10 cores).
		t.Fatalf("chose %q: %+v", d.Cluster, d)
	}
	d = Choose(v1alpha1.Placement{ClusterAffinity: &v1alpha1.ClusterAffinity{Exclude: []string{"noflink"}}}, jobs, clusters)
	if d.Cluster != "b" || strings.Join(d.Eligible, ",") != "b,c,a" || d.Rejected["down"] != "not Ready" {
		t.Fatalf("least loaded relative to capacity: %+v", d)
	}
	if !strings.Contains(d.Reason, "3 eligible; chose b: least loaded (2 active on 20 cores)") {
		t.Fatalf("reason %q", d.Reason)
	}
	d = Choose(v1alpha1.Placement{ClusterAffinity: &v1alpha1.ClusterAffinity{ClusterNames: []string{"noflink", "down"}}}, "flink.apache.org/v1beta1, Kind=FlinkDeployment", clusters)
	if d.Cluster != "" || !strings.Contains(d.Reason, "down not Ready; noflink does not serve flink.apache.org/v1beta1") {
		t.Fatalf("no eligible cluster: %+v", d)
	}
	// Ties break by name, whatever the input order.
	tie := []Cluster{{Name: "z", Ready: true}, {Name: "m", Ready: true}}
	if d := Choose(v1alpha1.Placement{}, jobs, tie); d.Cluster != "m" {
		t.Fatalf("tie broke to %q", d.Cluster)
	}
	if d := Choose(v1alpha1.Placement{}, jobs, nil); d.Cluster != "" || !strings.Contains(d.Reason, "no cluster is registered") {
		t.Fatalf("no clusters: %+v", d)
	}
}

// cpu is a known capacity of n cores.
func cpu(cores float64) *Capacity { return &Capacity{MilliCPU: int64(cores * 1000)} }

func TestChooseByLoad(t *testing.T) {
	c := func(name string, active int, capacity *Capacity) Cluster {
		return Cluster{Name: name, Ready: true, Active: active, Capacity: capacity}
	}
	cases := []struct {
		name     string
		clusters []Cluster
		want     string // eligible, best first
		reason   string
	}{
		{"relative to cores, not absolute",
			[]Cluster{c("small", 2, cpu(4)), c("big", 6, cpu(32))},
			"big,small", "2 eligible; chose big: least loaded (6 active on 32 cores)"},
		{"equally loaded: the bigger one first, as one more moves it less",
			[]Cluster{c("b", 2, cpu(8)), c("c", 4, cpu(16)), c("a", 2, cpu(8))},
			"c,a,b", "chose c: least loaded (4 active on 16 cores)"},
		{"idle clusters fill in proportion to their size",
			[]Cluster{c("small", 0, cpu(4)), c("big", 7, cpu(32))},
			"big,small", "7 active on 32 cores"},
		{"equal with the new one counted: by name, compared exactly",
			[]Cluster{c("y", 1, cpu(4)), c("x", 3, cpu(8))},
			"x,y", "3 active on 8 cores"},
		{"fractional cores",
			[]Cluster{c("tiny", 0, cpu(0.25)), c("half", 1, cpu(0.5)), c("one", 1, cpu(1))},
			"one,half,tiny", "chose one: least loaded (1 active on 1 core)"},
		{"large counts do not overflow",
			// 1,000,001/1,000,000 cores against 1,000,000/999,999.999.
			[]Cluster{c("huge", 1_000_000, cpu(1_000_000)), c("big", 999_999, cpu(999_999.999))},
			"big,huge", "999999 active on 999999.999 cores"},
		// Unknown capacity is taken as the median of the known ones
		// (here 16 cores): not starved, not flooded.
		{"unknown, lightly loaded, goes first",
			[]Cluster{c("known", 8, cpu(16)), c("known2", 9, cpu(16)), c("new", 2, nil)},
			"new,known,known2", "chose new: least loaded (2 active; capacity not known yet, taken as 16 cores, the median of the eligible clusters)"},
		{"unknown, heavily loaded, waits its turn",
			[]Cluster{c("known", 8, cpu(16)), c("new", 9, nil)},
			"known,new", "8 active on 16 cores"},
		{"median of an even count is the mean of the middle two",
			[]Cluster{c("k4", 1, cpu(4)), c("k8", 1, cpu(8)), c("k100", 3, cpu(100)), c("k200", 3, cpu(200)), c("new", 1, nil)},
			// new is taken as 54 cores: 2/54 after 4/200, before 4/100.
			"k200,new,k100,k8,k4", ""},
		{"no capacity known anywhere: active runnables alone, as before",
			[]Cluster{c("b", 3, nil), c("a", 3, nil), c("c", 1, nil)},
			"c,a,b", "chose c: least loaded (1 active; capacity not known)"},
		{"every node cordoned: last, even idle",
			[]Cluster{c("drained", 0, &Capacity{}), c("busy", 50, cpu(4)), c("new", 60, nil)},
			"busy,new,drained", "50 active on 4 cores"},
		{"only cordoned clusters: still a choice",
			[]Cluster{c("d2", 1, &Capacity{}), c("d1", 1, &Capacity{}), c("d0", 4, &Capacity{})},
			"d1,d2,d0", "chose d1: least loaded (1 active; no schedulable CPU)"},
		{"cordoned clusters do not set the median",
			[]Cluster{c("drained", 0, &Capacity{}), c("known", 2, cpu(8)), c("new", 1, nil)},
			"new,known,drained", "taken as 8 cores, the median"},
		{"an ineligible cluster's capacity does not count",
			[]Cluster{c("known", 4, cpu(16)), c("new", 1, nil), {Name: "down", Capacity: cpu(1000)}},
			"new,known", "taken as 16 cores, the median"},
	}
	for _, tc := range cases {
		d := Choose(v1alpha1.Placement{}, "batch/v1, Kind=Job", tc.clusters)
		if got := strings.Join(d.Eligible, ","); got != tc.want {
			t.Errorf("%s: eligible %s, want %s (%s)", tc.name, got, tc.want, d.Reason)
		}
		if d.Cluster != d.Eligible[0] {
			t.Errorf("%s: chose %s, not the first of %v", tc.name, d.Cluster, d.Eligible)
		}
		if !strings.Contains(d.Reason, tc.reason) {
			t.Errorf("%s: reason %q, want %q in it", tc.name, d.Reason, tc.reason)
		}
	}
}

// Placing one runnable after another fills idle clusters in proportion
// to their cores.
func TestChooseFillsInProportion(t *testing.T) {
	clusters := []Cluster{
		{Name: "big", Ready: true, Capacity: cpu(32)},
		{Name: "small", Ready: true, Capacity: cpu(4)},
	}
	placed := map[string]int{}
	for range 18 {
		d := Choose(v1alpha1.Placement{}, "batch/v1, Kind=Job", clusters)
		placed[d.Cluster]++
		for i := range clusters {
			if clusters[i].Name == d.Cluster {
				clusters[i].Active++
			}
		}
	}
	if placed["big"] != 16 || placed["small"] != 2 {
		t.Fatalf("placed %v, want 16 on big and 2 on small", placed)
	}
}
