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
		{Name: "c", Ready: true, Active: 1, Capacity: 10},
		{Name: "a", Ready: true, Active: 5, Capacity: 10},
		{Name: "b", Ready: true, Active: 2, Capacity: 20},
		{Name: "down", Ready: false},
		{Name: "noflink", Ready: true, Serves: only(jobs)},
	}
	d := Choose(v1alpha1.Placement{}, jobs, clusters)
	if d.Cluster != "noflink" {
		// 0 active with unknown capacity is the least loaded.
		t.Fatalf("chose %q: %+v", d.Cluster, d)
	}
	d = Choose(v1alpha1.Placement{ClusterAffinity: &v1alpha1.ClusterAffinity{Exclude: []string{"noflink"}}}, jobs, clusters)
	if d.Cluster != "b" || strings.Join(d.Eligible, ",") != "b,c,a" || d.Rejected["down"] != "not Ready" {
		t.Fatalf("least loaded relative to capacity: %+v", d)
	}
	if !strings.Contains(d.Reason, "3 eligible; chose b: least loaded (2 active of capacity 20)") {
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
