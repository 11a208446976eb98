package lifecycle_test

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/lifecycle"
	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/hub/stream"
)

func TestAllowed(t *testing.T) {
	cases := []struct {
		from, to v1alpha1.Phase
		by       lifecycle.Cause
		want     bool
	}{
		{lifecycle.New, v1alpha1.PhaseQueued, lifecycle.ByAPI, true},
		{lifecycle.New, v1alpha1.PhaseRunning, lifecycle.ByAPI, false},
		{v1alpha1.PhaseQueued, v1alpha1.PhaseScheduled, lifecycle.BySubmitter, true},
		{v1alpha1.PhaseQueued, v1alpha1.PhaseScheduled, lifecycle.ByController, false},
		{v1alpha1.PhaseScheduled, v1alpha1.PhaseRunning, lifecycle.ByIngester, true},
		{v1alpha1.PhaseRunning, v1alpha1.PhaseSubmitted, lifecycle.ByIngester, false},
		{v1alpha1.PhaseCancelled, v1alpha1.PhaseCancelled, lifecycle.ByIngester, false},
		{v1alpha1.PhaseSucceeded, v1alpha1.PhaseSucceeded, lifecycle.ByIngester, true},
		{v1alpha1.PhaseSucceeded, v1alpha1.PhaseFailed, lifecycle.ByIngester, false},
		{v1alpha1.PhaseSucceeded, v1alpha1.PhaseCancelled, lifecycle.ByAPI, false},
		{v1alpha1.PhaseRunning, v1alpha1.PhaseCancelled, lifecycle.ByAPI, true},
		{v1alpha1.PhaseRunning, v1alpha1.PhaseFailingOver, lifecycle.ByController, true},
		{v1alpha1.PhaseFailingOver, v1alpha1.PhaseQueued, lifecycle.ByController, true},
		{v1alpha1.PhaseFailingOver, v1alpha1.PhaseQueued, lifecycle.BySubmitter, false},
		{v1alpha1.PhaseSucceeded, lifecycle.Removed, lifecycle.ByRetention, true},
		{v1alpha1.PhaseRunning, lifecycle.Removed, lifecycle.ByAPI, false},
		{v1alpha1.PhaseRunning, lifecycle.Removed, lifecycle.ByRetention, false},
		{v1alpha1.PhaseRunning, v1alpha1.PhaseSuspended, lifecycle.ByAPI, true},
		{v1alpha1.PhaseQueued, v1alpha1.PhaseSuspended, lifecycle.ByAPI, false},
		{v1alpha1.PhaseSuspended, v1alpha1.PhaseSubmitted, lifecycle.BySubmitter, true},
		{v1alpha1.PhaseSuspended, v1alpha1.PhaseSubmitted, lifecycle.ByAPI, false},
		{v1alpha1.PhaseSuspended, v1alpha1.PhaseQueued, lifecycle.ByController, false},
		{v1alpha1.PhaseSuspended, v1alpha1.PhaseSuspended, lifecycle.ByIngester, false},
		{v1alpha1.PhaseSuspended, v1alpha1.PhaseCancelled, lifecycle.ByAPI, true},
		{v1alpha1.PhaseFailed, v1alpha1.PhaseQueued, lifecycle.ByAPI, true},
		{v1alpha1.PhaseRejected, v1alpha1.PhaseQueued, lifecycle.ByAPI, false},
		{v1alpha1.PhaseFailed, v1alpha1.PhaseQueued, lifecycle.BySubmitter, true},
		{v1alpha1.PhaseSucceeded, v1alpha1.PhaseQueued, lifecycle.BySubmitter, false},
	}
	for _, c := range cases {
		if got := lifecycle.Allowed(c.from, c.to, c.by); got != c.want {
			t.Errorf("Allowed(%s -> %s by %s) = %v, want %v", c.from, c.to, c.by, got, c.want)
		}
	}
}

