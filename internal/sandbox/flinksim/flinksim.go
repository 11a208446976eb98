// Package flinksim stands in for the Apache Flink Kubernetes Operator on
// sandbox clusters, where the real one cannot run. It follows the
// operator's own state machine, read from its source
// (apache/flink-kubernetes-operator), for what purser reacts to: the first
// deployment (restoring spec.job.initialSavepointPath, at that deployment
// only), the JobManager coming up (DEPLOYING, DEPLOYED_NOT_READY, READY),
// the job running, periodic and manual savepoints and Flink's own periodic
// checkpoints, reported in status at the operator's passes (or as
// FlinkStateSnapshot objects, as 1.10+ does), a pass per reconcile
// interval or spec change,
// suspend and resume, savepoint and last-state upgrades (with the status
// the operator stores between their passes), JobManager loss with and
// without HA, a cancel from the Flink UI, session clusters, and the status
// of operators before 1.4 (no lifecycleState, status.error as text).
// operator.go names the operator method each transition follows.
//
// A test injects the faults failover must tell apart: a JobManager that
// cannot run, a user's broken image, a failed job. It is test support and
// the stand-in operator of `purser up --flink` (with Storage for the
// checkpoints); no component of purser's control plane imports it.
package flinksim

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"

	"github.com/purser-io/purser/internal/platform/resourceversion"
)

// Resource is the FlinkDeployment resource the simulator watches.
var Resource = schema.GroupVersionResource{Group: "flink.apache.org", Version: "v1beta1", Resource: "flinkdeployments"}

const (
	// cacheTimeout bounds the wait for the informer's first list, so that
	// a cluster without the CRD gives an error instead of a hang.
	cacheTimeout = time.Minute
	// workers is how many deployments are reconciled at once; the
	// workqueue never hands one key to two of them.
	workers = 8
	// syncTimeout bounds one sync, so that a stopped apiserver holds the
	// worker for a bounded time before the key is retried with backoff.
	syncTimeout = 30 * time.Second
)

// Fault is a failure injected into one FlinkDeployment.
type Fault int

const (
	// Reconciling is a JobManager that cannot run on this cluster: its
	// Deployment has no available pod, so the operator reports it
	// DEPLOYING and the job RECONCILING (JobStatusObserver
	// .ifRunningMoveToReconciling, observeJmDeployment). A new deployment
	// under it gets its job id and never starts. Moving the job elsewhere
	// would help.
	Reconciling Fault = iota + 1
	// ImagePullBackOff is a JobManager whose image cannot be pulled, an
	// error in the deployment's own spec that no other cluster would fix
	// (a DeploymentFailedException: JobManager ERROR).
	ImagePullBackOff
	// FailedJob is a job that exhausted Flink's restart strategy.
	FailedJob
	// SavepointFails is a job whose stop-with-savepoint fails (a savepoint
	// that times out or cannot be written): the operator's cancelJob with
	// SuspendMode.SAVEPOINT throws an UpgradeFailureException ("Savepoint
	// Error", reason SavepointError; AbstractFlinkService
	// .savepointJobOrError) before it deletes anything, so the job keeps
	// RUNNING, the last reconciled spec stays the running one, status.error
	// says why, and the operator tries again at its next passes.
	SavepointFails
)

// Faults lists the faults by the names String gives them.
var Faults = []Fault{Reconciling, ImagePullBackOff, FailedJob}

// ParseFault is the Fault String names name, case-insensitively.
func ParseFault(name string) (Fault, error) {
	for _, f := range Faults {
		if strings.EqualFold(f.String(), name) {
			return f, nil
		}
	}
	names := make([]string, len(Faults))
	for i, f := range Faults {
		names[i] = f.String()
	}
	return 0, fmt.Errorf("unknown Flink fault %q (known: %s)", name, strings.Join(names, ", "))
}

// String names the fault in logs.
func (f Fault) String() string {
	switch f {
	case Reconciling:
		return "Reconciling"
	case ImagePullBackOff:
		return "ImagePullBackOff"
	case FailedJob:
		return "FailedJob"
	case SavepointFails:
		return "SavepointFails"
	}
	return "none"
}

