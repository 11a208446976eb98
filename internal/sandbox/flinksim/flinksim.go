// Package flinksim stands in for the Flink Kubernetes operator on sandbox
// clusters, where the real one cannot run. It drives the status of
// flink.apache.org/v1beta1 FlinkDeployments with the operator's own field
// names and values (status.lifecycleState, status.jobManagerDeploymentStatus,
// status.jobStatus.state and .jobId, status.error), honours what purser's
// failover relies on (a fixed job id, spec.job.initialSavepointPath,
// spec.job.state: suspended), and lets a test inject the faults that
// failover must tell apart: a lost JobManager, a user's broken image, a
// failed job. It is test support only; nothing in purser imports it.
package flinksim

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
)

// Resource is the FlinkDeployment resource the simulator watches.
var Resource = schema.GroupVersionResource{Group: "flink.apache.org", Version: "v1beta1", Resource: "flinkdeployments"}

// JobIDLabel, when set on a FlinkDeployment, is the id its job runs with,
// as when a job is restored under the id it had before.
const JobIDLabel = "flink.apache.org/job-id"

const (
	// cacheTimeout bounds the wait for the informer's first list, so that
	// a cluster without the CRD gives an error instead of a hang.
	cacheTimeout = time.Minute
	// syncTimeout bounds one sync, so that a stopped apiserver holds the
	// worker for a bounded time before the key is retried with backoff.
	syncTimeout = 30 * time.Second
)

// imagePullError is status.error as the operator writes it when the
// JobManager's image cannot be pulled.
const imagePullError = `{"type":"org.apache.flink.kubernetes.operator.exception.DeploymentFailedException",` +
	`"message":"Back-off pulling image \"flink:missing\"","additionalMetadata":{"reason":"ImagePullBackOff"}}`

// Fault is a failure injected into one FlinkDeployment.
type Fault int

const (
	// Reconciling is a lost JobManager: the operator redeploys it and the
	// job is not running meanwhile. Moving the job elsewhere would help.
	Reconciling Fault = iota + 1
	// ImagePullBackOff is a JobManager whose image cannot be pulled, an
	// error in the deployment's own spec that no other cluster would fix.
	ImagePullBackOff
	// FailedJob is a job that exhausted Flink's restart strategy.
	FailedJob
)

// String names the fault in logs.
func (f Fault) String() string {
	switch f {
	case Reconciling:
		return "Reconciling"
	case ImagePullBackOff:
		return "ImagePullBackOff"
	case FailedJob:
		return "FailedJob"
	}
	return "none"
}

// Options tune a Simulator.
type Options struct {
	// StartDelay is how long a new FlinkDeployment stays deploying before
	// its job runs; default 500ms.
	StartDelay time.Duration
	// Logger receives the simulator's logs; default discards them.
	Logger *slog.Logger
}

// Simulator is a FlinkDeployment controller for one cluster. Its methods
// are safe for concurrent use.
type Simulator struct {
	dyn        dynamic.Interface
	informer   cache.SharedIndexInformer
	queue      workqueue.TypedRateLimitingInterface[string]
	log        *slog.Logger
	startDelay time.Duration
	wg         sync.WaitGroup

	mu     sync.Mutex
	jobs   map[string]*job  // by namespace/name
	faults map[string]Fault // by namespace/name; outlive the object, so a test may fail a name before it exists
}

// job is what the simulator remembers of one FlinkDeployment, the way the
// operator remembers it in the status it does not expose here.
type job struct {
	uid          types.UID // a new object under the same name is a new job
	id           string
	restoredFrom string
	readyAt      time.Time // when the job runs, or ran since its last resume
	suspended    bool
}

