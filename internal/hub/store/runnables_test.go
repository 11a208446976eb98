package store

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"
)

func newRunnable(namespace, name string) *Runnable {
	return &Runnable{
		Namespace:  namespace,
		Name:       name,
		UID:        "uid-" + namespace + "-" + name,
		Generation: 1,
		Spec:       []byte(`{"template":{"kind":"Job","apiVersion":"batch/v1"},"b":1,"a":2}`),
		SpecHash:   "h-" + name,
		Phase:      "Queued",
		Submitter:  "alice",
	}
}

func testRunnables(t *testing.T, eng engine) {
	s := eng.open(t)
	ctx := t.Context()
	r := newRunnable("team-a", "nightly")
	mustTx(t, s, func(tx *Tx) error { return tx.Runnables().Create(ctx, r) })
	if r.ID == 0 || r.ResourceVersion != 1 || r.CreatedAt.IsZero() || !r.UpdatedAt.Equal(r.CreatedAt) {
		t.Fatalf("create did not fill ID, times and ResourceVersion: %+v", r)
	}

	mustRead(t, s, func(tx *Tx) error {
		got, err := tx.Runnables().Get(ctx, "team-a", "nightly")
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(got, r) {
			t.Errorf("Runnables.Get:\n got %+v\nwant %+v", got, r)
		}
		// Specs are hashed by callers, so they must come back byte for byte
		// (key order included), which JSONB would not do.
		if !bytes.Equal(got.Spec, r.Spec) {
			t.Errorf("spec changed in storage: %s", got.Spec)
		}
		byUID, err := tx.Runnables().GetByUID(ctx, r.UID)
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(byUID, r) {
			t.Errorf("Runnables.GetByUID:\n got %+v\nwant %+v", byUID, r)
		}
		_, err = tx.Runnables().Get(ctx, "team-a", "missing")
		wantErr(t, err, ErrNotFound)
		_, err = tx.Runnables().GetByUID(ctx, "missing")
		wantErr(t, err, ErrNotFound)
		return nil
	})

	// Conflicts leave the transaction usable: the API relies on that to
	// answer "same object submitted again" by reading what is there.
	mustTx(t, s, func(tx *Tx) error {
		dupName := newRunnable("team-a", "nightly")
		dupName.UID = "another-uid"
		wantErr(t, tx.Runnables().Create(ctx, dupName), ErrConflict)
		dupUID := newRunnable("team-a", "other-name")
		dupUID.UID = r.UID
		wantErr(t, tx.Runnables().Create(ctx, dupUID), ErrConflict)
		_, err := tx.Runnables().Get(ctx, "team-a", "nightly")
		if err != nil {
			return fmt.Errorf("transaction unusable after a conflict: %w", err)
		}
		return tx.Runnables().Create(ctx, newRunnable("team-a", "after-conflict"))
	})
	mustRead(t, s, func(tx *Tx) error {
		_, err := tx.Runnables().Get(ctx, "team-a", "after-conflict")
		return err
	})

	// Update: every mutable field changes, ResourceVersion and UpdatedAt move.
	before := *r
	r.Generation = 2
	r.Spec = []byte(`{"template":{}}`)
	r.SpecHash = "h2"
	r.Phase = "Running"
	r.Cluster = "dc1-a"
	r.Submitter = "bob"
	r.Status = []byte(`{"phase":"Running"}`)
	time.Sleep(2 * time.Microsecond)
	mustTx(t, s, func(tx *Tx) error { return tx.Runnables().Update(ctx, r) })
	if r.ResourceVersion != 2 || !r.UpdatedAt.After(before.UpdatedAt) {
		t.Fatalf("update did not bump ResourceVersion/UpdatedAt: %+v", r)
	}
	mustRead(t, s, func(tx *Tx) error {
		got, err := tx.Runnables().GetByUID(ctx, r.UID)
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(got, r) {
			t.Errorf("after update:\n got %+v\nwant %+v", got, r)
		}
		return nil
	})

	// Stale ResourceVersion and unknown UID.
	err := s.Tx(ctx, func(tx *Tx) error { return tx.Runnables().Update(ctx, &before) })
	wantErr(t, err, ErrConflict)
	ghost := newRunnable("team-a", "ghost")
	ghost.ResourceVersion = 1
	err = s.Tx(ctx, func(tx *Tx) error { return tx.Runnables().Update(ctx, ghost) })
	wantErr(t, err, ErrNotFound)

	err = s.Tx(ctx, func(tx *Tx) error { return tx.Runnables().Create(ctx, &Runnable{Namespace: "a", Name: "b"}) })
	if err == nil {
		t.Fatal("Runnables.Create accepted an empty UID")
	}
}

