package submitter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/attempt"
	"github.com/purser-io/purser/internal/domain/lifecycle"
	"github.com/purser-io/purser/internal/domain/placement"
	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/seal/sealtest"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/member/clusters/clusterstest"
)

// TestKeptSumsMatchTheStore drives a random mix of what moves work
// (creations, placements by two submitter replicas, creates, starts,
// status changes, ends, evictions, failovers, reruns, cancels, quota
// edits, new reports) against the real store, and after each step checks
// that the sums each replica keeps equal a fresh count from the store
// (the queries placement read before it kept them), and that no
// placement went beyond its cluster's room or its quota, even one made by
// a replica whose sums were behind the other's placements. The seed is
// logged; PURSER_SUMS_SEED replays it, PURSER_SUMS_STEPS sets the length.
func TestKeptSumsMatchTheStore(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("PURSER_SUMS_SEED"), 10, 64); err == nil {
		seed = v
	}
	steps := 1000
	if v, err := strconv.Atoi(os.Getenv("PURSER_SUMS_STEPS")); err == nil && v > 0 {
		steps = v
	}
	for _, e := range storetest.Engines() {
		t.Run(e.Name, func(t *testing.T) {
			t.Logf("seed %d (replay: PURSER_SUMS_SEED=%d)", seed, seed)
			m := newSumsModel(t, e.NewDSN(t), seed)
			for i := range steps {
				m.step(i)
				if t.Failed() {
					t.Fatalf("stopped at step %d; replay: PURSER_SUMS_SEED=%d", i, seed)
				}
			}
			t.Logf("%d steps: %v", steps, m.counts)
		})
	}
}

type sumsModel struct {
	t        *testing.T
	ctx      context.Context
	st       *store.Store
	rnd      *rand.Rand
	replicas []*Submitter
	// behind marks a replica whose sums have not caught up since the
	// store last changed by another's hand.
	behind   []bool
	clusters []string
	labels   map[string]map[string]string
	n        int
	counts   map[string]int
}

var modelNamespaces = []string{"ns-quota", "ns-label", "ns-free"}

func newSumsModel(t *testing.T, dsn string, seed uint64) *sumsModel {
	ctx := t.Context()
	st, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	sealer, _ := sealtest.New(t)
	m := &sumsModel{t: t, ctx: ctx, st: st, rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		labels: map[string]map[string]string{}, counts: map[string]int{}}
	for i, zone := range []string{"a", "a", "b", ""} {
		name := fmt.Sprintf("c%d", i)
		var labels map[string]string
		if zone != "" {
			labels = map[string]string{"zone": zone}
		}
		clusterstest.Register(t, st, sealer, store.Cluster{Name: name, Labels: labels}, []byte("kubeconfig"))
		m.clusters = append(m.clusters, name)
		m.labels[name] = labels
		m.report(name)
	}
	for range 2 {
		// The rescan and the followers do not run: the model calls what
		// they would, one step at a time.
		// A margin this short makes a running runnable count in flight
		// only when it changed after its cluster's last report, so that
		// the order of reports and changes matters within a short run.
		s := New(Config{Store: st, Sealer: sealer, InFlightMargin: time.Millisecond})
		s.placeOnly = true
		m.replicas = append(m.replicas, s)
		m.behind = append(m.behind, false)
	}
	m.editQuota("ns-quota")
	m.editQuota("ns-label")
	return m
}

