package soak

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/test/soak/farm"
)

// workload is the users of the farm: a steady stream of small Jobs
// submitted as runnables, and a set of ConfigMap deployables whose data
// keeps changing (and which are now and then deleted and created again).
// It remembers every answer, so that the checks can tell what the API
// accepted.
type workload struct {
	api        *farm.Client
	namespaces []string
	// One source of randomness per goroutine: run's, and the deployables'.
	rng, deployRng *rand.Rand

	mu          sync.Mutex
	runnables   []*submission
	deployables []*deployable
	calls       int
	userErrors  []string // answers that are neither 2xx nor retryable, and calls given up
	acks        []ack    // every accepted write, in the order answered
	inFlight    sync.WaitGroup
}

// ack is one write the API accepted: when it was sent and answered, and
// by which replica.
type ack struct {
	sent, at time.Time
	replica  int
}

// submission is one runnable the workload submitted.
type submission struct {
	Namespace, Name string
	Long            bool   // runs 20-40 s rather than a few seconds
	Consistency     string // spec.failover.consistency, "" for the default
	// Accepted: the API answered 2xx. Unsure: no final answer came (the
	// retries ran out), so it may or may not be stored.
	Accepted, Unsure bool
}

// deployable is one ConfigMap deployable and what the API accepted of it.
type deployable struct {
	Namespace, Name string
	gen             int
	// Want is the data of the last change the API accepted; nil when the
	// last accepted change deleted it.
	Want map[string]string
	// Unsure holds changes sent after Want whose answer never came: the
	// source of truth may hold any of them (nil: a delete).
	Unsure []map[string]string
	Puts   int
	// Deletes counts the accepted deletes.
	Deletes int
}

const (
	deployablesPerNamespace = 4
	// inFlightLimit bounds the submissions waiting for an answer, as a
	// client with a connection pool would.
	inFlightLimit = 32
)

func newWorkload(api *farm.Client, seed int64, namespaces []string) *workload {
	w := &workload{api: api, namespaces: namespaces,
		rng: rand.New(rand.NewPCG(uint64(seed), 1)), deployRng: rand.New(rand.NewPCG(uint64(seed), 2))}
	for _, ns := range namespaces {
		for i := range deployablesPerNamespace {
			w.deployables = append(w.deployables, &deployable{Namespace: ns, Name: "soak-config-" + strconv.Itoa(i+1)})
		}
	}
	return w
}

// run submits rate runnables per second and changes a deployable every
// half second until ctx is done, then waits for the calls in flight.
func (w *workload) run(ctx context.Context, rate float64) {
	var wg sync.WaitGroup
	wg.Go(func() { w.changeDeployables(ctx) })
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	sem := make(chan struct{}, inFlightLimit)
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			w.inFlight.Wait()
			wg.Wait()
			return
		case <-tick.C:
		}
		s := w.nextSubmission(n)
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			continue
		}
		// Counted as submitted once it is sure to be sent.
		w.mu.Lock()
		w.runnables = append(w.runnables, s)
		w.mu.Unlock()
		w.inFlight.Go(func() {
			defer func() { <-sem }()
			// Not ctx: a call in flight when the load stops still gets
			// its answer, so that it is known whether it was accepted.
			w.submit(context.WithoutCancel(ctx), s)
		})
	}
}

func (w *workload) nextSubmission(n int) *submission {
	s := &submission{Namespace: w.namespaces[n%len(w.namespaces)], Name: fmt.Sprintf("soak-job-%05d", n)}
	s.Long = w.rng.IntN(5) == 0
	if w.rng.IntN(3) == 0 {
		s.Consistency = v1alpha1.ConsistencyAtLeastOne
	}
	return s
}

func (w *workload) submit(ctx context.Context, s *submission) {
	sent := time.Now()
	r := w.api.Call(ctx, http.MethodPost, "/api/v1/runnables", nil, runnableBody(s), nil)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls++
	switch {
	case r.OK():
		s.Accepted = true
		w.acks = append(w.acks, ack{sent: sent, at: time.Now(), replica: r.Replica})
	case errors.Is(r.Err, farm.ErrGaveUp) || farm.Retryable(r.Code):
		s.Unsure = true
		w.userError("submit %s/%s: %v", s.Namespace, s.Name, r.Err)
	default:
		w.userError("submit %s/%s: %d %v", s.Namespace, s.Name, r.Code, r.Err)
	}
}