// Two writers that read the same ResourceVersion: exactly one wins.
func testRunnableOptimisticConcurrency(t *testing.T, eng engine) {
	s := eng.open(t)
	ctx := t.Context()
	r := newRunnable("team-a", "contended")
	mustTx(t, s, func(tx *Tx) error { return tx.Runnables().Create(ctx, r) })

	const writers = 8
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			mine := *r // every writer holds ResourceVersion 1
			mine.Phase = fmt.Sprintf("Writer%d", i)
			errs[i] = s.Tx(ctx, func(tx *Tx) error { return tx.Runnables().Update(ctx, &mine) })
		})
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, ErrConflict):
			t.Errorf("loser got %v, want ErrConflict", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d writers succeeded, want exactly 1", won)
	}
	mustRead(t, s, func(tx *Tx) error {
		got, err := tx.Runnables().GetByUID(ctx, r.UID)
		if err == nil && got.ResourceVersion != 2 {
			t.Errorf("ResourceVersion = %d, want 2", got.ResourceVersion)
		}
		return err
	})
}

// Runnables.Delete removes a runnable and its attempts only while it is at
// the version the caller read.
func testDeleteRunnable(t *testing.T, eng engine) {
	s := eng.open(t)
	ctx := t.Context()
	r := newRunnable("team-a", "removed")
	mustTx(t, s, func(tx *Tx) error {
		if err := tx.Runnables().Create(ctx, r); err != nil {
			return err
		}
		return tx.Attempts().Put(ctx, &Attempt{RunnableUID: r.UID, Number: 1, Cluster: "dc1", StartedAt: time.Now()})
	})
	err := s.Tx(ctx, func(tx *Tx) error { return tx.Runnables().Delete(ctx, r.UID, r.ResourceVersion+1) })
	wantErr(t, err, ErrConflict)
	mustTx(t, s, func(tx *Tx) error { return tx.Runnables().Delete(ctx, r.UID, r.ResourceVersion) })
	mustRead(t, s, func(tx *Tx) error {
		if _, err := tx.Runnables().GetByUID(ctx, r.UID); !errors.Is(err, ErrNotFound) {
			t.Errorf("after delete: %v, want ErrNotFound", err)
		}
		attempts, err := tx.Attempts().List(ctx, r.UID)
		if len(attempts) != 0 {
			t.Errorf("attempts left after delete: %d", len(attempts))
		}
		return err
	})
	err = s.Tx(ctx, func(tx *Tx) error { return tx.Runnables().Delete(ctx, r.UID, r.ResourceVersion) })
	wantErr(t, err, ErrNotFound)
}

