package submitter_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/operate"
	"github.com/purser-io/purser/internal/control/submitter"
	"github.com/purser-io/purser/internal/domain/lifecycle"
	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// A Job suspended as the API suspends it has spec.suspend true on its
// cluster (the Job controller deletes its pod and says Suspended) and the
// runnable is Suspended; resumed, the runnable is Submitted again and the
// Job completes. The same Job, once Failed, reruns as attempt 2 under the
// same name: the ended copy of attempt 1 goes, attempt 2's is created,
// and the attempts' history keeps both.
func TestSuspendResumeRerunJob(t *testing.T) {
	f := newFixture(t, sqliteDSN(t))
	f.registerShared()
	f.start(submitter.Config{RescanInterval: time.Second})

	tmpl := job(true)
	// The pod runs for 30 s under kwok: long enough to be suspended while
	// it runs, short enough for the resumed Job to complete.
	tmpl["spec"].(map[string]any)["template"].(map[string]any)["metadata"] = map[string]any{"annotations": map[string]any{
		"pod-complete.stage.kwok.x-k8s.io/delay":        "30s",
		"pod-complete.stage.kwok.x-k8s.io/jitter-delay": "30s",
	}}
	uid := f.submit("nightly", runnableSpec{template: tmpl, placement: onCluster("sandbox-1")})
	f.waitPhase("nightly", v1alpha1.PhaseSubmitted)
	f.waitJob("sandbox-1", uid, "a running pod", func(j *unstructured.Unstructured) error {
		if n, _, _ := unstructured.NestedInt64(j.Object, "status", "active"); n != 1 {
			return fmt.Errorf("%d active pods", n)
		}
		return nil
	})

	f.operate("nightly", stream.SubmissionSuspend, func(r *lifecycle.Runnable, attempts []*store.Attempt) (*lifecycle.Transition, error) {
		return operate.Suspend(r, jobGK, tmpl, attempts, "alice", time.Now())
	})
	f.waitJob("sandbox-1", uid, "spec.suspend true and the Suspended condition", func(j *unstructured.Unstructured) error {
		if s, _, _ := unstructured.NestedBool(j.Object, "spec", "suspend"); !s {
			return fmt.Errorf("spec.suspend is false")
		}
		if c := condition(j, "Suspended"); c != "True" {
			return fmt.Errorf("condition Suspended %q", c)
		}
		if n, _, _ := unstructured.NestedInt64(j.Object, "status", "active"); n != 0 {
			return fmt.Errorf("%d active pods", n)
		}
		return nil
	})
	sandboxtest.Eventually(t, wait, "the suspension recorded as applied", func(context.Context) error {
		rec, msg, _ := f.get("nightly")
		r, err := lifecycle.Decode(rec)
		if err != nil {
			return err
		}
		if r.Phase() != v1alpha1.PhaseSuspended || r.Status.Suspension == nil || !r.Status.Suspension.Applied {
			return fmt.Errorf("phase %s, suspension %+v (%s)", r.Phase(), r.Status.Suspension, msg)
		}
		return nil
	})

	f.operate("nightly", stream.SubmissionResume, func(r *lifecycle.Runnable, _ []*store.Attempt) (*lifecycle.Transition, error) {
		return operate.Resume(r, "alice", time.Now())
	})
	f.waitPhase("nightly", v1alpha1.PhaseSubmitted)
	f.waitJob("sandbox-1", uid, "the resumed Job complete", func(j *unstructured.Unstructured) error {
		if s, _, _ := unstructured.NestedBool(j.Object, "spec", "suspend"); s {
			return fmt.Errorf("spec.suspend is still true")
		}
		if c := condition(j, "Complete"); c != "True" {
			return fmt.Errorf("condition Complete %q", c)
		}
		return nil
	})

	// The ingester's verdict, as it would record a failure of the Job.
	f.observeEnd("nightly", v1alpha1.PhaseFailed)
	f.operate("nightly", stream.SubmissionSubmit, func(r *lifecycle.Runnable, attempts []*store.Attempt) (*lifecycle.Transition, error) {
		return operate.Rerun(r, attempts, "bob", false)
	})
	_, _, attempts := f.waitPhase("nightly", v1alpha1.PhaseSubmitted)
	if len(attempts) != 2 || attempts[0].Result != string(v1alpha1.PhaseFailed) || attempts[1].Number != 2 || attempts[1].ObjectUID == "" {
		t.Fatalf("attempts after the rerun: %+v", attempts)
	}
	f.waitJob("sandbox-1", uid, "attempt 2's Job", func(j *unstructured.Unstructured) error {
		if a := j.GetLabels()[v1alpha1.LabelAttempt]; a != "2" || string(j.GetUID()) != attempts[1].ObjectUID {
			return fmt.Errorf("the Job is attempt %s's (uid %s)", a, j.GetUID())
		}
		return nil
	})
	want := []string{"submitter:place", "submitter:submit", "alice:suspend", "alice:resume", "submitter:resume",
		"ingester:observe", "bob:rerun", "submitter:place", "submitter:submit"}
	if got := actions(f.audit("nightly")); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("audit log %v, want %v", got, want)
	}
}