// Start runs a simulator on the cluster of cfg until ctx is done, named
// name in its logs. It returns once its informer has listed every
// FlinkDeployment, so InstallCRD must have run; Wait waits for it to stop.
func Start(ctx context.Context, name string, cfg *rest.Config, opts Options) (*Simulator, error) {
	if opts.StartDelay <= 0 {
		opts.StartDelay = 500 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("flinksim %s: %w", name, err)
	}
	factory := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	s := &Simulator{
		dyn:      dyn,
		informer: factory.ForResource(Resource).Informer(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "flinksim-" + name}),
		log:        opts.Logger.With("flinksim", name),
		startDelay: opts.StartDelay,
		jobs:       map[string]*job{},
		faults:     map[string]Fault{},
	}
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			s.queue.Add(key)
		}
	}
	if _, err := s.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}); err != nil {
		return nil, fmt.Errorf("flinksim %s: %w", name, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	factory.Start(ctx.Done())
	s.wg.Go(func() {
		<-ctx.Done()
		s.queue.ShutDown()
		factory.Shutdown()
	})
	listCtx, listCancel := context.WithTimeout(ctx, cacheTimeout)
	defer listCancel()
	if !cache.WaitForCacheSync(listCtx.Done(), s.informer.HasSynced) {
		cancel()
		s.wg.Wait()
		return nil, fmt.Errorf("flinksim %s: FlinkDeployments not listed (is the CRD installed?): %w", name, listCtx.Err())
	}
	s.wg.Go(func() {
		defer cancel()
		for s.processNext(ctx) {
		}
	})
	s.log.Info("simulating the Flink operator")
	return s, nil
}

// Wait returns once the simulator has stopped, after Start's ctx is done.
func (s *Simulator) Wait() { s.wg.Wait() }

// Fail injects f into the FlinkDeployment namespace/name at once; it stays
// until Recover, and applies to an object of that name created later.
func (s *Simulator) Fail(namespace, name string, f Fault) {
	s.setFault(namespace+"/"+name, f)
}

// Recover removes the fault of namespace/name; its job runs again.
func (s *Simulator) Recover(namespace, name string) {
	s.setFault(namespace+"/"+name, 0)
}

func (s *Simulator) setFault(key string, f Fault) {
	s.mu.Lock()
	if f == 0 {
		delete(s.faults, key)
	} else {
		s.faults[key] = f
	}
	s.mu.Unlock()
	s.log.Info("fault set", "key", key, "fault", f)
	s.queue.Add(key)
}

// RestoredFrom is the savepoint the job of namespace/name was started from
// (its spec.job.initialSavepointPath when first seen), or "".
func (s *Simulator) RestoredFrom(namespace, name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j := s.jobs[namespace+"/"+name]; j != nil {
		return j.restoredFrom
	}
	return ""
}

// Running reports the job id of namespace/name if its status, as the
// simulator last saw it on the cluster, says the job is RUNNING.
func (s *Simulator) Running(namespace, name string) (jobID string, ok bool) {
	obj, exists, err := s.informer.GetIndexer().GetByKey(namespace + "/" + name)
	if err != nil || !exists {
		return "", false
	}
	u := obj.(*unstructured.Unstructured)
	state, _, _ := unstructured.NestedString(u.Object, "status", "jobStatus", "state")
	id, _, _ := unstructured.NestedString(u.Object, "status", "jobStatus", "jobId")
	return id, state == "RUNNING" && id != ""
}

func (s *Simulator) processNext(ctx context.Context) bool {
	key, shutdown := s.queue.Get()
	if shutdown {
		return false
	}
	defer s.queue.Done(key)
	syncCtx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	if err := s.sync(syncCtx, key); err != nil {
		if ctx.Err() == nil {
			s.log.Warn("sync failed; retrying", "key", key, "error", err)
			s.queue.AddRateLimited(key)
		}
		return true
	}
	s.queue.Forget(key)
	return true
}

// sync writes the status that the FlinkDeployment key should have now.
// It starts from the cached object and, on a conflict, from a fresh read.
func (s *Simulator) sync(ctx context.Context, key string) error {
	cached, exists, err := s.informer.GetIndexer().GetByKey(key)
	if err != nil {
		return err
	}
	if !exists {
		s.mu.Lock()
		delete(s.jobs, key)
		s.mu.Unlock()
		return nil
	}
	obj := cached.(*unstructured.Unstructured)
	client := s.dyn.Resource(Resource).Namespace(obj.GetNamespace())
	first := true
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !first {
			fresh, err := client.Get(ctx, obj.GetName(), metav1.GetOptions{})
			if err != nil {
				return err
			}
			obj = fresh
		}
		first = false
		now := time.Now()
		j, fault := s.observe(key, obj, now)
		if wait := j.readyAt.Sub(now); wait > 0 {
			s.queue.AddAfter(key, wait)
		}
		st := decide(j, fault, now)
		updated, err := withStatus(obj, st, j)
		if err != nil {
			return fmt.Errorf("status of %s: %w", key, err)
		}
		if equality.Semantic.DeepEqual(updated.Object["status"], obj.Object["status"]) {
			return nil
		}
		if _, err := client.UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
			return err
		}
		s.log.Info("status written", "key", key, "jobState", st.job, "lifecycle", st.lifecycle, "jobManager", st.jobManager)
		return nil
	})
}