func testListRunnables(t *testing.T, eng engine) {
	s := eng.open(t)
	ctx := t.Context()
	phases := []string{"Queued", "Running", "Succeeded"}
	mustTx(t, s, func(tx *Tx) error {
		for i := range 30 {
			r := newRunnable(fmt.Sprintf("ns-%d", i%3), fmt.Sprintf("r-%02d", i))
			r.Phase = phases[i%len(phases)]
			r.Cluster = fmt.Sprintf("dc%d", i%2)
			if err := tx.Runnables().Create(ctx, r); err != nil {
				return err
			}
		}
		return nil
	})

	count := func(f RunnableFilter) int {
		t.Helper()
		n := 0
		mustRead(t, s, func(tx *Tx) error {
			for {
				items, next, err := tx.Runnables().List(ctx, f)
				if err != nil {
					return err
				}
				for _, it := range items {
					if f.Namespace != "" && it.Namespace != f.Namespace || f.Phase != "" && it.Phase != f.Phase ||
						f.Cluster != "" && it.Cluster != f.Cluster {
						t.Errorf("filter %+v returned %s/%s (%s, %s)", f, it.Namespace, it.Name, it.Phase, it.Cluster)
					}
				}
				n += len(items)
				if next == "" {
					return nil
				}
				f.Continue = next
			}
		})
		return n
	}
	for _, tc := range []struct {
		f    RunnableFilter
		want int
	}{
		{RunnableFilter{}, 30},
		{RunnableFilter{Limit: 4}, 30},
		{RunnableFilter{Namespace: "ns-1"}, 10},
		{RunnableFilter{Namespace: "ns-1", Limit: 3}, 10},
		{RunnableFilter{Phase: "Running"}, 10},
		{RunnableFilter{Cluster: "dc0", Limit: 2}, 15},
		// i%3 == 0 and i%2 == 1: i in {3, 9, 15, 21, 27}
		{RunnableFilter{Namespace: "ns-0", Cluster: "dc1"}, 5},
		{RunnableFilter{Namespace: "ns-0", Phase: "Queued", Cluster: "dc1", Limit: 1}, 5},
		{RunnableFilter{Namespace: "nobody"}, 0},
	} {
		if got := count(tc.f); got != tc.want {
			t.Errorf("filter %+v: %d items, want %d", tc.f, got, tc.want)
		}
	}

	mustRead(t, s, func(tx *Tx) error {
		// An exactly full last page has no next token, so clients never
		// fetch an empty page.
		items, next, err := tx.Runnables().List(ctx, RunnableFilter{Namespace: "ns-2", Limit: 10})
		if err != nil {
			return err
		}
		if len(items) != 10 || next != "" {
			t.Errorf("exact page: %d items, next %q", len(items), next)
		}
		// Order is (namespace, name).
		items, _, err = tx.Runnables().List(ctx, RunnableFilter{})
		if err != nil {
			return err
		}
		for i := 1; i < len(items); i++ {
			a, b := items[i-1], items[i]
			if a.Namespace > b.Namespace || a.Namespace == b.Namespace && a.Name >= b.Name {
				t.Errorf("out of order: %s/%s before %s/%s", a.Namespace, a.Name, b.Namespace, b.Name)
			}
		}
		for _, bad := range []string{"!!!", encodeContinue("a", "b")[1:], "WzFd" /* [1] */, "bnVsbA" /* null */} {
			_, _, err := tx.Runnables().List(ctx, RunnableFilter{Continue: bad})
			wantErr(t, err, ErrBadContinue)
		}
		return nil
	})

	for _, tc := range []struct{ in, want int }{{0, 500}, {-1, 500}, {1, 1}, {1000, 1000}, {5000, 1000}} {
		if got := pageLimit(tc.in); got != tc.want {
			t.Errorf("pageLimit(%d) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// Keyset pagination: rows inserted between pages never make a page repeat
// or skip a row that was there from the start.
func testListRunnablesStableUnderInserts(t *testing.T, eng engine) {
	s := eng.open(t)
	ctx := t.Context()
	original := map[string]bool{}
	mustTx(t, s, func(tx *Tx) error {
		for i := range 40 {
			r := newRunnable("ns", fmt.Sprintf("r-%03d", i*10))
			original[r.Name] = false
			if err := tx.Runnables().Create(ctx, r); err != nil {
				return err
			}
		}
		return nil
	})

	seen := map[string]bool{}
	var last string
	f := RunnableFilter{Limit: 7}
	for page := 0; ; page++ {
		var items []*Runnable
		var next string
		mustRead(t, s, func(tx *Tx) error {
			var err error
			items, next, err = tx.Runnables().List(ctx, f)
			return err
		})
		for _, it := range items {
			if seen[it.Name] {
				t.Fatalf("page %d repeats %s", page, it.Name)
			}
			if it.Name <= last {
				t.Fatalf("page %d goes backwards: %s after %s", page, it.Name, last)
			}
			seen[it.Name], last = true, it.Name
		}
		if next == "" {
			break
		}
		// Between pages, insert rows before the cursor, just after it and
		// at the end.
		mustTx(t, s, func(tx *Tx) error {
			for _, name := range []string{
				fmt.Sprintf("a-%02d", page), // before everything
				last + "-x",                 // right after the cursor
				fmt.Sprintf("z-%02d", page), // after everything
			} {
				if err := tx.Runnables().Create(ctx, newRunnable("ns", name)); err != nil {
					return err
				}
			}
			return nil
		})
		f.Continue = next
	}
	for name := range original {
		if !seen[name] {
			t.Errorf("row %s present from the start was skipped", name)
		}
	}
}

func testAttempts(t *testing.T, eng engine) {
	s := eng.open(t)
	ctx := t.Context()
	r := newRunnable("team-a", "flink")
	start := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	mustTx(t, s, func(tx *Tx) error {
		if err := tx.Runnables().Create(ctx, r); err != nil {
			return err
		}
		for _, n := range []int{2, 1} {
			if err := tx.Attempts().Put(ctx, &Attempt{RunnableUID: r.UID, Number: n, Cluster: fmt.Sprintf("dc%d", n),
				ObjectUID: fmt.Sprintf("obj-%d", n), StartedAt: start.Add(time.Duration(n) * time.Minute)}); err != nil {
				return err
			}
		}
		return nil
	})
	ended := start.Add(time.Hour)
	first := &Attempt{RunnableUID: r.UID, Number: 1, Cluster: "dc1", ObjectUID: "obj-1", StartedAt: start.Add(time.Minute),
		EndedAt: &ended, Result: "Evicted", Reason: "ClusterUnreachable", Message: "lease expired",
		CarriedIn: map[string]string{"flink.apache.org/job-id": "44cc", "restorePath": "s3://cp/44cc/chk-3"},
		Reported:  map[string]string{"flink.apache.org/job-id": "9f1e"},
		Note:      "attempt 1 never ran Healthy"}
	mustTx(t, s, func(tx *Tx) error {
		if err := tx.Attempts().Put(ctx, first); err != nil {
			return err
		}
		// Unknown runnable: ErrNotFound, and the transaction carries on.
		wantErr(t, tx.Attempts().Put(ctx, &Attempt{RunnableUID: "nope", Number: 1, StartedAt: start}), ErrNotFound)
		_, err := tx.Runnables().GetByUID(ctx, r.UID)
		return err
	})
	mustRead(t, s, func(tx *Tx) error {
		got, err := tx.Attempts().List(ctx, r.UID)
		if err != nil {
			return err
		}
		if len(got) != 2 || got[0].Number != 1 || got[1].Number != 2 {
			t.Fatalf("Attempts.List = %+v, want numbers 1, 2", got)
		}
		if !reflect.DeepEqual(got[0], first) {
			t.Errorf("upserted attempt:\n got %+v\nwant %+v", got[0], first)
		}
		if got[1].EndedAt != nil || got[1].Result != "" {
			t.Errorf("open attempt: %+v", got[1])
		}
		none, err := tx.Attempts().List(ctx, "nope")
		if err != nil || len(none) != 0 {
			t.Errorf("Attempts.List(unknown) = %v, %v", none, err)
		}
		return nil
	})
}

// The time until which a create can land is recorded only on an open
// attempt, survives the attempt's other writes, and reads back under lock.
func testCreateLandedBy(t *testing.T, eng engine) {
	s := eng.open(t)
	ctx := t.Context()
	r := newRunnable("team-a", "late")
	start := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	a := &Attempt{RunnableUID: r.UID, Number: 1, Cluster: "dc1", StartedAt: start}
	mustTx(t, s, func(tx *Tx) error {
		if err := tx.Runnables().Create(ctx, r); err != nil {
			return err
		}
		return tx.Attempts().Put(ctx, a)
	})
	landed := start.Add(30 * time.Second)
	// The submitter's write of the created object, from a copy read
	// before the mark, keeps it.
	created := *a
	created.ObjectUID = "obj-1"
	mustTx(t, s, func(tx *Tx) error {
		ok, err := tx.Attempts().SetCreateLandedBy(ctx, r.UID, 1, landed)
		if err != nil || !ok {
			t.Errorf("Attempts.SetCreateLandedBy on the open attempt = %v, %v; want true", ok, err)
		}
		return tx.Attempts().Put(ctx, &created)
	})
	mustTx(t, s, func(tx *Tx) error {
		got, err := tx.Attempts().LockCreateLandedBy(ctx, r.UID, 1)
		if err != nil || got == nil || !got.Equal(landed) {
			t.Errorf("Attempts.LockCreateLandedBy = %v, %v; want %s", got, err, landed)
		}
		_, err = tx.Attempts().LockCreateLandedBy(ctx, r.UID, 2)
		wantErr(t, err, ErrNotFound)
		ended := created
		end := start.Add(time.Minute)
		ended.EndedAt, ended.Result = &end, "Evicted"
		return tx.Attempts().Put(ctx, &ended)
	})
	mustTx(t, s, func(tx *Tx) error {
		ok, err := tx.Attempts().SetCreateLandedBy(ctx, r.UID, 1, landed.Add(time.Hour))
		if err != nil || ok {
			t.Errorf("Attempts.SetCreateLandedBy on the ended attempt = %v, %v; want false", ok, err)
		}
		return nil
	})
	mustRead(t, s, func(tx *Tx) error {
		got, err := tx.Attempts().List(ctx, r.UID)
		if err != nil {
			return err
		}
		if got[0].CreateLandedBy == nil || !got[0].CreateLandedBy.Equal(landed) || got[0].ObjectUID != "obj-1" {
			t.Errorf("attempt %+v, want object obj-1 and the create landing by %s", got[0], landed)
		}
		return nil
	})
}

// Times come back in UTC with microsecond precision on both engines,
// whatever zone and precision they went in with.
func testTimestamps(t *testing.T, eng engine) {
	s := eng.open(t)
	ctx := t.Context()
	r := newRunnable("team-a", "times")
	zone := time.FixedZone("UTC+5:30", 5*3600+1800)
	in := time.Date(2026, 7, 1, 12, 30, 45, 123456789, zone)
	mustTx(t, s, func(tx *Tx) error {
		if err := tx.Runnables().Create(ctx, r); err != nil {
			return err
		}
		return tx.Attempts().Put(ctx, &Attempt{RunnableUID: r.UID, Number: 1, StartedAt: in, EndedAt: &in})
	})
	mustRead(t, s, func(tx *Tx) error {
		got, err := tx.Attempts().List(ctx, r.UID)
		if err != nil {
			return err
		}
		want := time.Date(2026, 7, 1, 7, 0, 45, 123456000, time.UTC)
		if got[0].StartedAt != want || *got[0].EndedAt != want {
			t.Errorf("round trip of %v gave %v / %v, want %v", in, got[0].StartedAt, *got[0].EndedAt, want)
		}
		if got[0].StartedAt.Location() != time.UTC {
			t.Errorf("location %v, want UTC", got[0].StartedAt.Location())
		}
		return nil
	})
}