var jobGK = schema.GroupKind{Group: "batch", Kind: "Job"}

// operate applies, as the API does, the move that decide makes of the
// runnable, and publishes its event.
func (f *fixture) operate(name, event string, decide func(*lifecycle.Runnable, []*store.Attempt) (*lifecycle.Transition, error)) {
	f.t.Helper()
	ctx := context.Background()
	var rec *store.Runnable
	var number int
	err := f.store.Tx(ctx, func(tx *store.Tx) error {
		got, err := tx.Runnables().Get(ctx, f.ns, name)
		if err != nil {
			return err
		}
		r, err := lifecycle.Decode(got)
		if err != nil {
			return err
		}
		attempts, err := tx.Attempts().List(ctx, got.UID)
		if err != nil {
			return err
		}
		t, err := decide(r, attempts)
		if err != nil {
			return err
		}
		number = t.EnqueueAttempt
		next, err := lifecycle.Apply(ctx, tx, r, *t)
		if err == nil {
			rec = next.Rec
		}
		return err
	})
	if err != nil {
		f.t.Fatalf("%s %s: %v", event, name, err)
	}
	f.publish(rec, event, "/"+strconv.Itoa(number)+"/"+strconv.FormatInt(rec.ResourceVersion, 10))
}

// observeEnd ends the runnable's attempt in phase, as the ingester does
// when it sees the object end.
func (f *fixture) observeEnd(name string, phase v1alpha1.Phase) {
	f.t.Helper()
	ctx := context.Background()
	err := f.store.Tx(ctx, func(tx *store.Tx) error {
		got, err := tx.Runnables().Get(ctx, f.ns, name)
		if err != nil {
			return err
		}
		r, err := lifecycle.Decode(got)
		if err != nil {
			return err
		}
		attempts, err := tx.Attempts().List(ctx, got.UID)
		if err != nil {
			return err
		}
		ended := *attempts[len(attempts)-1]
		now := time.Now()
		ended.EndedAt, ended.Result = &now, string(phase)
		_, err = lifecycle.Apply(ctx, tx, r, lifecycle.Transition{To: phase, By: lifecycle.ByIngester, Attempt: &ended,
			Audit: &audit.Entry{Action: "observe", Summary: "seen " + string(phase)}})
		return err
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

// waitJob waits until the runnable's one Job on cluster passes check.
func (f *fixture) waitJob(cluster, uid, what string, check func(*unstructured.Unstructured) error) {
	f.t.Helper()
	sandboxtest.Eventually(f.t, wait, what, func(context.Context) error {
		list := f.objects(cluster, jobs, uid)
		if len(list) != 1 {
			return fmt.Errorf("%d Jobs on %s", len(list), cluster)
		}
		return check(&list[0])
	})
}

// condition is the status of the object's condition of that type.
func condition(obj *unstructured.Unstructured, typ string) string {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			s, _ := m["status"].(string)
			return s
		}
	}
	return ""
}