// Config tune a Simulator. The zero value is a current operator (1.10+)
// without the FlinkStateSnapshot CRD.
type Config struct {
	// StartDelay is how long a new JobManager takes to serve; default 500ms.
	StartDelay time.Duration
	// ReconcileInterval is how often the operator looks at a deployment
	// that is not being deployed (kubernetes.operator.reconcile.interval,
	// KubernetesOperatorConfigOptions; default 60 s, as the operator's):
	// the status shows Flink's newest checkpoint, and a periodic savepoint
	// is taken, only at such a pass or one an event causes.
	ReconcileInterval time.Duration
	// LegacyStatus simulates an operator before 1.4: no
	// status.lifecycleState, no observedGeneration, status.error as plain
	// text, and (as before 1.10) a job cancelled from the Flink UI left
	// CANCELED.
	LegacyStatus bool
	// StateSnapshots simulates 1.10+ with the FlinkStateSnapshot CRD
	// installed (InstallSnapshotCRD): savepoints are FlinkStateSnapshot
	// objects with status.path, not status.jobStatus.savepointInfo.
	StateSnapshots bool
	// Checkpoints, when set, is called with the path of every completed
	// checkpoint (<state.checkpoints.dir>/<jobId>/chk-<n>) and savepoint,
	// so that a test can write its _metadata where Flink would.
	Checkpoints func(ctx context.Context, path string) error
	// Discards, when set, is called with the path of every checkpoint a
	// newer one subsumes: Flink keeps the newest
	// state.checkpoints.num-retained (default 1) of a job and deletes
	// the older ones (CheckpointCoordinator, CompletedCheckpointStore),
	// so that the storage holds a few checkpoints per job, not all.
	Discards func(ctx context.Context, path string) error
	// Logger receives the simulator's logs; default discards them.
	Logger *slog.Logger
}

// Simulator is a FlinkDeployment controller for one cluster. Its methods
// are safe for concurrent use.
type Simulator struct {
	dyn      dynamic.Interface
	informer cache.SharedIndexInformer
	queue    workqueue.TypedRateLimitingInterface[string]
	log      *slog.Logger
	opts     Config
	wg       sync.WaitGroup
	// readyz reaches the kube-apiserver's /readyz, the stand-in for the
	// HA store of checkpoints (checkpoints.go).
	readyz rest.Interface
	// tick is held while checkpoints complete and while a fault is set,
	// so that a fault lands between two ticks.
	tick sync.Mutex

	mu     sync.Mutex
	mems   map[string]*memory        // by namespace/name
	events map[string]events         // by namespace/name
	chk    map[string]jobCheckpoints // by job id (checkpoints.go)
	faults map[string]Fault          // by namespace/name; outlive the object, so a test may fail a name before it exists
	haDown bool                      // the last store of HA checkpoints failed
}