// step makes one random move and checks the sums.
func (m *sumsModel) step(i int) {
	m.t.Helper()
	kinds := []struct {
		name   string
		weight int
		do     func() bool // false: nothing to do it on
	}{
		{"create", 12, m.create},
		{"place", 20, m.place},
		{"submit", 6, func() bool { return m.move(anyOf(v1alpha1.PhaseScheduled), m.submit) }},
		{"start", 10, func() bool { return m.move(anyOf(v1alpha1.PhaseScheduled, v1alpha1.PhaseSubmitted), m.start) }},
		{"observe", 5, func() bool { return m.move(anyOf(v1alpha1.PhaseRunning), m.observe) }},
		{"end", 10, func() bool {
			return m.move(anyOf(v1alpha1.PhaseScheduled, v1alpha1.PhaseSubmitted, v1alpha1.PhaseRunning), m.end)
		}},
		{"evict", 5, func() bool { return m.move(anyOf(v1alpha1.PhaseSubmitted, v1alpha1.PhaseRunning), m.evict) }},
		{"failover", 3, func() bool { return m.move(anyOf(v1alpha1.PhaseSubmitted, v1alpha1.PhaseRunning), m.failingOver) }},
		{"failed-over", 3, func() bool { return m.move(anyOf(v1alpha1.PhaseFailingOver), m.failedOver) }},
		{"rerun", 4, func() bool { return m.move(anyOf(v1alpha1.PhaseSucceeded, v1alpha1.PhaseFailed), m.rerun) }},
		{"cancel", 3, func() bool {
			return m.move(anyOf(v1alpha1.PhaseQueued, v1alpha1.PhaseScheduled, v1alpha1.PhaseRunning), m.cancel)
		}},
		{"quota", 3, func() bool { m.editQuota(modelNamespaces[m.rnd.IntN(2)]); return true }},
		{"report", 4, func() bool { m.report(m.clusters[m.rnd.IntN(len(m.clusters))]); return true }},
		{"recount", 2, m.recount},
	}
	total := 0
	for _, k := range kinds {
		total += k.weight
	}
	pick := m.rnd.IntN(total)
	for _, k := range kinds {
		if pick -= k.weight; pick >= 0 {
			continue
		}
		if k.name != "place" {
			for r := range m.behind {
				m.behind[r] = true
			}
		}
		if k.do() {
			m.counts[k.name]++
		}
		break
	}
	// Each replica catches up, as its follower does once a second, but
	// not always: a replica behind places too, and its re-check must
	// hold it within the room and the quota.
	for r, s := range m.replicas {
		if m.behind[r] && m.rnd.IntN(4) == 0 {
			continue
		}
		if _, err := s.catchUp(m.ctx); err != nil {
			m.t.Fatal(err)
		}
		m.behind[r] = false
		m.check(fmt.Sprintf("step %d, replica %d after catching up", i, r), s)
	}
}

func anyOf(p ...v1alpha1.Phase) []v1alpha1.Phase { return p }

// create writes a new Queued runnable asking for 1 to 3 cpu.
func (m *sumsModel) create() bool {
	m.n++
	ns := modelNamespaces[m.rnd.IntN(len(modelNamespaces))]
	rec := sizedModelRunnable(ns, fmt.Sprintf("r-%04d", m.n), strconv.Itoa(1+m.rnd.IntN(3)))
	m.tx(func(tx *store.Tx) error {
		_, err := lifecycle.Create(m.ctx, tx, rec, lifecycle.Transition{To: v1alpha1.PhaseQueued, By: lifecycle.ByAPI,
			Message: "waiting for a cluster", Audit: &audit.Entry{Action: "create", Summary: "created"}})
		return err
	})
	return true
}

func sizedModelRunnable(ns, name, cpu string) *store.Runnable {
	container := map[string]any{"name": "main", "image": "busybox",
		"resources": map[string]any{"requests": map[string]any{"cpu": cpu}}}
	tmpl := map[string]any{"apiVersion": "batch/v1", "kind": "Job", "spec": map[string]any{
		"template": map[string]any{"spec": map[string]any{"restartPolicy": "Never", "containers": []any{container}}}}}
	doc, _ := json.Marshal(store.Document[v1alpha1.RunnableSpec]{Spec: v1alpha1.RunnableSpec{Template: tmpl}})
	return &store.Runnable{Namespace: ns, Name: name, UID: "uid-" + name, Generation: 1, Spec: doc, SpecHash: "h", Submitter: "model"}
}

