package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/purser-io/purser/internal/hub/seal/sealtest"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
)

// Two controllers on one database: one leads through the lease, and
// stopping it hands the lease to the other, which released it in turn.
func TestControllerLeaderElection(t *testing.T) {
	// Long enough that a slow database write never costs the holder its
	// term; the handover does not wait for it, the holder releases.
	const leaseDuration = 5 * time.Second
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			t.Parallel()
			dsn := eng.NewDSN(t)
			sealer, _ := sealtest.New(t)
			type replica struct {
				cancel context.CancelFunc
				done   chan error
			}
			replicas := map[string]*replica{}
			var observer *store.Store
			for _, id := range []string{"a", "b"} {
				s, err := store.Open(t.Context(), dsn)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = s.Close() })
				observer = s
				ctx, cancel := context.WithCancel(context.Background())
				r := &replica{cancel: cancel, done: make(chan error, 1)}
				replicas[id] = r
				cfg := Config{Store: s, Sealer: sealer, Identity: id, LeaseDuration: leaseDuration, Registerer: prometheus.NewRegistry()}
				go func() { r.done <- Run(ctx, cfg) }()
				t.Cleanup(cancel)
			}
			stop := func(id string) {
				t.Helper()
				replicas[id].cancel()
				select {
				case err := <-replicas[id].done:
					if err != nil {
						t.Fatalf("%s: Run: %v", id, err)
					}
				case <-time.After(30 * time.Second):
					t.Fatalf("%s: Run did not return", id)
				}
			}
			// waitHolder waits for the lease to name a live holder other
			// than not.
			waitHolder := func(not string) store.Lease {
				t.Helper()
				for range 300 {
					var l store.Lease
					err := observer.Read(t.Context(), func(tx *store.Tx) (err error) {
						l, err = tx.Leases().Get(t.Context(), LeaseName)
						return err
					})
					if err != nil && !errors.Is(err, store.ErrNotFound) {
						t.Fatal(err)
					}
					if err == nil && l.Holder != not && l.ExpiresAt.Sub(l.RenewedAt) == leaseDuration {
						return l
					}
					time.Sleep(100 * time.Millisecond)
				}
				t.Fatalf("no replica other than %q took the lease", not)
				return store.Lease{}
			}
			first := waitHolder("")
			stop(first.Holder)
			second := waitHolder(first.Holder)
			if second.Transitions != first.Transitions+1 {
				t.Errorf("lease %+v after %+v", second, first)
			}
			stop(second.Holder)
		})
	}
}
