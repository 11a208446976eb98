package native_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/native"
)

var flinkGVK = schema.GroupVersionKind{Group: "flink.apache.org", Version: "v1beta1", Kind: "FlinkDeployment"}

func policy(ns, name string, prio int32, sels ...v1alpha1.ResourceSelector) native.Policy {
	return native.Policy{Namespace: ns, Name: name, Spec: v1alpha1.PlacementPolicySpec{ResourceSelectors: sels, Priority: prio, Runnable: &v1alpha1.RunnableSpec{}}}
}

func byKind() v1alpha1.ResourceSelector {
	return v1alpha1.ResourceSelector{APIVersion: "flink.apache.org/v1beta1", Kind: "FlinkDeployment"}
}

func byLabels(app string) v1alpha1.ResourceSelector {
	s := byKind()
	s.LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
	return s
}

func byName(name string) v1alpha1.ResourceSelector {
	s := byKind()
	s.Name = name
	return s
}

func TestSelect(t *testing.T) {
	obj := native.Object{GVK: flinkGVK, Namespace: "team-a", Name: "clicks", Labels: map[string]string{"app": "clicks"}}
	cases := []struct {
		name     string
		policies []native.Policy
		want     string
	}{
		{"none", nil, ""},
		{"another namespace's is not considered", []native.Policy{policy("team-b", "p", 0, byKind())}, ""},
		{"another kind", []native.Policy{policy("team-a", "p", 0, v1alpha1.ResourceSelector{APIVersion: "batch/v1", Kind: "Job"})}, ""},
		{"another version of the kind", []native.Policy{policy("team-a", "p", 0, v1alpha1.ResourceSelector{APIVersion: "flink.apache.org/v1alpha1", Kind: "FlinkDeployment"})}, ""},
		{"labels that do not match", []native.Policy{policy("team-a", "p", 0, byLabels("views"))}, ""},
		{"another name", []native.Policy{policy("team-a", "p", 0, byName("views"))}, ""},
		{"the farm's alone", []native.Policy{policy("", "farm", 0, byKind())}, "ClusterPlacementPolicy farm"},
		{"name before labels before kind", []native.Policy{policy("team-a", "a", 0, byKind()), policy("team-a", "b", 0, byLabels("clicks")), policy("team-a", "c", 0, byName("clicks"))}, "PlacementPolicy team-a/c"},
		{"labels before kind", []native.Policy{policy("team-a", "a", 0, byKind()), policy("team-a", "b", 0, byLabels("clicks"))}, "PlacementPolicy team-a/b"},
		{"priority before specificity", []native.Policy{policy("team-a", "a", 5, byKind()), policy("team-a", "c", 0, byName("clicks"))}, "PlacementPolicy team-a/a"},
		{"the namespace's before the farm's", []native.Policy{policy("", "a", 0, byKind()), policy("team-a", "z", 0, byKind())}, "PlacementPolicy team-a/z"},
		{"the farm's higher priority wins", []native.Policy{policy("", "a", 1, byKind()), policy("team-a", "z", 0, byName("clicks"))}, "ClusterPlacementPolicy a"},
		{"then the first name", []native.Policy{policy("team-a", "b", 0, byKind()), policy("team-a", "a", 0, byKind())}, "PlacementPolicy team-a/a"},
		{"the most specific of a policy's selectors counts", []native.Policy{policy("team-a", "a", 0, byKind(), byName("clicks")), policy("team-a", "b", 0, byLabels("clicks"))}, "PlacementPolicy team-a/a"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, _ := native.Select(c.policies, obj)
			got := ""
			if p != nil {
				got = p.Ref()
			}
			if got != c.want {
				t.Fatalf("selected %q, want %q", got, c.want)
			}
			if p == nil {
				if why := native.Unselected(c.policies, obj); !strings.Contains(why, "no placement policy") {
					t.Fatalf("why: %s", why)
				}
			}
		})
	}
}

func TestUnselectedNamesWhatIsMissing(t *testing.T) {
	obj := native.Object{GVK: flinkGVK, Namespace: "team-a", Name: "clicks", Labels: map[string]string{"app": "clicks"}}
	if why := native.Unselected(nil, obj); !strings.Contains(why, "create a PlacementPolicy in team-a whose spec.resourceSelectors name apiVersion flink.apache.org/v1beta1 and kind FlinkDeployment") {
		t.Fatalf("none at all: %s", why)
	}
	why := native.Unselected([]native.Policy{policy("team-a", "views", 0, byLabels("views")), policy("", "farm", 0, byName("other"))}, obj)
	if !strings.Contains(why, "ClusterPlacementPolicy farm, PlacementPolicy team-a/views select FlinkDeployment (flink.apache.org/v1beta1) objects, but by another name or labels") {
		t.Fatalf("some of the kind: %s", why)
	}
}

func TestRunnableOf(t *testing.T) {
	p := policy("team-a", "flink", 0, byKind())
	p.Spec.Runnable.Placement = v1alpha1.Placement{ClusterAffinity: &v1alpha1.ClusterAffinity{ClusterNames: []string{"dc1"}}}
	obj := map[string]any{
		"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment",
		"metadata": map[string]any{"name": "clicks", "namespace": "team-a", "uid": "u", "resourceVersion": "7", "managedFields": []any{},
			"labels": map[string]any{"app": "clicks"}, "annotations": map[string]any{"purser.io/phase": "Running", "purser.io/cluster": "dc9", "team": "streaming"}},
		"spec":   map[string]any{"image": "flink:1.20"},
		"status": map[string]any{"lifecycleState": "STABLE"},
	}
	r := native.RunnableOf(&p, obj)
	md := r.Spec.Template["metadata"].(map[string]any)
	if r.Metadata.Name != "clicks" || r.Metadata.Namespace != "team-a" || r.Spec.Template["status"] != nil ||
		md["uid"] != nil || md["resourceVersion"] != nil || md["managedFields"] != nil || md["namespace"] != nil || md["labels"] == nil ||
		r.Spec.Placement.ClusterAffinity == nil || r.Metadata.Annotations[native.AnnotationPolicy] != "PlacementPolicy team-a/flink" ||
		len(md["annotations"].(map[string]any)) != 1 || md["annotations"].(map[string]any)["team"] != "streaming" {
		t.Fatalf("the runnable: %+v", r)
	}
	if p.Spec.Runnable.Template != nil {
		t.Fatal("the policy's spec was changed")
	}
	if obj["status"] == nil || obj["metadata"].(map[string]any)["uid"] == nil {
		t.Fatal("the object was changed")
	}
}