// place has a random replica place a random Queued runnable through its
// own step (the placing lock, the decision, the re-check, the write), and
// checks the replica's sums at once (its own commit, before any catching
// up) and the room and quota the placement took.
func (m *sumsModel) place() bool {
	uid := m.pickIn(anyOf(v1alpha1.PhaseQueued))
	if uid == "" {
		return false
	}
	r := m.rnd.IntN(len(m.replicas))
	s := m.replicas[r]
	wasBehind := m.behind[r]
	before := s.divergences("recheck")
	if v := s.reconcileOnce(m.ctx, uid); v.err != nil {
		m.t.Fatalf("place %s by replica %d: %v", uid, r, v.err)
	}
	if s.divergences("recheck") > before {
		m.counts["re-check caught a replica behind"]++
	}
	for o := range m.behind {
		if o != r {
			m.behind[o] = true
		}
	}
	if !wasBehind {
		m.check(fmt.Sprintf("replica %d right after placing %s", r, uid), s)
	}
	m.checkLimits(uid)
	return true
}

// reconcileOnce is the queue's call for uid, without the queue.
func (s *Submitter) reconcileOnce(ctx context.Context, uid string) verdict {
	for range maxSteps {
		v := s.step(ctx, uid)
		if v.err != nil || !v.next {
			return v
		}
	}
	return verdict{}
}

// checkLimits: the runnable just placed (if it was) left its cluster
// with nothing taken beyond what its report has free, and its namespace
// within its quota, by a fresh count.
func (m *sumsModel) checkLimits(uid string) {
	m.t.Helper()
	var rec *store.Runnable
	var reports map[string]store.CapacityReport
	var placed []store.Placed
	var q *store.Quota
	var byCluster map[string][][]byte
	m.read(func(tx *store.Tx) error {
		var err error
		if rec, err = tx.Runnables().GetByUID(m.ctx, uid); err != nil {
			return err
		}
		if rec.Phase != string(v1alpha1.PhaseScheduled) {
			return nil
		}
		if reports, err = tx.Agents().Capacities(m.ctx); err != nil {
			return err
		}
		if placed, err = tx.Runnables().PlacedOn(m.ctx, rec.Cluster, reports[rec.Cluster].At.Add(-m.replicas[0].cfg.InFlightMargin)); err != nil {
			return err
		}
		if q, err = tx.Quotas().Get(m.ctx, rec.Namespace); errors.Is(err, store.ErrNotFound) {
			return nil
		} else if err != nil {
			return err
		}
		byCluster, err = tx.Runnables().ActiveStatusesByCluster(m.ctx, rec.Namespace)
		return err
	})
	if rec.Phase != string(v1alpha1.PhaseScheduled) {
		return
	}
	m.counts["placed"]++
	fig := m.replicas[0].decodedReports(reports)[rec.Cluster]
	free := fig.Free[corev1.ResourceCPU]
	if fig.Runnables != nil {
		// Counted once: every active runnable there, against the free
		// figure with purser's pods given back.
		free = fig.freeOfPurser()[corev1.ResourceCPU]
		m.read(func(tx *store.Tx) error {
			var err error
			placed, err = tx.Runnables().PlacedOn(m.ctx, rec.Cluster, time.Time{})
			return err
		})
	}
	var statuses [][]byte
	for _, p := range placed {
		statuses = append(statuses, p.Status)
	}
	if inFlight := placement.StoredUsage(statuses)[corev1.ResourceCPU]; inFlight.Cmp(free) > 0 {
		m.t.Errorf("%s placed on %s: cpu %s in flight there, more than the %s its report has free", uid, rec.Cluster, inFlight.String(), free.String())
	}
	if q == nil {
		return
	}
	var spec v1alpha1.QuotaSpec
	_ = json.Unmarshal(q.Spec, &spec)
	usage := storedUsage(byCluster)
	total := corev1.ResourceList{}
	for _, u := range usage {
		placement.AddTo(total, u)
	}
	for name, limit := range spec.Limits {
		l := resource.MustParse(limit)
		if u := total[corev1.ResourceName(name)]; u.Cmp(l) > 0 {
			m.t.Errorf("%s placed in %s: %s %s used, over its quota's %s", uid, rec.Namespace, name, u.String(), l.String())
		}
	}
	if spec.PerLabel != nil {
		if v, ok := m.labels[rec.Cluster][spec.PerLabel.Label]; ok {
			used := corev1.ResourceList{}
			for cl, u := range usage {
				if m.labels[cl][spec.PerLabel.Label] == v {
					placement.AddTo(used, u)
				}
			}
			for name, limit := range spec.PerLabel.Limits {
				l := resource.MustParse(limit)
				if u := used[corev1.ResourceName(name)]; u.Cmp(l) > 0 {
					m.t.Errorf("%s placed in %s on %s=%s: %s %s used, over its quota's %s", uid, rec.Namespace, spec.PerLabel.Label, v, name, u.String(), l.String())
				}
			}
		}
	}
}