// Start runs a simulator on the cluster of cfg until ctx is done, named
// name in its logs. It returns once its informer has listed every
// FlinkDeployment, so InstallCRD must have run; Wait waits for it to stop.
func Start(ctx context.Context, name string, cfg *rest.Config, opts Config) (*Simulator, error) {
	if opts.StartDelay <= 0 {
		opts.StartDelay = 500 * time.Millisecond
	}
	if opts.ReconcileInterval <= 0 {
		opts.ReconcileInterval = time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	// The operator's client (fabric8) has no rate limit of its own, and
	// it reconciles many deployments at once (reconcile.parallelism); a
	// simulator of hundreds of deployments must not be slowed by
	// client-go's.
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.RateLimiter = -1, nil
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("flinksim %s: %w", name, err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("flinksim %s: %w", name, err)
	}
	factory := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	s := &Simulator{
		dyn:      dyn,
		readyz:   disc.RESTClient(),
		informer: factory.ForResource(Resource).Informer(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "flinksim-" + name}),
		log:    opts.Logger.With("flinksim", name),
		opts:   opts,
		mems:   map[string]*memory{},
		events: map[string]events{},
		chk:    map[string]jobCheckpoints{},
		faults: map[string]Fault{},
	}
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			s.queue.Add(key)
		}
	}
	// The informer's list and watch failures go to the simulator's log,
	// named for it, rather than to client-go's global one, where they
	// read as any test's of the binary.
	if err := s.informer.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		s.log.Warn("list or watch of FlinkDeployments failed; retrying", "error", err)
	}); err != nil {
		return nil, fmt.Errorf("flinksim %s: %w", name, err)
	}
	if _, err := s.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue,
		// The operator's controller is generation aware (JOSDK's default
		// @ControllerConfiguration): a change of the status alone, its own
		// writes included, causes no pass; a change of the spec, or the
		// deletion, does.
		UpdateFunc: func(old, obj any) {
			o, ok1 := old.(*unstructured.Unstructured)
			n, ok2 := obj.(*unstructured.Unstructured)
			if !ok1 || !ok2 || o.GetGeneration() != n.GetGeneration() || n.GetDeletionTimestamp() != nil {
				enqueue(obj)
			}
		},
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
		var pool sync.WaitGroup
		for range workers {
			pool.Go(func() {
				for s.processNext(ctx) {
				}
			})
		}
		pool.Go(func() { s.runCheckpoints(ctx) })
		pool.Wait()
	})
	s.log.Info("simulating the Flink operator", "legacyStatus", opts.LegacyStatus, "stateSnapshots", opts.StateSnapshots)
	return s, nil
}

// Wait returns once the simulator has stopped, after Start's ctx is done.
func (s *Simulator) Wait() { s.wg.Wait() }

// Fail injects f into the FlinkDeployment namespace/name at once; it stays
// until Recover, and applies to an object of that name created later. No
// checkpoint of its job completes once Fail has returned.
func (s *Simulator) Fail(namespace, name string, f Fault) {
	s.FailEach(namespace, []string{name}, f)
}

// FailEach is Fail of every name at the same moment: between the same two
// checkpoint ticks.
func (s *Simulator) FailEach(namespace string, names []string, f Fault) {
	keys := make([]string, len(names))
	for i, name := range names {
		keys[i] = namespace + "/" + name
	}
	s.setFault(keys, f)
}

// Recover removes the fault of namespace/name; its job runs again.
func (s *Simulator) Recover(namespace, name string) {
	s.setFault([]string{namespace + "/" + name}, 0)
}

func (s *Simulator) setFault(keys []string, f Fault) {
	// A tick completing checkpoints finishes first: a checkpoint is
	// either complete before the fault or never.
	s.tick.Lock()
	s.mu.Lock()
	for _, key := range keys {
		if f == 0 {
			delete(s.faults, key)
		} else {
			s.faults[key] = f
		}
	}
	s.mu.Unlock()
	s.tick.Unlock()
	for _, key := range keys {
		s.log.Info("fault set", "key", key, "fault", f)
		s.queue.Add(key)
	}
}

// FaultOf is the fault set on namespace/name, or 0.
func (s *Simulator) FaultOf(namespace, name string) Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults[namespace+"/"+name]
}

// Has reports whether the FlinkDeployment namespace/name exists on the
// simulator's cluster, as its informer last listed or watched it.
func (s *Simulator) Has(namespace, name string) bool {
	_, exists, err := s.informer.GetIndexer().GetByKey(namespace + "/" + name)
	return err == nil && exists
}

// CancelFromUI cancels the running job of namespace/name the way a person
// does in the Flink UI or REST API, outside the operator.
func (s *Simulator) CancelFromUI(namespace, name string) {
	s.event(namespace+"/"+name, func(e *events) { e.cancelUI = true })
}

// LoseJobManager deletes the JobManager Deployment of namespace/name from
// outside, as a person or a broken node can: with HA the operator
// recovers it (shouldRecoverDeployment), without it the job stays lost.
func (s *Simulator) LoseJobManager(namespace, name string) {
	s.event(namespace+"/"+name, func(e *events) { e.loseJM = true })
}