// Every ended phase is final for the components: nothing but a removal,
// a user's rerun, or a failure's retry by spec.retry, leads out of it.
func TestEndedPhasesAreFinal(t *testing.T) {
	for _, m := range lifecycle.Table {
		for _, from := range m.From {
			rerun := m.By == lifecycle.ByAPI && (m.To == v1alpha1.PhaseQueued || m.To == v1alpha1.PhasePendingApproval)
			retry := m.By == lifecycle.BySubmitter && from == v1alpha1.PhaseFailed && m.To == v1alpha1.PhaseQueued
			rerun = rerun || retry
			if from.Terminal() && m.To != from && m.To != lifecycle.Same && m.To != lifecycle.Removed && !rerun {
				t.Errorf("row %q leads out of ended phase %s to %s", m.Why, from, m.To)
			}
		}
	}
}

var update = flag.Bool("update", false, "rewrite docs/lifecycle.md's table from the code")

// docs/lifecycle.md shows the table the code enforces.
func TestDocsShowTheTable(t *testing.T) {
	const path = "../../../docs/lifecycle.md"
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	table := lifecycle.Markdown()
	if *update {
		start := bytes.Index(doc, []byte("| from | to |"))
		end := bytes.Index(doc, []byte("\n## Who decides when"))
		if start < 0 || end < start {
			t.Fatal("docs/lifecycle.md has no table to replace")
		}
		doc = []byte(string(doc[:start]) + table + string(doc[end:]))
		if err := os.WriteFile(path, doc, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.Contains(string(doc), table) {
		t.Errorf("docs/lifecycle.md does not hold the table of internal/domain/lifecycle; go test ./internal/domain/lifecycle -run TestDocs -update rewrites it")
	}
}

func TestApply(t *testing.T) {
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			ctx := t.Context()
			s, err := store.Open(ctx, eng.NewDSN(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })

			rec := &store.Runnable{Namespace: "team-a", Name: "report", UID: "uid-1", Generation: 1,
				Spec: []byte(`{"spec":{}}`), SpecHash: "h", Submitter: "alice"}
			err = s.Tx(ctx, func(tx *store.Tx) error {
				_, err := lifecycle.Create(ctx, tx, rec, lifecycle.Transition{
					To: v1alpha1.PhaseQueued, By: lifecycle.ByAPI, Actor: "alice", Message: "waiting for a cluster",
					Enqueue: stream.SubmissionSubmit, Audit: &audit.Entry{Action: "create", Summary: "submitted"},
				})
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			read := func() *lifecycle.Runnable {
				t.Helper()
				var r *lifecycle.Runnable
				if err := s.Read(ctx, func(tx *store.Tx) (err error) { r, err = lifecycle.Load(ctx, tx, "uid-1"); return err }); err != nil {
					t.Fatal(err)
				}
				return r
			}
			apply := func(r *lifecycle.Runnable, tr lifecycle.Transition) error {
				return s.Tx(ctx, func(tx *store.Tx) error { _, err := lifecycle.Apply(ctx, tx, r, tr); return err })
			}

			queued := read()
			if queued.Phase() != v1alpha1.PhaseQueued || queued.Status.Message != "waiting for a cluster" {
				t.Fatalf("created: phase %s, message %q", queued.Phase(), queued.Status.Message)
			}
			// A move the table does not have writes nothing.
			err = apply(queued, lifecycle.Transition{To: v1alpha1.PhaseRunning, By: lifecycle.ByIngester})
			if !errors.Is(err, lifecycle.ErrNotAllowed) {
				t.Fatalf("Queued -> Running by the ingester: %v, want ErrNotAllowed", err)
			}
			// An audited move without its audit entry writes nothing.
			err = apply(queued, lifecycle.Transition{To: v1alpha1.PhaseScheduled, By: lifecycle.BySubmitter})
			if !errors.Is(err, lifecycle.ErrNotAllowed) {
				t.Fatalf("placement without an audit entry: %v, want ErrNotAllowed", err)
			}
			// What the attempt before showed (here as a stand-in, set while
			// it waits) is not the new attempt's: placement starts it Unknown.
			since := time.Now()
			if err := apply(queued, lifecycle.Transition{To: v1alpha1.PhaseQueued, By: lifecycle.BySubmitter,
				Edit: func(st *v1alpha1.RunnableStatus) error {
					st.Health, st.UnhealthySince = v1alpha1.HealthUnhealthy, &since
					return nil
				}}); err != nil {
				t.Fatal(err)
			}
			queued = read()
			cluster := "dc1"
			err = apply(queued, lifecycle.Transition{
				To: v1alpha1.PhaseScheduled, By: lifecycle.BySubmitter, Cluster: &cluster, Message: "placed",
				Attempt: &store.Attempt{RunnableUID: "uid-1", Number: 1, Cluster: "dc1", StartedAt: time.Now()},
				Audit:   &audit.Entry{Action: "place", Summary: "placed attempt 1 on dc1"},
			})
			if err != nil {
				t.Fatal(err)
			}
			// queued is stale now: the same move again is ErrMoved.
			err = apply(queued, lifecycle.Transition{To: v1alpha1.PhaseQueued, By: lifecycle.BySubmitter, Message: "again"})
			if !errors.Is(err, store.ErrMoved) {
				t.Fatalf("stale write: %v, want ErrMoved", err)
			}
			// An edit that fails writes nothing.
			scheduled := read()
			boom := errors.New("boom")
			err = apply(scheduled, lifecycle.Transition{To: v1alpha1.PhaseRunning, By: lifecycle.ByIngester,
				Edit: func(*v1alpha1.RunnableStatus) error { return boom }})
			if !errors.Is(err, boom) {
				t.Fatalf("failing edit: %v", err)
			}
			got := read()
			if got.Status.Health != v1alpha1.HealthUnknown || got.Status.UnhealthySince != nil {
				t.Fatalf("a new attempt's health: %s since %v, want Unknown", got.Status.Health, got.Status.UnhealthySince)
			}
			if got.Phase() != v1alpha1.PhaseScheduled || got.Rec.Cluster != "dc1" || got.Status.Message != "placed" ||
				got.Rec.ResourceVersion != scheduled.Rec.ResourceVersion {
				t.Fatalf("after refused writes: phase %s cluster %q message %q rv %d", got.Phase(), got.Rec.Cluster,
					got.Status.Message, got.Rec.ResourceVersion)
			}

			// Removal only of an ended runnable, with its audit entry.
			err = s.Tx(ctx, func(tx *store.Tx) error {
				return lifecycle.Remove(ctx, tx, got, lifecycle.ByAPI, "alice", audit.Entry{Action: "delete", Summary: "x"})
			})
			if !errors.Is(err, lifecycle.ErrNotAllowed) {
				t.Fatalf("removal of a Scheduled runnable: %v, want ErrNotAllowed", err)
			}
			if err := apply(got, lifecycle.Transition{To: v1alpha1.PhaseSucceeded, By: lifecycle.ByIngester,
				Audit: &audit.Entry{Action: "observe", Summary: "succeeded"}}); err != nil {
				t.Fatal(err)
			}
			done := read()
			err = s.Tx(ctx, func(tx *store.Tx) error {
				return lifecycle.Remove(ctx, tx, done, lifecycle.ByAPI, "alice", audit.Entry{Action: "delete", Summary: "deleted"})
			})
			if err != nil {
				t.Fatal(err)
			}

			var entries []*audit.Entry
			if err := s.Read(ctx, func(tx *store.Tx) (err error) {
				entries, err = tx.Audit().List(ctx, store.AuditFilter{Kind: v1alpha1.KindRunnable, Name: "report"})
				return err
			}); err != nil {
				t.Fatal(err)
			}
			var trail []string
			for _, e := range entries {
				trail = append(trail, e.Actor+" "+e.Action+" "+e.Outcome)
			}
			want := "alice create Queued, submitter place Scheduled, ingester observe Succeeded, alice delete Removed"
			if strings.Join(trail, ", ") != want {
				t.Errorf("audit trail:\n got %s\nwant %s", strings.Join(trail, ", "), want)
			}
			pending, err := s.PendingOutbox(ctx, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(pending) != 1 || pending[0].MsgID != "uid-1/submit" {
				t.Errorf("outbox: %d messages, want the one submission of the create", len(pending))
			}
		})
	}
}