// move applies fn to a random runnable in one of phases.
func (m *sumsModel) move(phases []v1alpha1.Phase, fn func(r *lifecycle.Runnable, open *store.Attempt) lifecycle.Transition) bool {
	uid := m.pickIn(phases)
	if uid == "" {
		return false
	}
	m.tx(func(tx *store.Tx) error {
		r, err := lifecycle.Load(m.ctx, tx, uid)
		if err != nil {
			return err
		}
		as, err := tx.Attempts().List(m.ctx, uid)
		if err != nil {
			return err
		}
		_, err = lifecycle.Apply(m.ctx, tx, r, fn(r, openAttempt(as)))
		return err
	})
	return true
}

func (m *sumsModel) submit(_ *lifecycle.Runnable, a *store.Attempt) lifecycle.Transition {
	done := *a
	done.ObjectUID = "obj-" + a.RunnableUID
	return lifecycle.Transition{To: v1alpha1.PhaseSubmitted, By: lifecycle.BySubmitter, Attempt: &done,
		Audit: &audit.Entry{Action: "submit", Summary: "created"}}
}

func (m *sumsModel) start(*lifecycle.Runnable, *store.Attempt) lifecycle.Transition {
	return lifecycle.Transition{To: v1alpha1.PhaseRunning, By: lifecycle.ByIngester, Message: "running"}
}

// observe is a change of a running runnable's observed status: it counts
// in flight again until a later report.
func (m *sumsModel) observe(*lifecycle.Runnable, *store.Attempt) lifecycle.Transition {
	return lifecycle.Transition{To: v1alpha1.PhaseRunning, By: lifecycle.ByIngester, Message: fmt.Sprintf("observed %d", m.rnd.IntN(1000))}
}

func (m *sumsModel) end(_ *lifecycle.Runnable, a *store.Attempt) lifecycle.Transition {
	to, result := v1alpha1.PhaseSucceeded, "Succeeded"
	if m.rnd.IntN(2) == 0 {
		to, result = v1alpha1.PhaseFailed, "Failed"
	}
	now := time.Now()
	done := *a
	done.EndedAt, done.Result, done.Reason = &now, result, result
	return lifecycle.Transition{To: to, By: lifecycle.ByIngester, Attempt: &done, Audit: &audit.Entry{Action: "end", Summary: result}}
}

func (m *sumsModel) evict(_ *lifecycle.Runnable, a *store.Attempt) lifecycle.Transition {
	now := time.Now()
	done := *a
	done.EndedAt, done.Result, done.Reason = &now, attempt.ResultEvicted, "ClusterLost"
	cluster := ""
	return lifecycle.Transition{To: v1alpha1.PhaseQueued, By: lifecycle.ByController, Cluster: &cluster, Attempt: &done,
		Audit: &audit.Entry{Action: "evict", Summary: "evicted"}}
}

