package agent

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func capNode(name, cpu, memory string, mutate func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: apiresource.MustParse(cpu), corev1.ResourceMemory: apiresource.MustParse(memory),
				corev1.ResourcePods: apiresource.MustParse("110")},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	if mutate != nil {
		mutate(n)
	}
	return n
}

func capPod(node string, phase corev1.PodPhase, cpu string) *corev1.Pod {
	return &corev1.Pod{
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: apiresource.MustParse(cpu)}}}}},
		Status: corev1.PodStatus{Phase: phase},
	}
}

// TestFreeCapacity: allocatable of the nodes that take pods, less the
// requests of non-terminal pods, and the most free on one node.
func TestFreeCapacity(t *testing.T) {
	nodes := []*corev1.Node{
		capNode("big", "32", "128Gi", nil),
		capNode("small", "8", "32Gi", nil),
		capNode("cordoned", "64", "256Gi", func(n *corev1.Node) { n.Spec.Unschedulable = true }),
		capNode("tainted", "64", "256Gi", func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}}
		}),
		capNode("prefer", "4", "8Gi", func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "x", Effect: corev1.TaintEffectPreferNoSchedule}}
		}),
		capNode("notready", "64", "256Gi", func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }),
	}
	pods := []*corev1.Pod{
		capPod("big", corev1.PodRunning, "30"),
		capPod("small", corev1.PodRunning, "2"),
		capPod("small", corev1.PodSucceeded, "6"),   // terminal: frees its requests
		capPod("cordoned", corev1.PodRunning, "60"), // on a node left out
		capPod("", corev1.PodPending, "1500m"),      // not bound yet: takes its share somewhere
	}
	c := FreeCapacity(nodes, pods)
	want := func(l corev1.ResourceList, name corev1.ResourceName, q string) {
		t.Helper()
		got := l[name]
		if got.Cmp(apiresource.MustParse(q)) != 0 {
			t.Errorf("%s %s, want %s (%v)", name, got.String(), q, l)
		}
	}
	if c.Nodes != 3 || c.NodesTotal != 6 {
		t.Errorf("nodes %d of %d, want 3 of 6", c.Nodes, c.NodesTotal)
	}
	want(c.Allocatable, corev1.ResourceCPU, "44")
	want(c.Free, corev1.ResourceCPU, "10500m") // 44 - 30 - 2 - 1.5
	want(c.Free, corev1.ResourcePods, "327")   // 330 - 3
	want(c.NodeMax, corev1.ResourceCPU, "6")   // small: 8 - 2
	want(c.NodeMax, corev1.ResourceMemory, "128Gi")
	if c.Pods != 3 {
		t.Errorf("pods %d, want 3", c.Pods)
	}
}