func (s *Simulator) event(key string, f func(*events)) {
	s.mu.Lock()
	if s.mems[key] != nil {
		e := s.events[key]
		f(&e)
		s.events[key] = e
	}
	s.mu.Unlock()
	s.queue.Add(key)
}

// Deploys lists the job submissions of namespace/name's current object,
// oldest first.
func (s *Simulator) Deploys(namespace, name string) []Deploy {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.mems[namespace+"/"+name]; m != nil {
		return slices.Clone(m.deploys)
	}
	return nil
}

// RestoredFrom is the savepoint or checkpoint the current job of
// namespace/name started from, or "".
func (s *Simulator) RestoredFrom(namespace, name string) string {
	d := s.Deploys(namespace, name)
	if len(d) == 0 {
		return ""
	}
	return d[len(d)-1].RestoredFrom
}

// Running reports the job id of namespace/name if its status, as the
// simulator last saw or wrote it, says the job is RUNNING. What it saw is
// its informer's cache, which receives the simulator's own status writes
// a watch event after they are made, while Deploys counts a deployment as
// soon as its status is written: right after a cancel from the UI or an
// upgrade the cache can still hold the old job RUNNING, with the old id.
// So the status of the simulator's last write is read while the cache
// holds an older one.
func (s *Simulator) Running(namespace, name string) (jobID string, ok bool) {
	key := namespace + "/" + name
	obj, exists, err := s.informer.GetIndexer().GetByKey(key)
	if err != nil || !exists {
		return "", false
	}
	u := obj.(*unstructured.Unstructured)
	s.mu.Lock()
	if m := s.mems[key]; m != nil && m.written != nil && m.written.GetUID() == u.GetUID() {
		if c, ordered := resourceversion.Compare(u.GetResourceVersion(), m.written.GetResourceVersion()); ordered && c < 0 {
			u = m.written
		}
	}
	s.mu.Unlock()
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

// sync runs one operator pass over the FlinkDeployment key and writes the
// status it gives. It starts from the cached object and, on a conflict,
// from a fresh read; the simulator's memory of the Flink cluster changes
// only when the status write succeeds.
func (s *Simulator) sync(ctx context.Context, key string) error {
	cached, exists, err := s.informer.GetIndexer().GetByKey(key)
	if err != nil {
		return err
	}
	if !exists {
		s.mu.Lock()
		delete(s.mems, key)
		delete(s.events, key)
		s.mu.Unlock()
		return nil
	}
	obj := cached.(*unstructured.Unstructured)
	client := s.dyn.Resource(Resource).Namespace(obj.GetNamespace())
	first := true
	var eff effects
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !first {
			fresh, err := client.Get(ctx, obj.GetName(), metav1.GetOptions{})
			if err != nil {
				return err
			}
			obj = fresh
		}
		first = false
		updated, mem, e, err := s.step(key, obj, false)
		if err == nil && equality.Semantic.DeepEqual(updated.Object["status"], obj.Object["status"]) {
			// Nothing observed: reconcile, keeping when the observer
			// wants to look again.
			observed := e
			updated, mem, e, err = s.step(key, obj, true)
			e.requeue = minPositive(e.requeue, observed.requeue)
			e.again = e.again || observed.again
			e.files = append(observed.files, e.files...)
			e.taken = events{cancelUI: e.taken.cancelUI || observed.taken.cancelUI, loseJM: e.taken.loseJM || observed.taken.loseJM}
		} else if err == nil {
			e.again = true // reconcile on the next pass, after the observed status is stored
		}
		if err != nil {
			return fmt.Errorf("status of %s: %w", key, err)
		}
		eff = e
		if !equality.Semantic.DeepEqual(updated.Object["status"], obj.Object["status"]) {
			written, err := client.UpdateStatus(ctx, updated, metav1.UpdateOptions{})
			if err != nil {
				return err
			}
			mem.written = written
			st, _, _ := unstructured.NestedString(updated.Object, "status", "jobStatus", "state")
			lc, _, _ := unstructured.NestedString(updated.Object, "status", "lifecycleState")
			jm, _, _ := unstructured.NestedString(updated.Object, "status", "jobManagerDeploymentStatus")
			s.log.Info("status written", "key", key, "jobState", st, "lifecycle", lc, "jobManager", jm)
		}
		s.mu.Lock()
		s.mems[key] = mem
		left := s.events[key]
		left.cancelUI = left.cancelUI && !e.taken.cancelUI
		left.loseJM = left.loseJM && !e.taken.loseJM
		s.events[key] = left
		s.mu.Unlock()
		return nil
	})
	if err != nil {
		return err
	}
	for _, path := range eff.files {
		if s.opts.Checkpoints != nil {
			if err := s.opts.Checkpoints(ctx, path); err != nil {
				s.log.Warn("checkpoint not written", "path", path, "error", err)
			}
		}
	}
	for _, snap := range eff.snapshots {
		if err := s.createSnapshot(ctx, obj, snap); err != nil {
			return err
		}
	}
	switch {
	case eff.again:
		s.queue.Add(key)
	case eff.requeue > 0:
		s.queue.AddAfter(key, eff.requeue)
	}
	return nil
}