func (m *sumsModel) failingOver(_ *lifecycle.Runnable, a *store.Attempt) lifecycle.Transition {
	now := time.Now()
	done := *a
	done.EndedAt, done.Result, done.Reason = &now, attempt.ResultEvicted, "Unhealthy"
	return lifecycle.Transition{To: v1alpha1.PhaseFailingOver, By: lifecycle.ByController, Attempt: &done,
		Audit: &audit.Entry{Action: "evict", Summary: "evicted"}}
}

func (m *sumsModel) failedOver(*lifecycle.Runnable, *store.Attempt) lifecycle.Transition {
	cluster := ""
	return lifecycle.Transition{To: v1alpha1.PhaseQueued, By: lifecycle.ByController, Cluster: &cluster,
		Audit: &audit.Entry{Action: "requeue", Summary: "old copy gone"}}
}

func (m *sumsModel) rerun(*lifecycle.Runnable, *store.Attempt) lifecycle.Transition {
	cluster := ""
	return lifecycle.Transition{To: v1alpha1.PhaseQueued, By: lifecycle.ByAPI, Cluster: &cluster,
		Audit: &audit.Entry{Action: "rerun", Summary: "rerun"}}
}

func (m *sumsModel) cancel(_ *lifecycle.Runnable, a *store.Attempt) lifecycle.Transition {
	t := lifecycle.Transition{To: v1alpha1.PhaseCancelled, By: lifecycle.ByAPI, Audit: &audit.Entry{Action: "cancel", Summary: "cancelled"}}
	if a != nil {
		now := time.Now()
		done := *a
		done.EndedAt, done.Result, done.Reason = &now, ResultCancelled, "Cancelled"
		t.Attempt = &done
	}
	return t
}

// editQuota gives ns new random limits: a total for ns-quota, a total
// and a per-zone one for ns-label.
func (m *sumsModel) editQuota(ns string) {
	spec := v1alpha1.QuotaSpec{Limits: map[string]string{
		"cpu": strconv.Itoa(4 + m.rnd.IntN(12)), "runnables": strconv.Itoa(3 + m.rnd.IntN(8))}}
	if ns == "ns-label" {
		spec.PerLabel = &v1alpha1.QuotaPerLabel{Label: "zone", Limits: map[string]string{"cpu": strconv.Itoa(2 + m.rnd.IntN(6))}}
	}
	body, _ := json.Marshal(spec)
	m.tx(func(tx *store.Tx) error {
		q, err := tx.Quotas().Get(m.ctx, ns)
		if errors.Is(err, store.ErrNotFound) {
			q, err = &store.Quota{Namespace: ns}, nil
		}
		if err != nil {
			return err
		}
		q.Spec = body
		return tx.Quotas().Put(m.ctx, q)
	})
}

// report writes a new capacity report of cluster: 8 cpu, some of it in
// use by work purser does not know.
func (m *sumsModel) report(cluster string) {
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("64Gi")}
	free := alloc.DeepCopy()
	free[corev1.ResourceCPU] = *resource.NewQuantity(int64(2+m.rnd.IntN(7)), resource.DecimalSI)
	report := map[string]any{"allocatable": alloc, "free": free, "nodeMax": free}
	if m.rnd.IntN(2) == 0 {
		// An agent that says what it counted of purser's pods.
		report["runnables"] = map[string]any{"requests": corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(int64(m.rnd.IntN(3)), resource.DecimalSI)}, "pods": 1}
	}
	body, _ := json.Marshal(report)
	m.tx(func(tx *store.Tx) error { return tx.Agents().RecordCapacity(m.ctx, cluster, time.Now(), body) })
}

// recount runs a replica's periodic recount, which must find nothing to
// correct when that replica has caught up.
func (m *sumsModel) recount() bool {
	r := m.rnd.IntN(len(m.replicas))
	s := m.replicas[r]
	if _, err := s.catchUp(m.ctx); err != nil {
		m.t.Fatal(err)
	}
	before := s.divergences("recount")
	if err := s.recount(m.ctx); err != nil {
		m.t.Fatal(err)
	}
	if d := s.divergences("recount"); d != before {
		m.t.Errorf("replica %d, caught up: its recount found the kept sums different", r)
	}
	return true
}

