package scheduler_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/attempt"
	"github.com/purser-io/purser/internal/control/scheduler"
	"github.com/purser-io/purser/internal/control/submitter"
	"github.com/purser-io/purser/internal/domain/admission"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/domain/submission"
	"github.com/purser-io/purser/internal/hub/outbox"
	"github.com/purser-io/purser/internal/hub/seal/sealtest"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/hub/stream/streamtest"
	"github.com/purser-io/purser/internal/member/clusters/clusterstest"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// One sandbox cluster for the package, started by the first test that
// asks for it (the unit tests never do).
var env = sandboxtest.New(sandboxtest.Config{Clusters: 1})

func TestMain(m *testing.M) { os.Exit(env.Run(m)) }

const wait = 3 * time.Minute

var jobs = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}

// TestConcurrencyOnRealJobs runs a scheduler, the outbox relay and a
// submitter on one database and a real kube-apiserver, with the
// scheduler's clock moved by hand from tick to tick: Forbid skips a tick
// while the Job of the previous one is active, and Replace cancels it
// (its Job leaves the cluster) before the next one's Job is created; a
// backfill of three past ticks puts three Jobs on the cluster, under
// their ticks' names, and a second one of the same interval none.
func TestConcurrencyOnRealJobs(t *testing.T) {
	cluster := env.Clusters(t)[0]
	st := open(t, storetest.Engines()[0].NewDSN(t))
	sealer, _ := sealtest.New(t)
	kc, err := cluster.Kubeconfig("")
	if err != nil {
		t.Fatal(err)
	}
	clusterstest.Register(t, st, sealer, store.Cluster{Name: cluster.Name(), Labels: cluster.Labels()}, kc)
	dyn, err := dynamic.NewForConfig(cluster.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	var suffix [3]byte
	rand.Read(suffix[:])
	ns := "sched-" + hex.EncodeToString(suffix[:])
	t.Cleanup(func() {
		_ = dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	pol, err := policy.NewPolicy(policy.PolicyFile{Namespaces: map[string]policy.NamespacePolicy{
		ns: {Roles: map[policy.Role][]string{policy.RoleEditor: {"alice"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	nats := streamtest.Start(t, "")
	streams := streamtest.Declared(t, nats.URL)
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	relay := outbox.NewRelay(outbox.StoreSource(st), streams, outbox.Config{Interval: 200 * time.Millisecond})
	sub := submitter.New(submitter.Config{Store: st, Sealer: sealer, Stream: streams, Policy: pol, Logger: log})
	var clk clock
	base := time.Date(2026, 12, 7, 10, 1, 0, 0, time.UTC)
	clk.Set(base)
	sched := scheduler.New(scheduler.Config{Store: st, Policy: func() *policy.Policy { return pol }, Now: clk.Now, Notify: relay.Notify, Logger: log})
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{}, 3)
	for _, run := range []func(context.Context) error{relay.Run, sub.Run, sched.Run} {
		go func() {
			if err := run(runCtx); err != nil && runCtx.Err() == nil {
				t.Errorf("run: %v", err)
			}
			done <- struct{}{}
		}()
	}
	t.Cleanup(func() {
		stop()
		for range 3 {
			<-done
		}
	})

	for _, policyName := range []string{v1alpha1.ConcurrencyForbid, v1alpha1.ConcurrencyReplace} {
		name := "job-" + map[string]string{v1alpha1.ConcurrencyForbid: "forbid", v1alpha1.ConcurrencyReplace: "replace"}[policyName]
		s := newSchedule(name, "*/5 * * * *")
		s.Metadata.Namespace = ns
		s.Spec.ConcurrencyPolicy = policyName
		s.Spec.Template.Template["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"] =
			[]any{map[string]any{"name": "c", "image": "busybox", "command": []any{"sleep", "3600"}}}
		// A new timetable at the clock: its first tick is the next
		// multiple of five minutes.
		put(t, st, s, clk.Now())
		now := clk.Now()
		first := now.Truncate(5 * time.Minute).Add(5 * time.Minute)
		second := first.Add(5 * time.Minute)

		clk.Set(first.Add(time.Second))
		sched.Kick()
		firstRun := v1alpha1.TickRunName(name, first)
		jobOf(t, dyn, ns, firstRun, true)

		clk.Set(second.Add(time.Second))
		sched.Kick()
		secondRun := v1alpha1.TickRunName(name, second)
		switch policyName {
		case v1alpha1.ConcurrencyForbid:
			sandboxtest.Eventually(t, wait, "the second tick skipped", func(context.Context) error {
				got := status(t, st, ns, name)
				if got.LastScheduleTime == nil || !got.LastScheduleTime.Equal(second) {
					return fmt.Errorf("last tick %v, want %v", got.LastScheduleTime, second)
				}
				if got.Missed != 1 || got.Message == "" {
					return fmt.Errorf("status %+v", got)
				}
				return nil
			})
			if _, err := runnable(st, ns, secondRun); err == nil {
				t.Fatalf("Forbid created %s while %s was active", secondRun, firstRun)
			}
			jobOf(t, dyn, ns, firstRun, true) // still there, untouched
			t.Logf("Forbid: %s", status(t, st, ns, name).Message)
		case v1alpha1.ConcurrencyReplace:
			jobOf(t, dyn, ns, secondRun, true)
			jobOf(t, dyn, ns, firstRun, false)
			rec, err := runnable(st, ns, firstRun)
			if err != nil || rec.Phase != string(v1alpha1.PhaseCancelled) {
				t.Fatalf("the replaced run: %+v, %v", rec, err)
			}
			got := status(t, st, ns, name)
			if len(got.Active) != 1 || got.Active[0].Name != secondRun {
				t.Fatalf("active after Replace: %+v", got.Active)
			}
		}
		clk.Set(second.Add(time.Minute)) // the next schedule starts later
	}

	// Backfill: three past ticks of an Allow schedule become three Jobs
	// under their ticks' names, created by the caller; a second backfill
	// of the same interval finds them done.
	s := newSchedule("job-backfill", "*/5 * * * *")
	s.Metadata.Namespace = ns
	put(t, st, s, clk.Now())
	stored := stored(t, st, ns, "job-backfill")
	from := clk.Now().Truncate(5 * time.Minute).Add(-30 * time.Minute)
	ticks, _, err := scheduler.TicksBetween(&stored.Obj.Spec, from, from.Add(10*time.Minute), v1alpha1.MaxBackfillTicks)
	if err != nil || len(ticks) != 3 {
		t.Fatalf("ticks of [%s, +10m]: %v, %v", from, ticks, err)
	}
	gate := &submission.Gate{Policy: pol, Store: st, Pods: admission.DefaultChecker(), Renderings: attempt.Renderings, Now: clk.Now}
	res, err := scheduler.Backfill(t.Context(), st, gate, stored, policy.User{Name: "alice"}, ticks, relay.Notify)
	if err != nil || res.Run != 3 {
		t.Fatalf("backfill: %+v, %v", res, err)
	}
	for _, tick := range ticks {
		jobOf(t, dyn, ns, v1alpha1.TickRunName("job-backfill", tick), true)
	}
	again, err := scheduler.Backfill(t.Context(), st, gate, stored, policy.User{Name: "alice"}, ticks, relay.Notify)
	if err != nil || again.AlreadyDone != 3 || again.Run != 0 {
		t.Fatalf("backfill again: %+v, %v", again, err)
	}
}

func stored(t *testing.T, st *store.Store, ns, name string) *scheduler.Stored {
	t.Helper()
	var rec *store.Schedule
	if err := st.Read(t.Context(), func(tx *store.Tx) error {
		var err error
		rec, err = tx.Schedules().Get(t.Context(), ns, name)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	s, err := scheduler.Decode(rec)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// jobOf waits until the Job of runnable name is on the cluster (present)
// or gone from it.
func jobOf(t *testing.T, dyn dynamic.Interface, ns, name string, present bool) {
	t.Helper()
	what := map[bool]string{true: "appears", false: "leaves the cluster"}[present]
	sandboxtest.Eventually(t, wait, "the Job of "+name+" "+what, func(ctx context.Context) error {
		_, err := dyn.Resource(jobs).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case present && err != nil:
			return err
		case !present && err == nil:
			return fmt.Errorf("job %s/%s still there", ns, name)
		case !present && !apierrors.IsNotFound(err):
			return err
		}
		return nil
	})
}

func status(t *testing.T, st *store.Store, ns, name string) v1alpha1.ScheduleStatus {
	t.Helper()
	var rec *store.Schedule
	if err := st.Read(t.Context(), func(tx *store.Tx) error {
		var err error
		rec, err = tx.Schedules().Get(t.Context(), ns, name)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	s, err := scheduler.Decode(rec)
	if err != nil {
		t.Fatal(err)
	}
	return s.Obj.Status
}

func runnable(st *store.Store, ns, name string) (*store.Runnable, error) {
	var rec *store.Runnable
	err := st.Read(context.Background(), func(tx *store.Tx) error {
		var err error
		rec, err = tx.Runnables().Get(context.Background(), ns, name)
		return err
	})
	return rec, err
}
