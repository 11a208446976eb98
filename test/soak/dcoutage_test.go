package soak

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/member/clusters"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
	"github.com/purser-io/purser/test/soak/farm"
)

// soakOutage is how long each control-plane outage lasts; 0 is twice the
// agents' lease (CI). `make soak-outage` runs the 5-minute version.
var soakOutage = flag.Duration("soak.outage", 0, "how long each control-plane outage of TestDCControlPlaneOutages lasts (0: twice the agents' lease)")

// outageLease is the farm's agents' --lease-duration (agentArgs).
const outageLease = 30 * time.Second

// TestDCControlPlaneOutages stops, in turn, the whole stream (every NATS
// node), the database (every Patroni node, with its PostgreSQL) and every
// hub component (api, submitter, syncer, ingester, controller of every
// DC), each for twice the agents' lease, on the three-DC farm with
// AtMostOne Jobs running (kwok pods that run for an hour). Throughout each
// outage and its recovery it samples the member clusters themselves:
// nothing may be marked fenced, suspended, deleted or restarted (the
// Jobs' pods keep their uids and start times). Work accepted before and
// during each outage (where the API can accept) must be placed after.
//
// No member cluster is cut off here, so every agent keeps its lease on
// one path: the hub's renewals of its Lease while the stream is out, the
// stream while the database or the hub components are.
func TestDCControlPlaneOutages(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the three-DC farm")
	}
	hold := 2 * outageLease
	if *soakOutage > 0 {
		hold = *soakOutage
	}
	ctx := t.Context()
	f, cls := startDCFarm(ctx, t, keptDir(t), controllerArgs, agentArgs)
	const ns = "dc-outage"
	kubes := map[string]kubernetes.Interface{}
	for _, c := range cls {
		// The agent's namespace, which its manifests create (the farm's
		// agents run without leader election, so nothing else does): the
		// hub renews its Lease there.
		for _, n := range []string{ns, clusters.HubLeaseNamespace} {
			if err := c.EnsureNamespace(ctx, n); err != nil {
				t.Fatal(err)
			}
		}
		kc, err := c.Client()
		if err != nil {
			t.Fatal(err)
		}
		kubes[c.Name()] = kc
	}
	// Every member sees the hub's Lease renewed before anything stops.
	for _, c := range cls {
		var first string
		sandboxtest.Eventually(t, 2*time.Minute, "the hub renewing its Lease in "+c.Name(), func(ctx context.Context) error {
			l, err := kubes[c.Name()].CoordinationV1().Leases(clusters.HubLeaseNamespace).Get(ctx, clusters.HubLeaseName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if first == "" {
				first = l.ResourceVersion
			}
			if l.ResourceVersion == first {
				return fmt.Errorf("Lease at resourceVersion %s", first)
			}
			return nil
		})
	}

	// Two long AtMostOne Jobs per cluster, wherever placement puts them.
	var accepted []string
	submit := func(ctx context.Context, name string) bool {
		if submitLong(ctx, f.API, ns, name) {
			accepted = append(accepted, ns+"/"+name)
			return true
		}
		return false
	}
	for i := range 2 * len(cls) {
		if name := fmt.Sprintf("long-%d", i); !submit(ctx, name) {
			t.Fatalf("submit %s refused with the farm healthy", name)
		}
	}
	waitPlaced(t, f.API, accepted, 3*time.Minute)

	var rows []string
	for _, o := range []struct {
		kind string
		stop func()
		// apiUp: the API can accept work during the outage.
		apiUp bool
	}{
		{"stream (every NATS node)", func() { eachDC(f, func(dc *farm.DC) { dc.NATS.Stop(10 * time.Second) }) }, true},
		{"database (every Patroni node and its PostgreSQL)", func() { eachDC(f, func(dc *farm.DC) { dc.Patroni.Stop(30 * time.Second) }) }, false},
		{"every hub component (api, submitter, syncer, ingester, controller)", func() {
			eachDC(f, func(dc *farm.DC) {
				for _, p := range dc.Components {
					p.Stop(10 * time.Second)
				}
			})
		}, false},
	} {
		base := baseline(t, kubes, ns)
		before := fmt.Sprintf("before-%d", len(rows))
		if !submit(ctx, before) {
			t.Fatalf("submit %s refused with the farm healthy", before)
		}
		t.Logf("%s stop %s for %s; %d Jobs running", stamp(), o.kind, hold, len(base))
		stopped := time.Now()
		o.stop()
		s := &sampler{kubes: kubes, ns: ns, base: base}
		sctx, stopSampling := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() { s.run(sctx) })

		// Work offered during the outage: accepted where the API can.
		offered, took := 0, 0
		for i := 0; time.Since(stopped) < hold; i++ {
			if i < 3 {
				offered++
				cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
				if submit(cctx, fmt.Sprintf("during-%d-%d", len(rows), i)) {
					took++
				}
				cancel()
			}
			time.Sleep(time.Second)
		}
		restarted := time.Now()
		if err := f.EnsureRunning(ctx); err != nil {
			t.Fatal(err)
		}
		waitPlaced(t, f.API, accepted, 5*time.Minute)
		recovered := time.Since(restarted)
		// Sample a little longer, through the recovery: a late fence
		// would show now.
		time.Sleep(10 * time.Second)
		stopSampling()
		wg.Wait()
		// Nothing ran twice: each accepted runnable's Job is on one
		// cluster, and the baseline's are where they were.
		if dups := duplicated(t, kubes, ns); len(dups) > 0 {
			t.Errorf("%s: Jobs on more than one cluster: %v", o.kind, dups)
		}
		fenced, suspended, deleted, restartedPods, samples := s.counts()
		row := fmt.Sprintf("| %s | %s | fenced %d, suspended %d, deleted %d, restarted %d (%d samples of %d Jobs) | %d of %d accepted during | %s |",
			o.kind, hold, fenced, suspended, deleted, restartedPods, samples, len(base), took, offered, recovered.Round(time.Second))
		t.Logf("%s %s", stamp(), row)
		rows = append(rows, row)
		if fenced+suspended+deleted+restartedPods != 0 {
			t.Errorf("%s: work stopped without need: %s", o.kind, strings.Join(s.firstProblems(), "; "))
		}
		if o.apiUp && took == 0 {
			t.Errorf("%s: the API accepted none of %d runnables offered during the outage", o.kind, offered)
		}
	}
	t.Logf("control-plane outages (lease %s):\n| outage | held | member clusters, sampled | accepted during | placed again after the restart |\n| --- | --- | --- | --- | --- |\n%s",
		outageLease, strings.Join(rows, "\n"))

	cutOff(t, f, kubes, ns)
}