func (m *sumsModel) pickIn(phases []v1alpha1.Phase) string {
	var uids []string
	m.read(func(tx *store.Tx) error {
		uids = nil
		for _, p := range phases {
			page, _, err := tx.Runnables().List(m.ctx, store.RunnableFilter{Phase: string(p), Limit: 1000})
			if err != nil {
				return err
			}
			for _, r := range page {
				uids = append(uids, r.UID)
			}
		}
		return nil
	})
	if len(uids) == 0 {
		return ""
	}
	slices.Sort(uids) // the seed, not the database's order, picks
	return uids[m.rnd.IntN(len(uids))]
}

func (m *sumsModel) tx(fn func(tx *store.Tx) error) {
	m.t.Helper()
	if err := m.st.Tx(m.ctx, fn); err != nil {
		m.t.Fatal(err)
	}
}

func (m *sumsModel) read(fn func(tx *store.Tx) error) {
	m.t.Helper()
	if err := m.st.Read(m.ctx, fn); err != nil {
		m.t.Fatal(err)
	}
}

// check compares s's kept sums with a fresh count from the store, by the
// queries placement read before it kept them: the runnables per cluster,
// each namespace's usage per cluster, and per reporting cluster what is
// in flight there.
func (m *sumsModel) check(when string, s *Submitter) {
	m.t.Helper()
	var active map[string]int
	usage := map[string]map[string]corev1.ResourceList{}
	var reports map[string]store.CapacityReport
	var placed []store.Placed
	m.read(func(tx *store.Tx) error {
		var err error
		if active, err = tx.Runnables().CountByCluster(m.ctx, activePhases...); err != nil {
			return err
		}
		for _, ns := range modelNamespaces {
			by, err := tx.Runnables().ActiveStatusesByCluster(m.ctx, ns)
			if err != nil {
				return err
			}
			usage[ns] = storedUsage(by)
		}
		if reports, err = tx.Agents().Capacities(m.ctx); err != nil {
			return err
		}
		placed, err = tx.Runnables().ListPlaced(m.ctx, time.Time{})
		return err
	})
	if kept := s.activeCounts(); !mapsEqualInt(kept, active) {
		m.t.Errorf("%s: runnables per cluster kept %v, counted %v", when, kept, active)
	}
	for _, ns := range modelNamespaces {
		kept := s.usageByCluster(ns)
		for _, c := range keysOf(kept, usage[ns]) {
			if d := diffList(kept[c], usage[ns][c]); d != "" {
				m.t.Errorf("%s: usage of %s on %q: %s", when, ns, c, d)
			}
		}
	}
	figs := s.decodedReports(reports)
	for _, c := range m.clusters {
		fig := figs[c]
		counted := corev1.ResourceList{}
		n := 0
		for _, p := range placed {
			if p.Cluster != c {
				continue
			}
			if fig.Runnables == nil && p.Phase == string(v1alpha1.PhaseRunning) && !p.UpdatedAt.After(fig.At.Add(-s.cfg.InFlightMargin)) {
				continue
			}
			var st v1alpha1.RunnableStatus
			if len(p.Status) == 0 || json.Unmarshal(p.Status, &st) != nil {
				continue
			}
			if req, err := placement.ParseList(st.Requests); err == nil {
				placement.AddTo(counted, req)
				n++
			}
		}
		s.sums.mu.Lock()
		kept := s.sums.st.free(c, fig, s.cfg.InFlightMargin, false)
		s.sums.mu.Unlock()
		if kept.InFlightCount != n {
			m.t.Errorf("%s: cluster %s: %d in flight kept, %d counted", when, c, kept.InFlightCount, n)
		}
		if d := diffList(kept.InFlight, counted); d != "" {
			m.t.Errorf("%s: cluster %s: in flight %s", when, c, d)
		}
	}
}

