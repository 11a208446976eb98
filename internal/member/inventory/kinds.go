package inventory

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/stream"
)

// The served kinds pipeline copies the kinds each cluster serves, with
// their scope, from the agents' reports in stream.KindsBucket into the
// database, where the API reads a kind's scope before it accepts an
// object: kindsConverter, then recordKinds. Every replica may do it: a
// report older than the recorded one changes nothing.

// kindsConverter decodes the agents' reports of served kinds.
type kindsConverter struct {
	log *slog.Logger
}

// servedKinds is one cluster's report.
type servedKinds struct {
	cluster string
	at      time.Time
	kinds   []store.ServedKind
}

// convert logs and skips a malformed report.
func (c *kindsConverter) convert(entries []jetstream.KeyValueEntry) ([]servedKinds, []jetstream.KeyValueEntry) {
	var reports []servedKinds
	var ready []jetstream.KeyValueEntry
	for _, e := range entries {
		var report stream.ServedKinds
		if err := json.Unmarshal(e.Value(), &report); err != nil || report.Time.IsZero() {
			c.log.Error("dropping malformed served kinds", "cluster", e.Key(), "error", err)
			continue
		}
		kinds := make([]store.ServedKind, 0, len(report.Kinds))
		for _, k := range report.Kinds {
			if k.Kind == "" || k.Version == "" {
				continue
			}
			kinds = append(kinds, store.ServedKind{Group: k.Group, Version: k.Version, Kind: k.Kind, Namespaced: k.Namespaced})
		}
		// Ordered by the NATS server's clock, as heartbeats are: an agent
		// whose clock was once ahead must not have its later reports
		// ignored.
		at := e.Created()
		if at.IsZero() {
			at = report.Time
		}
		// The key, not the payload, names the cluster, as the subject does
		// for events: it is what an agent's permissions cover.
		reports = append(reports, servedKinds{cluster: e.Key(), at: at, kinds: kinds})
		ready = append(ready, e)
	}
	return reports, ready
}

// recordKinds is the served kinds' sink.
func recordKinds(ctx context.Context, tx *store.Tx, reports []servedKinds) (struct{}, error) {
	for _, r := range reports {
		if err := tx.Kinds().Replace(ctx, r.cluster, r.at, r.kinds); err != nil {
			return struct{}{}, err
		}
	}
	return struct{}{}, nil
}