// runnableBody is a Job of one pod. kwok completes a pod a few seconds
// after it starts, or, for a long one, 20 to 40 seconds after: long enough
// to be running when a fault hits its cluster.
func runnableBody(s *submission) map[string]any {
	pod := map[string]any{
		"spec": map[string]any{
			"restartPolicy": "Never",
			"containers":    []any{map[string]any{"name": "main", "image": "busybox"}},
		},
	}
	if s.Long {
		pod["metadata"] = map[string]any{"annotations": map[string]any{
			"pod-complete.stage.kwok.x-k8s.io/delay":        "20s",
			"pod-complete.stage.kwok.x-k8s.io/jitter-delay": "40s",
		}}
	}
	spec := map[string]any{
		"template": map[string]any{
			"apiVersion": "batch/v1", "kind": "Job",
			"spec": map[string]any{"backoffLimit": 2, "template": pod},
		},
	}
	if s.Consistency != "" {
		spec["failover"] = map[string]any{"consistency": s.Consistency}
	}
	return map[string]any{
		"apiVersion": v1alpha1.GroupVersion, "kind": v1alpha1.KindRunnable,
		"metadata": map[string]any{"namespace": s.Namespace, "name": s.Name},
		"spec":     spec,
	}
}

// changeDeployables changes one deployable every half second, in turn:
// new data, or one time in twenty a delete (the next turn creates it
// again). One goroutine, so that the order of the changes is known.
func (w *workload) changeDeployables(ctx context.Context) {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		d := w.deployables[i%len(w.deployables)]
		if d.Want != nil && w.deployRng.IntN(20) == 0 {
			w.deleteDeployable(context.WithoutCancel(ctx), d)
		} else {
			w.putDeployable(context.WithoutCancel(ctx), d)
		}
	}
}

func (w *workload) putDeployable(ctx context.Context, d *deployable) {
	d.gen++
	data := map[string]string{"generation": strconv.Itoa(d.gen), "value": strconv.FormatUint(w.deployRng.Uint64(), 36)}
	body := map[string]any{
		"apiVersion": v1alpha1.GroupVersion, "kind": v1alpha1.KindDeployable,
		"metadata": map[string]any{"namespace": d.Namespace, "name": d.Name},
		"spec": map[string]any{"template": map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": d.Name},
			"data":     data,
		}},
	}
	sent := time.Now()
	r := w.api.Call(ctx, http.MethodPut, "/api/v1/deployables/"+d.Namespace+"/"+d.Name, nil, body, nil)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls++
	d.Puts++
	switch {
	case r.OK():
		d.Want, d.Unsure = data, nil
		w.acks = append(w.acks, ack{sent: sent, at: time.Now(), replica: r.Replica})
	case errors.Is(r.Err, farm.ErrGaveUp) || farm.Retryable(r.Code):
		d.Unsure = append(d.Unsure, data)
		w.userError("put deployable %s/%s: %v", d.Namespace, d.Name, r.Err)
	default:
		w.userError("put deployable %s/%s: %d %v", d.Namespace, d.Name, r.Code, r.Err)
	}
}

func (w *workload) deleteDeployable(ctx context.Context, d *deployable) {
	r := w.api.Call(ctx, http.MethodDelete, "/api/v1/deployables/"+d.Namespace+"/"+d.Name, nil, nil, nil)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls++
	switch {
	case r.OK(), r.Code == http.StatusNotFound && r.Attempts > 1:
		// A 404 after a lost answer is the first attempt's delete.
		d.Want, d.Unsure = nil, nil
		d.Deletes++
	case errors.Is(r.Err, farm.ErrGaveUp) || farm.Retryable(r.Code):
		d.Unsure = append(d.Unsure, nil)
		w.userError("delete deployable %s/%s: %v", d.Namespace, d.Name, r.Err)
	default:
		w.userError("delete deployable %s/%s: %d %v", d.Namespace, d.Name, r.Code, r.Err)
	}
}

// userError records what a user would have seen fail; w.mu is held.
func (w *workload) userError(format string, args ...any) {
	w.userErrors = append(w.userErrors, time.Now().Format("15:04:05.000")+" "+fmt.Sprintf(format, args...))
}