func mapsEqualInt(a, b map[string]int) bool {
	for _, k := range keysOf(a, b) {
		if a[k] != b[k] {
			return false
		}
	}
	return true
}

// divergences is the count of differences found by found.
func (s *Submitter) divergences(found string) float64 {
	var mm dto.Metric
	_ = s.metrics.sumsDivergence.WithLabelValues(found).Write(&mm)
	return mm.GetCounter().GetValue()
}

// TestRecheckHoldsAReplicaBehind: a replica whose sums have not yet seen
// another's placement chooses by them, and the placement's transaction,
// checking the chosen cluster and the quota against the store, refuses
// what would pass the room or the quota; the runnable waits, and the
// refusal is counted.
func TestRecheckHoldsAReplicaBehind(t *testing.T) {
	for _, e := range storetest.Engines() {
		for _, tc := range []struct{ what, ns, cpu string }{
			{"room", "ns-free", "3"},   // room for one of 3 cpu
			{"quota", "ns-quota", "1"}, // a quota of one runnable
		} {
			t.Run(e.Name+"/"+tc.what, func(t *testing.T) {
				m := newSumsModel(t, e.NewDSN(t), 1)
				a, b := m.replicas[0], m.replicas[1]
				alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}
				for i, c := range m.clusters {
					free := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0")}
					if i == 0 {
						free[corev1.ResourceCPU] = resource.MustParse("4")
					}
					body, _ := json.Marshal(map[string]any{"allocatable": alloc, "free": free, "nodeMax": free})
					m.tx(func(tx *store.Tx) error { return tx.Agents().RecordCapacity(m.ctx, c, time.Now(), body) })
				}
				q, _ := json.Marshal(v1alpha1.QuotaSpec{Limits: map[string]string{"runnables": "1"}})
				m.tx(func(tx *store.Tx) error {
					cur, err := tx.Quotas().Get(m.ctx, "ns-quota")
					if err != nil {
						return err
					}
					cur.Spec = q
					return tx.Quotas().Put(m.ctx, cur)
				})
				create := func(name string) string {
					rec := sizedModelRunnable(tc.ns, name, tc.cpu)
					m.tx(func(tx *store.Tx) error {
						_, err := lifecycle.Create(m.ctx, tx, rec, lifecycle.Transition{To: v1alpha1.PhaseQueued, By: lifecycle.ByAPI,
							Audit: &audit.Entry{Action: "create", Summary: "created"}})
						return err
					})
					return rec.UID
				}
				phaseOf := func(uid string) (string, string) {
					var rec *store.Runnable
					m.read(func(tx *store.Tx) error {
						var err error
						rec, err = tx.Runnables().GetByUID(m.ctx, uid)
						return err
					})
					return rec.Phase, rec.Cluster
				}
				first, second := create("first"), create("second")
				for _, s := range m.replicas {
					if _, err := s.catchUp(m.ctx); err != nil {
						t.Fatal(err)
					}
				}
				if v := b.reconcileOnce(m.ctx, first); v.err != nil {
					t.Fatal(v.err)
				}
				if p, c := phaseOf(first); p != string(v1alpha1.PhaseScheduled) || c != "c0" {
					t.Fatalf("the first runnable is %s on %q, want Scheduled on c0", p, c)
				}
				if v := a.reconcileOnce(m.ctx, second); v.err != nil {
					t.Fatal(v.err)
				}
				if p, c := phaseOf(second); p != string(v1alpha1.PhaseQueued) {
					t.Errorf("a replica behind placed the second runnable on %s past the %s", c, tc.what)
				}
				if got := a.divergences("recheck"); got != 1 {
					t.Errorf("%v divergences found by the re-check, want 1", got)
				}
				m.check("the replica behind, after the refusal", a)
			})
		}
	}
}