// step runs a pass on a copy of the simulator's memory of key and returns
// the object with its new status and the memory as it would be after it.
func (s *Simulator) step(key string, obj *unstructured.Unstructured, reconcile bool) (*unstructured.Unstructured, *memory, effects, error) {
	s.mu.Lock()
	mem := &memory{uid: string(obj.GetUID())}
	if m := s.mems[key]; m != nil && m.uid == string(obj.GetUID()) {
		c := *m
		c.deploys = slices.Clone(m.deploys)
		mem = &c
	}
	ev := s.events[key]
	chk := s.chk[mem.cluster.jobID]
	fault := s.faults[key]
	s.mu.Unlock()

	var st deploymentStatus
	if raw, ok := obj.Object["status"]; ok {
		b, err := json.Marshal(raw)
		if err != nil {
			return nil, nil, effects{}, err
		}
		if err := json.Unmarshal(b, &st); err != nil {
			return nil, nil, effects{}, err
		}
	}
	if st.JobManagerDeploymentStatus == "" {
		st.JobManagerDeploymentStatus = "MISSING" // FlinkDeploymentStatus's default
	}
	specRaw, _ := obj.Object["spec"].(map[string]any)
	p := &pass{opts: s.opts, name: obj.GetName(), gen: obj.GetGeneration(), spec: readSpec(deepCopy(specRaw)),
		st: &st, mem: mem, ev: ev, chk: chk, fault: fault, now: time.Now()}
	p.run(reconcile)
	p.eff.taken = events{cancelUI: ev.cancelUI && !p.ev.cancelUI, loseJM: ev.loseJM && !p.ev.loseJM}
	mem.deploys = append(mem.deploys, p.deploys...)
	for _, d := range p.deploys {
		s.log.Info("job submitted", "key", key, "jobId", d.JobID, "restoredFrom", d.RestoredFrom)
	}

	b, err := json.Marshal(&st)
	if err != nil {
		return nil, nil, effects{}, err
	}
	var status map[string]any
	if err := json.Unmarshal(b, &status); err != nil {
		return nil, nil, effects{}, err
	}
	out := obj.DeepCopy()
	// Numbers as the apiserver's decoder gives them, so that an unchanged
	// status compares equal and is not written again.
	out.Object["status"] = runtimeJSON(status)
	return out, mem, p.eff, nil
}

// runtimeJSON converts encoding/json's float64 numbers to the int64 that
// unstructured objects from the apiserver hold.
func runtimeJSON(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = runtimeJSON(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = runtimeJSON(e)
		}
		return x
	case float64:
		if x == float64(int64(x)) {
			return int64(x)
		}
	}
	return v
}
