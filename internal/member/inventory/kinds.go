package inventory

import (
	"context"
	"encoding/json"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/stream"
)

// kindsLoop copies the kinds each cluster serves, with their scope, from
// the agents' reports in stream.KindsBucket into the database, where the
// API reads a kind's scope before it accepts an object. Every replica may
// do it: a report older than the recorded one changes nothing.
func (in *Ingester) kindsLoop(ctx context.Context) {
	in.followBucket(ctx, stream.KindsBucket, "served kinds", in.recordKinds)
}

// recordKinds stores one cluster's served kinds; a malformed report is
// logged and skipped.
func (in *Ingester) recordKinds(ctx context.Context, e jetstream.KeyValueEntry) error {
	var report stream.ServedKinds
	if err := json.Unmarshal(e.Value(), &report); err != nil || report.Time.IsZero() {
		in.log.Error("dropping malformed served kinds", "cluster", e.Key(), "error", err)
		return nil
	}
	kinds := make([]store.ServedKind, 0, len(report.Kinds))
	for _, k := range report.Kinds {
		if k.Kind == "" || k.Version == "" {
			continue
		}
		kinds = append(kinds, store.ServedKind{Group: k.Group, Version: k.Version, Kind: k.Kind, Namespaced: k.Namespaced})
	}
	// Ordered by the NATS server's clock, as heartbeats are: an agent
	// whose clock was once ahead must not have its later reports ignored.
	at := e.Created()
	if at.IsZero() {
		at = report.Time
	}
	// The key, not the payload, names the cluster, as the subject does for
	// events: it is what an agent's permissions cover.
	return in.cfg.Store.Tx(ctx, func(tx *store.Tx) error {
		return tx.ReplaceClusterKinds(ctx, e.Key(), at, kinds)
	})
}