// TestShortWorkCountedOnce: a report that says what it counted of
// purser's pods gives that back and counts every active runnable on the
// cluster instead, so that one running now (its pods in the report, and
// changed since the report by the time rule) is counted once: a cluster
// of 8 cpu with 3 free, the 5 used being a running runnable's, takes
// another of 5. By time alone it would count 3 in flight and in the
// report both, and take nothing over 0 cpu; a report that does not say
// keeps that rule.
func TestShortWorkCountedOnce(t *testing.T) {
	m := newSumsModel(t, storetest.Engines()[0].NewDSN(t), 1)
	s := m.replicas[0]
	s.cfg.InFlightMargin = time.Minute // running work counts in flight by time
	record := func(runnables string) {
		for _, c := range m.clusters {
			free := "0"
			body := `{"allocatable":{"cpu":"8"},"free":{"cpu":"` + free + `"},"nodeMax":{"cpu":"8"}}`
			if c == "c0" {
				body = `{"allocatable":{"cpu":"8"},"free":{"cpu":"3"},"nodeMax":{"cpu":"8"}` + runnables + `}`
			}
			m.tx(func(tx *store.Tx) error { return tx.Agents().RecordCapacity(m.ctx, c, time.Now(), []byte(body)) })
		}
	}
	create := func(name, cpu string) string {
		rec := sizedModelRunnable("ns-free", name, cpu)
		m.tx(func(tx *store.Tx) error {
			_, err := lifecycle.Create(m.ctx, tx, rec, lifecycle.Transition{To: v1alpha1.PhaseQueued, By: lifecycle.ByAPI,
				Audit: &audit.Entry{Action: "create", Summary: "created"}})
			return err
		})
		return rec.UID
	}
	phaseOf := func(uid string) string {
		var rec *store.Runnable
		m.read(func(tx *store.Tx) error {
			var err error
			rec, err = tx.Runnables().GetByUID(m.ctx, uid)
			return err
		})
		return rec.Phase
	}
	// One running: 5 cpu on c0, placed while c0 was empty (and the
	// other clusters full).
	record("")
	m.tx(func(tx *store.Tx) error {
		return tx.Agents().RecordCapacity(m.ctx, "c0", time.Now(), []byte(`{"allocatable":{"cpu":"8"},"free":{"cpu":"8"},"nodeMax":{"cpu":"8"}}`))
	})
	first := create("running", "5")
	if v := s.reconcileOnce(m.ctx, first); v.err != nil || phaseOf(first) != string(v1alpha1.PhaseScheduled) {
		t.Fatalf("the first runnable is %s (%v), want Scheduled", phaseOf(first), v.err)
	}
	m.move(anyOf(v1alpha1.PhaseScheduled), m.start)

	// Its pods are in c0's report, which does not say so: by time it
	// counts in flight too, and there is no room for 3.
	record("")
	second := create("second", "3")
	if _, err := s.catchUp(m.ctx); err != nil {
		t.Fatal(err)
	}
	if v := s.reconcileOnce(m.ctx, second); v.err != nil || phaseOf(second) != string(v1alpha1.PhaseQueued) {
		t.Fatalf("a report that does not say what it counted: the second is %s (%v), want Queued (5 cpu counted twice)", phaseOf(second), v.err)
	}
	m.check("a report that does not say", s)

	// The same report, saying it counted 5 cpu of purser's pods: the
	// running one counts once, and 3 fit.
	record(`,"runnables":{"requests":{"cpu":"5"},"pods":1}`)
	if v := s.reconcileOnce(m.ctx, second); v.err != nil {
		t.Fatal(v.err)
	}
	if p := phaseOf(second); p != string(v1alpha1.PhaseScheduled) {
		t.Errorf("a report that says it counted the running runnable: the second is %s, want Scheduled (the running one counted once)", p)
	}
	m.check("a report that says", s)
	// And nothing more: both now count, 8 of 8.
	third := create("third", "1")
	if v := s.reconcileOnce(m.ctx, third); v.err != nil || phaseOf(third) != string(v1alpha1.PhaseQueued) {
		t.Errorf("a full cluster took a third runnable: %s (%v)", phaseOf(third), v.err)
	}
}
