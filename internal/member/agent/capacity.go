package agent

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/purser-io/purser/internal/hub/stream"
)

// The cluster's free capacity, published with each heartbeat: the agent
// keeps its own caches of Nodes and of the Pods that are not terminal,
// trimmed to what the sum needs (a pod's node, phase and resources), and
// publishes the aggregate only, so that placement reads one small figure
// per cluster and the kube-apiserver serves no extra request per beat.

// capacityCache holds the informers of one term of leadership.
type capacityCache struct {
	nodes, pods cache.SharedIndexInformer
}

// nonTerminalPods selects the pods that hold their requests: a pod that
// succeeded or failed frees them (the scheduler's own accounting leaves
// terminal pods out as well). Leaving the selection is a deletion to the
// informer, so a finished pod leaves the cache.
var nonTerminalPods = fields.AndSelectors(
	fields.OneTermNotEqualSelector("status.phase", string(corev1.PodSucceeded)),
	fields.OneTermNotEqualSelector("status.phase", string(corev1.PodFailed)),
).String()

// startCapacity starts the Node and Pod informers of a term; they stop with
// ctx, and wg waits for them.
func (a *Agent) startCapacity(ctx context.Context, wg *sync.WaitGroup) {
	cs, err := kubernetes.NewForConfig(a.rest)
	if err != nil {
		a.log.Error("capacity: no client; free capacity is not reported", "error", err)
		return
	}
	c := &capacityCache{
		nodes: coreinformers.NewNodeInformer(cs, 0, cache.Indexers{}),
		pods: coreinformers.NewFilteredPodInformer(cs, metav1.NamespaceAll, 0, cache.Indexers{},
			func(o *metav1.ListOptions) { o.FieldSelector = nonTerminalPods }),
	}
	_ = c.nodes.SetTransform(trimNodeForCapacity)
	_ = c.pods.SetTransform(trimPodForCapacity)
	a.mu.Lock()
	a.capacity = c
	a.mu.Unlock()
	wg.Go(func() { c.nodes.RunWithContext(ctx) })
	wg.Go(func() { c.pods.RunWithContext(ctx) })
}

// capacityReport is the term's figure, nil until both caches are synced.
func (a *Agent) capacityReport() *stream.Capacity {
	a.mu.Lock()
	c := a.capacity
	a.mu.Unlock()
	if c == nil || !c.nodes.HasSynced() || !c.pods.HasSynced() {
		return nil
	}
	var nodes []*corev1.Node
	for _, o := range c.nodes.GetStore().List() {
		if n, ok := o.(*corev1.Node); ok {
			nodes = append(nodes, n)
		}
	}
	var pods []*corev1.Pod
	for _, o := range c.pods.GetStore().List() {
		if p, ok := o.(*corev1.Pod); ok {
			pods = append(pods, p)
		}
	}
	return FreeCapacity(nodes, pods)
}

// FreeCapacity computes a cluster's capacity from its nodes and its
// non-terminal pods (see stream.Capacity).
func FreeCapacity(nodes []*corev1.Node, pods []*corev1.Pod) *stream.Capacity {
	out := &stream.Capacity{Allocatable: corev1.ResourceList{}, Free: corev1.ResourceList{}, NodeMax: corev1.ResourceList{}, NodesTotal: len(nodes)}
	free := map[string]corev1.ResourceList{}
	for _, n := range nodes {
		if !TakesPods(n) {
			continue
		}
		out.Nodes++
		free[n.Name] = n.Status.Allocatable.DeepCopy()
		add(out.Allocatable, n.Status.Allocatable, 1)
	}
	total := out.Allocatable.DeepCopy()
	onePod := corev1.ResourceList{corev1.ResourcePods: *apiresource.NewQuantity(1, apiresource.DecimalSI)}
	for _, p := range pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		nodeFree, onNode := free[p.Spec.NodeName]
		if p.Spec.NodeName != "" && !onNode {
			continue // on a node that takes no pods: not in the figure
		}
		req := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
		add(req, onePod, 1)
		out.Pods++
		add(total, req, -1)
		if onNode {
			add(nodeFree, req, -1)
		}
	}
	for name, q := range total {
		out.Free[name] = nonNegative(q)
	}
	for _, nf := range free {
		for name, q := range nf {
			q = nonNegative(q)
			if cur, ok := out.NodeMax[name]; !ok || q.Cmp(cur) > 0 {
				out.NodeMax[name] = q
			}
		}
	}
	return out
}

// TakesPods reports whether the scheduler may put a new pod on n: Ready,
// not cordoned, and no taint that keeps pods off (NoSchedule, NoExecute).
// A taint the work would tolerate is not known here, so any such taint
// leaves the node out: the figure errs toward too little, never too much.
func TakesPods(n *corev1.Node) bool {
	if n.Spec.Unschedulable {
		return false
	}
	for _, t := range n.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			return false
		}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// add adds sign times b to a, resource by resource.
func add(a, b corev1.ResourceList, sign int) {
	for name, q := range b {
		cur := a[name]
		if sign < 0 {
			cur.Sub(q)
		} else {
			cur.Add(q)
		}
		a[name] = cur
	}
}

func nonNegative(q apiresource.Quantity) apiresource.Quantity {
	if q.Sign() < 0 {
		return *apiresource.NewQuantity(0, q.Format)
	}
	return q
}

// trimPodForCapacity keeps of a pod what its requests, node and phase
// need, so that the cache of a big cluster's pods stays small.
func trimPodForCapacity(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil // a tombstone
	}
	trimContainers := func(cs []corev1.Container) []corev1.Container {
		out := make([]corev1.Container, len(cs))
		for i, c := range cs {
			out[i] = corev1.Container{Name: c.Name, Resources: c.Resources, RestartPolicy: c.RestartPolicy}
		}
		return out
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion},
		Spec: corev1.PodSpec{
			NodeName:       p.Spec.NodeName,
			Containers:     trimContainers(p.Spec.Containers),
			InitContainers: trimContainers(p.Spec.InitContainers),
			Overhead:       p.Spec.Overhead,
			Resources:      p.Spec.Resources,
		},
		Status: corev1.PodStatus{Phase: p.Status.Phase},
	}, nil
}

// trimNodeForCapacity keeps of a node what TakesPods and the sum need.
func trimNodeForCapacity(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	var ready []corev1.NodeCondition
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = append(ready, corev1.NodeCondition{Type: c.Type, Status: c.Status})
		}
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion},
		Spec:       corev1.NodeSpec{Unschedulable: n.Spec.Unschedulable, Taints: n.Spec.Taints},
		Status:     corev1.NodeStatus{Allocatable: n.Status.Allocatable, Conditions: ready},
	}, nil
}
