package soak

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/member/kuberetry"
	"github.com/purser-io/purser/test/soak/farm"
)

// atMostOneJobs selects the Jobs purser created for AtMostOne runnables.
var atMostOneJobs = metav1.ListOptions{LabelSelector: v1alpha1.LabelConsistency + "=" + v1alpha1.ConsistencyAtMostOne}

// liveWatcher watches the AtMostOne Jobs of every member cluster from
// outside the DCs (the test's own network, straight to each
// kube-apiserver), and counts every time one runnable has live copies
// (not suspended, not being deleted) on two clusters that run their
// objects at the same moment. A DC without power runs nothing, so its
// copies do not count while it is off; when its kubelets start again
// the watcher lists that cluster afresh before counting it, so that what
// it last saw before the power loss is not taken for the present.
type liveWatcher struct {
	f      *farm.DCFarm
	ns     map[string]bool
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	live     map[string]map[string]string // runnable uid -> cluster -> the live Job's namespace/name
	counted  map[string]bool              // clusters whose copies count
	twice    map[string]bool              // runnables with two live copies now
	episodes []string
}

var jobsGVR = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}

func newLiveWatcher(ctx context.Context, f *farm.DCFarm, namespaces []string) (*liveWatcher, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := &liveWatcher{f: f, ns: map[string]bool{}, cancel: cancel, live: map[string]map[string]string{},
		counted: map[string]bool{}, twice: map[string]bool{}}
	for _, ns := range namespaces {
		w.ns[ns] = true
	}
	for _, dc := range f.DCs {
		dyn, err := dynamic.NewForConfig(dc.Cluster.RESTConfig())
		if err != nil {
			cancel()
			return nil, err
		}
		factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(kuberetry.Dynamic(dyn), 0, metav1.NamespaceAll,
			func(o *metav1.ListOptions) { o.LabelSelector = atMostOneJobs.LabelSelector })
		inf := factory.ForResource(jobsGVR).Informer()
		cluster := dc.Cluster.Name()
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { w.saw(cluster, obj, false) },
			UpdateFunc: func(_, obj any) { w.saw(cluster, obj, false) },
			DeleteFunc: func(obj any) { w.saw(cluster, obj, true) },
		}); err != nil {
			cancel()
			return nil, err
		}
		factory.Start(ctx.Done())
		w.wg.Go(func() { <-ctx.Done(); factory.Shutdown() })
		w.mu.Lock()
		w.counted[cluster] = true
		w.mu.Unlock()
	}
	w.wg.Go(func() { w.followPower(ctx) })
	return w, nil
}

// saw records one Job as its cluster's informer last saw it.
func (w *liveWatcher) saw(cluster string, obj any, deleted bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, deleted = d.Obj, true
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || !w.ns[u.GetNamespace()] {
		return
	}
	var job batchv1.Job
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &job); err != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.record(cluster, &job, !deleted && liveJob(&job))
	w.check(job.Labels[v1alpha1.LabelRunnableUID])
}

func liveJob(j *batchv1.Job) bool {
	return j.DeletionTimestamp == nil && (j.Spec.Suspend == nil || !*j.Spec.Suspend)
}

// record sets whether the Job is a live copy; w.mu is held.
func (w *liveWatcher) record(cluster string, j *batchv1.Job, live bool) {
	uid := j.Labels[v1alpha1.LabelRunnableUID]
	copies := w.live[uid]
	if copies == nil {
		copies = map[string]string{}
		w.live[uid] = copies
	}
	if live {
		copies[cluster] = j.Namespace + "/" + j.Name + " attempt " + j.Labels[v1alpha1.LabelAttempt]
	} else if copies[cluster] == j.Namespace+"/"+j.Name+" attempt "+j.Labels[v1alpha1.LabelAttempt] {
		delete(copies, cluster)
	}
}

// check counts a new episode of two live copies of runnable uid; w.mu is
// held.
func (w *liveWatcher) check(uid string) {
	var on []string
	for cluster, job := range w.live[uid] {
		if w.counted[cluster] {
			on = append(on, cluster+": "+job)
		}
	}
	switch {
	case len(on) > 1 && !w.twice[uid]:
		w.twice[uid] = true
		slices.Sort(on)
		w.episodes = append(w.episodes, fmt.Sprintf("%s runnable %s live on %v", stamp(), uid, on))
	case len(on) <= 1:
		delete(w.twice, uid)
	}
}

// followPower keeps counted in step with which DCs run their objects,
// listing a cluster afresh when its kubelets start again.
func (w *liveWatcher) followPower(ctx context.Context) {
	for ctx.Err() == nil {
		for _, dc := range w.f.DCs {
			cluster := dc.Cluster.Name()
			executing := dc.Executing()
			w.mu.Lock()
			was := w.counted[cluster]
			w.mu.Unlock()
			switch {
			case was && !executing:
				w.mu.Lock()
				w.counted[cluster] = false
				w.mu.Unlock()
			case !was && executing:
				w.relist(ctx, dc)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// relist replaces what the watcher holds of dc's cluster by a fresh list,
// then counts it again.
func (w *liveWatcher) relist(ctx context.Context, dc *farm.DC) {
	kube, err := dc.Cluster.Client()
	if err != nil {
		return
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var jobs []batchv1.Job
	for ns := range w.ns {
		list, err := kube.BatchV1().Jobs(ns).List(lctx, atMostOneJobs)
		if err != nil {
			return // the next round tries again
		}
		jobs = append(jobs, list.Items...)
	}
	cluster := dc.Cluster.Name()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, copies := range w.live {
		delete(copies, cluster)
	}
	for i := range jobs {
		w.record(cluster, &jobs[i], liveJob(&jobs[i]))
	}
	w.counted[cluster] = true
	for _, uid := range slices.Collect(maps.Keys(w.live)) {
		w.check(uid)
	}
}

func (w *liveWatcher) stop() {
	w.cancel()
	w.wg.Wait()
}

// violations is how many times a runnable had two live copies, and when.
func (w *liveWatcher) violations() (int, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.episodes), slices.Clone(w.episodes)
}