// cutOff partitions a DC that holds neither the controller's leader nor
// the database's primary: its member cluster is truly cut off from the
// hub (neither the stream nor the hub's renewals reach its agent), so its
// agent must fence its AtMostOne Jobs, and each must be suspended there
// before its runnable runs elsewhere (two-live 0).
func cutOff(t *testing.T, f *farm.DCFarm, kubes map[string]kubernetes.Interface, ns string) {
	ctx := t.Context()
	leader := leaderDC(t, f)
	primary, err := f.Primary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var dc *farm.DC
	for _, d := range f.DCs {
		if d != leader && d != primary {
			dc = d
			break
		}
	}
	if dc == nil {
		dc = f.DCs[len(f.DCs)-1]
	}
	cluster := dc.Cluster.Name()
	// Two more AtMostOne Jobs there for certain: the other clusters are
	// cordoned while they are placed.
	for _, d := range f.DCs {
		cordon(t, f.API, d.Cluster, d != dc)
	}
	var placed []string
	for i := range 2 {
		name := fmt.Sprintf("cut-%d", i)
		if !submitLong(ctx, f.API, ns, name) {
			t.Fatalf("submit %s refused with the farm healthy", name)
		}
		placed = append(placed, ns+"/"+name)
	}
	waitPlaced(t, f.API, placed, 3*time.Minute)
	for _, d := range f.DCs {
		cordon(t, f.API, d.Cluster, false)
	}
	base := baseline(t, map[string]kubernetes.Interface{cluster: kubes[cluster]}, ns)
	var majority *farm.DC
	for _, d := range f.DCs {
		if d != dc {
			majority = d
			break
		}
	}
	t.Logf("%s partition %s (cluster %s, %d AtMostOne Jobs)", stamp(), dc.Name, cluster, len(base))
	cut := time.Now()
	f.Partition(dc)
	suspendedAt, movedAt := map[string]time.Duration{}, map[string]time.Duration{}
	sandboxtest.Eventually(t, 5*time.Minute, "every Job of the cut DC fenced and its runnable moved", func(ctx context.Context) error {
		for _, b := range base {
			if _, ok := suspendedAt[b.name]; !ok {
				if j, err := kubes[cluster].BatchV1().Jobs(ns).Get(ctx, b.name, metav1.GetOptions{}); err == nil && jobSuspended(j) {
					suspendedAt[b.name] = time.Since(cut)
				}
			}
			if _, ok := movedAt[b.name]; !ok {
				var r v1alpha1.Runnable
				if code, _ := majority.API.Do(ctx, http.MethodGet, "/api/v1/runnables/"+ns+"/"+b.name, nil, nil, &r); code == http.StatusOK &&
					r.Status.Cluster != "" && r.Status.Cluster != cluster {
					movedAt[b.name] = time.Since(cut)
				}
			}
		}
		if len(suspendedAt) < len(base) || len(movedAt) < len(base) {
			return fmt.Errorf("suspended %v, moved %v of %d", suspendedAt, movedAt, len(base))
		}
		return nil
	})
	f.Heal(dc)
	twoLive := 0
	for name, s := range suspendedAt {
		if movedAt[name] <= s {
			twoLive++
			t.Errorf("%s moved %s after the cut, before its copy on %s was suspended (%s)", name, movedAt[name].Round(time.Second), cluster, s.Round(time.Second))
		}
	}
	t.Logf("%s cut-off of %s: %d Jobs suspended at %v, moved at %v after the cut; two-live %d", stamp(), dc.Name, len(base), suspendedAt, movedAt, twoLive)
	if err := f.EnsureRunning(ctx); err != nil {
		t.Fatal(err)
	}
}

