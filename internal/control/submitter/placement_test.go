package submitter_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/submitter"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/member/agent"
	"github.com/purser-io/purser/internal/member/health"
	"github.com/purser-io/purser/internal/member/inventory"
	"github.com/purser-io/purser/internal/sandbox"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

var schemaNamespaces = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// slot is an extended resource only the test's own kwok nodes have, so
// that the shared clusters get different free capacity without touching
// what the other tests of the package place there.
const slot = "example.com/slot"

// addSlotNode adds a kwok node with slots of the extended resource to c,
// removed when the test ends.
func addSlotNode(t *testing.T, c *sandbox.Cluster, name string, slots int64) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	alloc := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods: resource.MustParse("110"), slot: *resource.NewQuantity(slots, resource.DecimalSI),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{
			"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0",
		}, Labels: map[string]string{"type": "kwok", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}},
		Status: corev1.NodeStatus{Capacity: alloc, Allocatable: alloc},
	}
	if _, err := cs.CoreV1().Nodes().Create(t.Context(), node, metav1.CreateOptions{}); err != nil {
		t.Fatalf("add node %s to %s: %v", name, c.Name(), err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// slotJob asks for n slots (by a limit alone, which the API server makes
// the request too) and runs until it is deleted.
func slotJob(n int64) map[string]any {
	return map[string]any{
		"apiVersion": "batch/v1", "kind": "Job",
		"spec": map[string]any{"backoffLimit": 0, "template": map[string]any{
			"metadata": map[string]any{"annotations": map[string]any{
				"pod-complete.stage.kwok.x-k8s.io/delay": "1h", "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "1h"}},
			"spec": map[string]any{"restartPolicy": "Never", "containers": []any{map[string]any{
				"name": "main", "image": "busybox", "resources": map[string]any{"limits": map[string]any{slot: fmt.Sprint(n)}},
			}}},
		}},
	}
}

// runMembers runs an agent on each cluster and an ingester, as a farm
// does: the capacity placement reads comes from them.
func (f *fixture) runMembers(cs []*sandbox.Cluster) {
	f.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	log := slog.New(slog.NewTextHandler(f.t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	for _, c := range cs {
		a, err := agent.New(agent.Config{Cluster: c.Name(), RESTConfig: c.RESTConfig(), Stream: f.streams,
			HeartbeatInterval: time.Second, LeaseDuration: 10 * time.Second, Logger: log})
		if err != nil {
			f.t.Fatal(err)
		}
		wg.Go(func() { _ = a.Run(ctx) })
	}
	interp, err := health.Load("")
	if err != nil {
		f.t.Fatal(err)
	}
	ing, err := inventory.New(inventory.Config{Store: f.store, Stream: f.streams, Logger: log, Health: interp})
	if err != nil {
		f.t.Fatal(err)
	}
	wg.Go(func() { _ = ing.Run(ctx) })
	f.t.Cleanup(func() { cancel(); wg.Wait() })
}

// slotsFree waits until the agents report the slots free per cluster.
func (f *fixture) slotsFree(want map[string]int64) {
	f.t.Helper()
	sandboxtest.Eventually(f.t, wait, fmt.Sprintf("free %s reported as %v", slot, want), func(ctx context.Context) error {
		var reports map[string]store.CapacityReport
		if err := f.store.Read(ctx, func(tx *store.Tx) (err error) { reports, err = tx.Agents().Capacities(ctx); return }); err != nil {
			return err
		}
		for cluster, n := range want {
			var c struct {
				Free map[string]string `json:"free"`
			}
			_ = json.Unmarshal(reports[cluster].Report, &c)
			if got := c.Free[slot]; got != fmt.Sprint(n) && (n != 0 || got != "") {
				return fmt.Errorf("%s: %q free", cluster, got)
			}
		}
		return nil
	})
}

func (f *fixture) status(name string) v1alpha1.RunnableStatus {
	f.t.Helper()
	rec, _, _ := f.get(name)
	var st v1alpha1.RunnableStatus
	_ = json.Unmarshal(rec.Status, &st)
	st.Phase = v1alpha1.Phase(rec.Phase) // a column of its own
	return st
}

// TestPlacementByFreeCapacity: on two clusters with different free
// capacity, a Job that asks for more than one has free goes to the other;
// one that fits nowhere stays Queued, naming the figures, and is placed
// when capacity frees; 50 Jobs submitted at once never overfill a cluster.
func TestPlacementByFreeCapacity(t *testing.T) {
	f := newFixture(t, sqliteDSN(t))
	cs := f.registerShared()
	small, big := cs[0].Name(), cs[1].Name()
	addSlotNode(t, cs[0], "slots-"+f.ns, 4)
	addSlotNode(t, cs[1], "slots-"+f.ns, 16)
	f.runMembers(cs)
	f.slotsFree(map[string]int64{small: 4, big: 16})
	f.start(submitter.Config{})

	// 8 slots: more than the small cluster has.
	f.submit("eight", runnableSpec{template: slotJob(8)})
	rec, msg, _ := f.waitPhase("eight", v1alpha1.PhaseRunning)
	if rec.Cluster != big {
		t.Fatalf("eight placed on %s, want %s: %s", rec.Cluster, big, msg)
	}
	placed := ""
	for _, e := range f.audit("eight") {
		if e.Action == "place" {
			placed = e.Summary
		}
	}
	for _, want := range []string{big + ": " + slot + " 16 of 16 free", small + ": " + slot + " 4 of 4 free, does not fit"} {
		if !strings.Contains(placed, want) {
			t.Errorf("the place entry %q does not say %q", placed, want)
		}
	}
	if got := f.status("eight").Requests; got[slot] != "8" {
		t.Errorf("status.requests %v, want %s 8", got, slot)
	}
	f.slotsFree(map[string]int64{small: 4, big: 8})

	// 6 slots fit nowhere now (4 and 8 free, one pod of 6 fits the big
	// node's 8): take the big one's down to 4 first.
	f.submit("four", runnableSpec{template: slotJob(4), placement: onCluster(big)})
	f.waitPhase("four", v1alpha1.PhaseRunning)
	f.slotsFree(map[string]int64{small: 4, big: 4})
	f.submit("six", runnableSpec{template: slotJob(6)})
	sandboxtest.Eventually(t, wait, "six waits, naming the figures", func(context.Context) error {
		st := f.status("six")
		if st.Phase != v1alpha1.PhaseQueued || !strings.Contains(st.Message, "no cluster has it free now") ||
			!strings.Contains(st.Message, big+": "+slot+" 4 of 16 free") {
			return fmt.Errorf("%s: %s", st.Phase, st.Message)
		}
		return nil
	})
	// More than any cluster's whole allocatable: it says so.
	f.submit("huge", runnableSpec{template: slotJob(32)})
	sandboxtest.Eventually(t, wait, "huge can never fit", func(context.Context) error {
		st := f.status("huge")
		if st.Phase != v1alpha1.PhaseQueued || !strings.Contains(st.Message, "whole allocatable") {
			return fmt.Errorf("%s: %s", st.Phase, st.Message)
		}
		return nil
	})
	// Capacity frees: six is placed, on the report, where it now fits.
	f.cancel("eight")
	rec, msg, _ = f.waitPhase("six", v1alpha1.PhaseRunning)
	if rec.Cluster != big {
		t.Fatalf("six placed on %s, want %s: %s", rec.Cluster, big, msg)
	}
	f.cancel("six")
	f.cancel("four")
	f.cancel("huge")
	f.slotsFree(map[string]int64{small: 4, big: 16})

	// 50 at once, one slot each: 20 fit, and no more are placed.
	for i := range 50 {
		f.submit(fmt.Sprintf("burst-%02d", i), runnableSpec{template: slotJob(1)})
	}
	count := func() (map[string]int, int) {
		on, queued := map[string]int{}, 0
		for i := range 50 {
			rec, _, _ := f.get(fmt.Sprintf("burst-%02d", i))
			switch v1alpha1.Phase(rec.Phase) {
			case v1alpha1.PhaseQueued:
				queued++
			case v1alpha1.PhaseScheduled, v1alpha1.PhaseSubmitted, v1alpha1.PhaseRunning:
				on[rec.Cluster]++
			}
		}
		return on, queued
	}
	sandboxtest.Eventually(t, wait, "20 of the burst running", func(context.Context) error {
		on, queued := count()
		if on[small] > 4 || on[big] > 16 {
			t.Fatalf("overfilled: %v placed", on)
		}
		if on[small] != 4 || on[big] != 16 || queued != 30 {
			return fmt.Errorf("%v placed, %d queued", on, queued)
		}
		return nil
	})
	// Every pod of theirs is bound: none waits for a slot on its cluster.
	f.slotsFree(map[string]int64{small: 0, big: 0})
	for _, c := range cs {
		cl, err := kubernetes.NewForConfig(c.RESTConfig())
		if err != nil {
			t.Fatal(err)
		}
		sandboxtest.Eventually(t, wait, "every burst pod on "+c.Name()+" bound", func(ctx context.Context) error {
			pods, err := cl.CoreV1().Pods(f.ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			for _, p := range pods.Items {
				if p.Spec.NodeName == "" && p.Status.Phase == corev1.PodPending {
					return fmt.Errorf("pod %s is not scheduled", p.Name)
				}
			}
			return nil
		})
	}
	on, _ := count()
	if on[small] != 4 || on[big] != 16 {
		t.Fatalf("after the reports: %v placed, want 4 and 16", on)
	}
	st := f.status("burst-49")
	for i := range 50 {
		if s := f.status(fmt.Sprintf("burst-%02d", i)); s.Phase == v1alpha1.PhaseQueued {
			st = s
			break
		}
	}
	if !strings.Contains(st.Message, "no cluster has it free now") {
		t.Errorf("a queued one of the burst says %q", st.Message)
	}
}

// TestQuotaHoldsWork: a namespace over its quota queues, the message
// naming the quota and its use, and is placed when its own work ends.
func TestQuotaHoldsWork(t *testing.T) {
	f := newFixture(t, sqliteDSN(t))
	cs := f.registerShared()
	f.runMembers(cs)
	spec, _ := json.Marshal(v1alpha1.QuotaSpec{Limits: map[string]string{"cpu": "3", "runnables": "5"}})
	if err := f.store.Tx(t.Context(), func(tx *store.Tx) error {
		return tx.Quotas().Put(t.Context(), &store.Quota{Namespace: f.ns, Spec: spec})
	}); err != nil {
		t.Fatal(err)
	}
	f.start(submitter.Config{})
	cpuJob := func() map[string]any {
		j := slotJob(1)
		c := j["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
		c["resources"] = map[string]any{"requests": map[string]any{"cpu": "1500m"}}
		return j
	}
	f.submit("one", runnableSpec{template: cpuJob()})
	f.waitPhase("one", v1alpha1.PhaseRunning)
	f.submit("two", runnableSpec{template: cpuJob()})
	f.waitPhase("two", v1alpha1.PhaseRunning)
	f.submit("three", runnableSpec{template: cpuJob()})
	want := "over quota " + f.ns + ": cpu 3 of 3 used, asks for 1500m"
	sandboxtest.Eventually(t, wait, "three held by the quota", func(context.Context) error {
		if st := f.status("three"); st.Phase != v1alpha1.PhaseQueued || st.Message != want {
			return fmt.Errorf("%s: %q", st.Phase, st.Message)
		}
		return nil
	})
	f.cancel("one")
	f.waitPhase("three", v1alpha1.PhaseRunning)
	f.cancel("two")
	f.cancel("three")
}

// submitIn stores a Queued runnable in namespace ns, as submit does in
// the test's own.
func (f *fixture) submitIn(ns, name string, spec v1alpha1.RunnableSpec) {
	f.t.Helper()
	doc, err := json.Marshal(store.Document[v1alpha1.RunnableSpec]{Spec: spec})
	if err != nil {
		f.t.Fatal(err)
	}
	rec := &store.Runnable{Namespace: ns, Name: name, UID: "uid-" + randomHex(8), Generation: 1, Spec: doc, SpecHash: randomHex(8),
		Phase: string(v1alpha1.PhaseQueued), Submitter: "alice"}
	if err := f.store.Tx(context.Background(), func(tx *store.Tx) error { return tx.Runnables().Create(context.Background(), rec) }); err != nil {
		f.t.Fatal(err)
	}
	f.publish(rec, "submit", "")
}

func (f *fixture) statusIn(ns, name string) (v1alpha1.Phase, string) {
	f.t.Helper()
	var rec *store.Runnable
	if err := f.store.Read(context.Background(), func(tx *store.Tx) (err error) {
		rec, err = tx.Runnables().Get(context.Background(), ns, name)
		return err
	}); err != nil {
		f.t.Fatal(err)
	}
	var st v1alpha1.RunnableStatus
	_ = json.Unmarshal(rec.Status, &st)
	return v1alpha1.Phase(rec.Phase), st.Message
}

// TestQueueOrder: freed capacity goes to the higher priority first, then
// to the namespace furthest below its fair share: a second namespace's
// lone runnable is placed ahead of the first's backlog.
func TestQueueOrder(t *testing.T) {
	f := newFixture(t, sqliteDSN(t))
	cs := f.registerShared()
	addSlotNode(t, cs[0], "slots-"+f.ns, 2)
	f.runMembers(cs)
	f.slotsFree(map[string]int64{cs[0].Name(): 2})
	f.start(submitter.Config{})
	other := "o-" + f.ns
	t.Cleanup(func() {
		for _, dyn := range f.dyn {
			_ = dyn.Resource(schemaNamespaces).Delete(context.Background(), other, metav1.DeleteOptions{})
		}
	})
	one := func(priority *intstr.IntOrString) v1alpha1.RunnableSpec {
		return v1alpha1.RunnableSpec{Template: slotJob(1), Priority: priority}
	}
	f.submitIn(f.ns, "hold-1", one(nil))
	f.submitIn(f.ns, "hold-2", one(nil))
	f.waitPhase("hold-1", v1alpha1.PhaseRunning)
	f.waitPhase("hold-2", v1alpha1.PhaseRunning)
	for i := range 4 {
		f.submitIn(f.ns, fmt.Sprintf("backlog-%d", i), one(nil))
	}
	urgent := intstr.FromInt32(100)
	f.submitIn(f.ns, "urgent", one(&urgent))
	f.submitIn(other, "lone", one(nil))
	waiting := func(ns string, names ...string) {
		t.Helper()
		sandboxtest.Eventually(t, wait, fmt.Sprintf("%v queued", names), func(context.Context) error {
			for _, n := range names {
				if phase, msg := f.statusIn(ns, n); phase != v1alpha1.PhaseQueued || msg == "" {
					return fmt.Errorf("%s: %s %q", n, phase, msg)
				}
			}
			return nil
		})
	}
	backlog := []string{"backlog-0", "backlog-1", "backlog-2", "backlog-3"}
	waiting(f.ns, append(backlog, "urgent")...)
	waiting(other, "lone")

	f.cancel("hold-1")
	f.waitPhase("urgent", v1alpha1.PhaseRunning)
	waiting(f.ns, backlog...)
	waiting(other, "lone")

	f.cancel("hold-2")
	sandboxtest.Eventually(t, wait, "the lone runnable of the other namespace placed", func(context.Context) error {
		if phase, msg := f.statusIn(other, "lone"); phase != v1alpha1.PhaseRunning {
			return fmt.Errorf("%s %q", phase, msg)
		}
		return nil
	})
	waiting(f.ns, backlog...)
	f.cancel("urgent")
	sandboxtest.Eventually(t, wait, "one of the backlog placed next", func(context.Context) error {
		running := 0
		for _, n := range backlog {
			if phase, _ := f.statusIn(f.ns, n); phase == v1alpha1.PhaseRunning {
				running++
			}
		}
		if running != 1 {
			return fmt.Errorf("%d of the backlog running", running)
		}
		return nil
	})
}

// TestDependsOnDeployables: a runnable goes only where the deployables it
// depends on are Synced at their generation, and says which and where
// while none is.
func TestDependsOnDeployables(t *testing.T) {
	f := newFixture(t, sqliteDSN(t))
	cs := f.registerShared()
	f.start(submitter.Config{})
	ctx := context.Background()
	deployable := func(name string, synced ...string) {
		t.Helper()
		err := f.store.Tx(ctx, func(tx *store.Tx) error {
			d, err := tx.Deployables().Get(ctx, f.ns, name)
			if errors.Is(err, store.ErrNotFound) {
				d = &store.Deployable{Namespace: f.ns, Name: name, UID: "uid-" + randomHex(6), Generation: 2, Spec: []byte(`{}`), SpecHash: "h"}
				err = tx.Deployables().Create(ctx, d)
			}
			if err != nil {
				return err
			}
			for _, c := range synced {
				// As the syncer records a sync.
				if err := tx.Deployables().PutStatus(ctx, &store.DeployableClusterStatus{DeployableUID: d.UID, Cluster: c,
					State: string(v1alpha1.StateSynced), SyncedGeneration: 2}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	small, big := cs[0].Name(), cs[1].Name()
	deployable("app-config", big)
	f.submitIn(f.ns, "needs-config", v1alpha1.RunnableSpec{Template: job(true), DependsOn: []v1alpha1.Dependency{{Deployable: "app-config"}}})
	rec, msg, _ := f.waitPhase("needs-config", v1alpha1.PhaseSubmitted)
	if rec.Cluster != big {
		t.Fatalf("placed on %s, where app-config is not synced: %s", rec.Cluster, msg)
	}
	deployable("secret-config")
	f.submitIn(f.ns, "waits", v1alpha1.RunnableSpec{Template: job(true), DependsOn: []v1alpha1.Dependency{{Deployable: "secret-config"}}})
	sandboxtest.Eventually(t, wait, "waits names what it lacks where", func(context.Context) error {
		phase, msg := f.statusIn(f.ns, "waits")
		for _, want := range []string{small + " lacks deployable secret-config not synced there yet", big + " lacks deployable secret-config"} {
			if phase != v1alpha1.PhaseQueued || !strings.Contains(msg, want) {
				return fmt.Errorf("%s %q", phase, msg)
			}
		}
		return nil
	})
	deployable("secret-config", small)
	rec, msg, _ = f.waitPhase("waits", v1alpha1.PhaseSubmitted)
	if rec.Cluster != small {
		t.Fatalf("placed on %s: %s", rec.Cluster, msg)
	}
}

// TestQuotaPerLabel: a quota per value of a cluster label (one runnable
// per dc) sends the second runnable to the other dc, holds the third with
// a message naming the quota of each dc, and places it where the first
// ended.
func TestQuotaPerLabel(t *testing.T) {
	f := newFixture(t, sqliteDSN(t))
	cs := env.Clusters(t)
	for i, c := range cs {
		f.register(c.Name(), c, map[string]string{"dc": fmt.Sprintf("dc-%d", i+1)})
	}
	f.runMembers(cs)
	spec, _ := json.Marshal(v1alpha1.QuotaSpec{Limits: map[string]string{"runnables": "10"},
		PerLabel: &v1alpha1.QuotaPerLabel{Label: "dc", Limits: map[string]string{"runnables": "1"}}})
	if err := f.store.Tx(t.Context(), func(tx *store.Tx) error {
		return tx.Quotas().Put(t.Context(), &store.Quota{Namespace: f.ns, Spec: spec})
	}); err != nil {
		t.Fatal(err)
	}
	f.start(submitter.Config{})
	small := func() map[string]any { // a Job any node takes
		j := slotJob(1)
		c := j["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
		c["resources"] = map[string]any{"requests": map[string]any{"cpu": "100m"}}
		return j
	}
	f.submit("one", runnableSpec{template: small()})
	f.waitPhase("one", v1alpha1.PhaseRunning)
	f.submit("two", runnableSpec{template: small()})
	f.waitPhase("two", v1alpha1.PhaseRunning)
	cluster := func(name string) string {
		rec, _, _ := f.get(name)
		return rec.Cluster
	}
	first, second := cluster("one"), cluster("two")
	if first == second {
		t.Fatalf("both runnables on %s, though its dc holds one", first)
	}
	f.submit("three", runnableSpec{template: small()})
	sandboxtest.Eventually(t, wait, "three held by the quota of each dc", func(context.Context) error {
		st := f.status("three")
		if st.Phase != v1alpha1.PhaseQueued || !strings.Contains(st.Message, "over quota "+f.ns+" for dc=dc-1: runnables 1 of 1 used") ||
			!strings.Contains(st.Message, "for dc=dc-2") {
			return fmt.Errorf("%s: %q", st.Phase, st.Message)
		}
		return nil
	})
	f.cancel("one")
	f.waitPhase("three", v1alpha1.PhaseRunning)
	if got := cluster("three"); got != first {
		t.Errorf("three placed on %s, want %s, whose dc's share the cancel freed", got, first)
	}
	f.cancel("two")
	f.cancel("three")
}