// observe records what the simulator learns from obj's metadata and spec
// and returns a copy of its job with the fault in force.
func (s *Simulator) observe(key string, obj *unstructured.Unstructured, now time.Time) (job, Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.jobs[key]
	if j == nil || j.uid != obj.GetUID() {
		id := obj.GetLabels()[JobIDLabel]
		if id == "" {
			id = newJobID()
		}
		path, _, _ := unstructured.NestedString(obj.Object, "spec", "job", "initialSavepointPath")
		j = &job{uid: obj.GetUID(), id: id, restoredFrom: path, readyAt: now.Add(s.startDelay)}
		s.jobs[key] = j
		s.log.Info("new job", "key", key, "jobID", id, "restoredFrom", path)
	}
	state, _, _ := unstructured.NestedString(obj.Object, "spec", "job", "state")
	suspended := state == "suspended"
	if j.suspended && !suspended && now.After(j.readyAt) {
		// A resumed job is a new run of the same job: it starts now.
		j.readyAt = now
	}
	j.suspended = suspended
	return *j, s.faults[key]
}

// status is the part of a FlinkDeployment's status the simulator owns.
type status struct {
	lifecycle, jobManager, job string
	err                        string    // status.error; "" removes it
	started                    time.Time // jobStatus.startTime when RUNNING
}

// decide is the status the operator would report for j under fault at now.
// A suspended job is not running, so no fault shows on it; a fault shows
// at once, even on a job still being deployed.
func decide(j job, fault Fault, now time.Time) status {
	switch {
	case j.suspended:
		return status{lifecycle: "SUSPENDED", jobManager: "MISSING", job: "SUSPENDED"}
	case fault == Reconciling:
		return status{lifecycle: "DEPLOYED", jobManager: "DEPLOYING", job: "RECONCILING"}
	case fault == ImagePullBackOff:
		return status{lifecycle: "DEPLOYED", jobManager: "ERROR", job: "RECONCILING", err: imagePullError}
	case fault == FailedJob:
		// The operator derives lifecycle FAILED from a FAILED job.
		return status{lifecycle: "FAILED", jobManager: "READY", job: "FAILED"}
	case now.Before(j.readyAt):
		return status{lifecycle: "CREATED", jobManager: "DEPLOYING", job: "CREATED"}
	}
	return status{lifecycle: "STABLE", jobManager: "READY", job: "RUNNING", started: j.readyAt}
}

// withStatus returns a copy of obj carrying st, keeping status fields the
// simulator does not own. The start time of a job that is not running is
// left as it was, as the operator leaves it.
func withStatus(obj *unstructured.Unstructured, st status, j job) (*unstructured.Unstructured, error) {
	type field struct {
		value string // "" removes the field
		path  []string
	}
	fields := []field{
		{st.lifecycle, []string{"status", "lifecycleState"}},
		{st.jobManager, []string{"status", "jobManagerDeploymentStatus"}},
		{st.job, []string{"status", "jobStatus", "state"}},
		{j.id, []string{"status", "jobStatus", "jobId"}},
		{obj.GetName(), []string{"status", "jobStatus", "jobName"}},
		{st.err, []string{"status", "error"}},
		{j.restoredFrom, []string{"status", "jobStatus", "savepointInfo", "lastSavepoint", "location"}},
	}
	if !st.started.IsZero() {
		// The operator writes milliseconds since the epoch, as a string.
		ms := strconv.FormatInt(st.started.UnixMilli(), 10)
		fields = append(fields, field{ms, []string{"status", "jobStatus", "startTime"}})
	}
	out := obj.DeepCopy()
	for _, f := range fields {
		if f.value == "" {
			unstructured.RemoveNestedField(out.Object, f.path...)
			continue
		}
		if err := unstructured.SetNestedField(out.Object, f.value, f.path...); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// newJobID is a fresh Flink job id: 16 random bytes in hex.
func newJobID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}