// duplicated lists the Jobs of ns found on more than one cluster.
func duplicated(t *testing.T, kubes map[string]kubernetes.Interface, ns string) []string {
	t.Helper()
	where := map[string][]string{}
	for name, kc := range kubes {
		jobs, err := kc.BatchV1().Jobs(ns).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs.Items {
			where[j.Name] = append(where[j.Name], name)
		}
	}
	var out []string
	for job, cs := range where {
		if len(cs) > 1 {
			out = append(out, fmt.Sprintf("%s on %v", job, cs))
		}
	}
	return out
}

// submitLong submits an AtMostOne Job whose pod runs for an hour, and
// reports whether the API accepted it.
func submitLong(ctx context.Context, api *farm.Client, ns, name string) bool {
	body := runnableBody(&submission{Namespace: ns, Name: name, Consistency: v1alpha1.ConsistencyAtMostOne})
	pod := body["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["template"].(map[string]any)
	pod["metadata"] = map[string]any{"annotations": map[string]any{
		"pod-complete.stage.kwok.x-k8s.io/delay": "1h", "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "1h"}}
	code, _ := api.Do(ctx, http.MethodPost, "/api/v1/runnables", nil, body, nil)
	return code/100 == 2
}

func eachDC(f *farm.DCFarm, do func(*farm.DC)) {
	var wg sync.WaitGroup
	for _, dc := range f.DCs {
		wg.Go(func() { do(dc) })
	}
	wg.Wait()
}

// waitPlaced waits until every runnable of keys (namespace/name) is
// Running on a cluster.
func waitPlaced(t *testing.T, api *farm.Client, keys []string, within time.Duration) {
	t.Helper()
	sandboxtest.Eventually(t, within, fmt.Sprintf("%d runnables running", len(keys)), func(ctx context.Context) error {
		for _, key := range keys {
			var r v1alpha1.Runnable
			if code, err := api.Do(ctx, http.MethodGet, "/api/v1/runnables/"+key, nil, nil, &r); code != http.StatusOK {
				return callError("get "+key, code, err)
			}
			if r.Status.Phase != v1alpha1.PhaseRunning || r.Status.Cluster == "" {
				return fmt.Errorf("%s is %s on %q: %s", key, r.Status.Phase, r.Status.Cluster, r.Status.Message)
			}
		}
		return nil
	})
}

// jobState is one Job as a member cluster holds it, with its pods (uid ->
// start time).
type jobState struct {
	cluster, name, uid string
	pods               map[string]time.Time
}

func baseline(t *testing.T, kubes map[string]kubernetes.Interface, ns string) map[string]jobState {
	t.Helper()
	out := map[string]jobState{}
	for name, kc := range kubes {
		jobs, err := kc.BatchV1().Jobs(ns).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs.Items {
			if j.Labels[v1alpha1.LabelConsistency] != v1alpha1.ConsistencyAtMostOne {
				continue
			}
			pods, err := podsOf(t.Context(), kc, ns, j.Name)
			if err != nil {
				t.Fatal(err)
			}
			out[name+"/"+j.Name] = jobState{cluster: name, name: j.Name, uid: string(j.UID), pods: pods}
		}
	}
	return out
}

func podsOf(ctx context.Context, kc kubernetes.Interface, ns, job string) (map[string]time.Time, error) {
	pods, err := kc.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + job})
	if err != nil {
		return nil, err
	}
	out := map[string]time.Time{}
	for _, p := range pods.Items {
		var at time.Time
		if p.Status.StartTime != nil {
			at = p.Status.StartTime.Time
		}
		out[string(p.UID)] = at
	}
	return out, nil
}

// sampler looks at the baseline's Jobs every two seconds: each must still
// be there (same uid), unmarked, not suspended, with the same pods started
// at the same times.
type sampler struct {
	kubes map[string]kubernetes.Interface
	ns    string
	base  map[string]jobState

	mu                                    sync.Mutex
	fenced, suspended, deleted, restarted map[string]bool
	samples                               int
	problems                              []string
}

func (s *sampler) run(ctx context.Context) {
	s.fenced, s.suspended, s.deleted, s.restarted = map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	for ctx.Err() == nil {
		for key, b := range s.base {
			s.look(ctx, key, b)
		}
		s.mu.Lock()
		s.samples++
		s.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
}

func (s *sampler) look(ctx context.Context, key string, b jobState) {
	kc := s.kubes[b.cluster]
	j, err := kc.BatchV1().Jobs(s.ns).Get(ctx, b.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		s.note(s.deleted, key, "deleted")
		return
	case err != nil:
		return // the member's API is not what is tested
	}
	if string(j.UID) != b.uid {
		s.note(s.deleted, key, "replaced by uid "+string(j.UID))
	}
	if _, ok := j.Annotations[v1alpha1.AnnotationFenced]; ok {
		s.note(s.fenced, key, "annotated "+v1alpha1.AnnotationFenced)
	}
	if jobSuspended(j) {
		s.note(s.suspended, key, "suspended")
	}
	pods, err := podsOf(ctx, kc, s.ns, b.name)
	if err != nil {
		return
	}
	for uid, at := range b.pods {
		if now, ok := pods[uid]; !ok || !now.Equal(at) {
			s.note(s.restarted, key, fmt.Sprintf("pod %s gone or restarted (%v)", uid, now))
		}
	}
	for uid := range pods {
		if _, ok := b.pods[uid]; !ok {
			s.note(s.restarted, key, "a new pod "+uid)
		}
	}
}

func jobSuspended(j *batchv1.Job) bool { return j.Spec.Suspend != nil && *j.Spec.Suspend }

func (s *sampler) note(set map[string]bool, key, what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !set[key] {
		set[key] = true
		s.problems = append(s.problems, fmt.Sprintf("%s %s: %s", stamp(), key, what))
	}
}

func (s *sampler) counts() (fenced, suspended, deleted, restarted, samples int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.fenced), len(s.suspended), len(s.deleted), len(s.restarted), s.samples
}

func (s *sampler) firstProblems() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.problems[:min(len(s.problems), 10)]
}
