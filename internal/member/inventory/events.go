package inventory

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/platform/resourceversion"
)

// eventStage turns a batch of events into at most one change per object:
// the newest by resourceVersion, a deletion winning a tie (a tombstone's
// final state carries the version of the last update it follows).
type eventStage struct {
	health      HealthFunc
	fingerprint func([]byte) string // Config.Fingerprint
	log         *slog.Logger
}

type eventWork struct {
	rows  []store.InventoryRow
	tombs []store.InventoryTombstone
	// lastEvent is, per cluster, the time of its newest event in the
	// batch: how fresh that cluster's records now are.
	lastEvent map[string]time.Time
}

func (s *eventStage) collect(msgs []jetstream.Msg) (any, []jetstream.Msg) {
	type key struct{ cluster, uid string }
	newest := map[key]*stream.Event{}
	var order []key
	ready := make([]jetstream.Msg, 0, len(msgs))
	for _, m := range msgs {
		ev, ok := s.decode(m)
		if !ok {
			continue
		}
		ready = append(ready, m)
		k := key{ev.Cluster, ev.UID}
		prev, seen := newest[k]
		if !seen {
			order = append(order, k)
			newest[k] = ev
			continue
		}
		if newerEvent(ev, prev) {
			newest[k] = ev
		}
	}
	w := eventWork{lastEvent: map[string]time.Time{}}
	for _, ev := range newest {
		if ev.Time.After(w.lastEvent[ev.Cluster]) {
			w.lastEvent[ev.Cluster] = ev.Time
		}
	}
	// Tombstones age by the ingesters' clock, which prunes them, not by
	// the agent's.
	now := time.Now()
	for _, k := range order {
		ev := newest[k]
		if ev.Type == stream.EventDeleted {
			w.tombs = append(w.tombs, store.InventoryTombstone{Cluster: ev.Cluster, UID: ev.UID,
				ResourceVersion: ev.ResourceVersion, DeletedAt: now})
			continue
		}
		w.rows = append(w.rows, s.row(ev))
	}
	return &w, ready
}

// newerEvent reports whether a should win over b for the same object.
func newerEvent(a, b *stream.Event) bool {
	c, ok := resourceversion.Compare(a.ResourceVersion, b.ResourceVersion)
	switch {
	case !ok:
		return !a.Time.Before(b.Time) // no order by version: the later sighting
	case c != 0:
		return c > 0
	}
	return a.Type == stream.EventDeleted
}

// decode reads one event; a message that can never be applied is
// terminated so that it is not redelivered forever, and logged.
func (s *eventStage) decode(m jetstream.Msg) (*stream.Event, bool) {
	ev := &stream.Event{}
	cluster, ok := stream.ClusterOf(m.Subject())
	err := json.Unmarshal(m.Data(), ev)
	if !ok || err != nil || ev.UID == "" || ev.Kind == "" ||
		(ev.Type != stream.EventAdded && ev.Type != stream.EventModified && ev.Type != stream.EventDeleted) {
		s.log.Error("dropping malformed event", "subject", m.Subject(), "error", err)
		_ = m.Term()
		return nil, false
	}
	// The subject, not the payload, names the cluster: it is what the
	// stream's permissions let an agent publish on.
	ev.Cluster = cluster
	return ev, true
}

func (s *eventStage) row(ev *stream.Event) store.InventoryRow {
	obj := []byte(ev.Object)
	if stream.IsSecret(ev.APIVersion, ev.Kind) {
		// The agent never sends data; this guards against an agent that
		// does (an old or foreign one), because the inventory must not
		// hold it whatever arrives.
		obj = secretRecord(obj, s.fingerprint)
	}
	if len(obj) == 0 {
		obj = nil
	}
	health, phase := "Unknown", ""
	if obj != nil {
		health, phase = s.health(ev.APIVersion, ev.Kind, obj)
	}
	return store.InventoryRow{
		Cluster: ev.Cluster, APIVersion: ev.APIVersion, Kind: ev.Kind, Namespace: ev.Namespace, Name: ev.Name,
		UID: ev.UID, ResourceVersion: ev.ResourceVersion, Labels: ev.Labels, Health: health, Phase: phase,
		ObservedAt: ev.Time, Object: obj,
	}
}

// KeyedDataField replaces, in a Secret's record, the digest of its data
// the agent sent (stream.DataHashField): the digest keyed with the hub's
// key, so that a change of the data shows without the record being a
// hash anyone could test guesses against.
const KeyedDataField = "dataHMAC"

// secretRecord is what the inventory keeps of a Secret: never data or
// stringData, and the agent's digest only as keyed by fingerprint.
func secretRecord(obj []byte, fingerprint func([]byte) string) []byte {
	if len(obj) == 0 {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(obj, &m); err != nil {
		return nil // not an object we can vouch for: store metadata only
	}
	delete(m, "data")
	delete(m, "stringData")
	digest, _ := m[stream.DataHashField].(string)
	delete(m, stream.DataHashField)
	delete(m, KeyedDataField) // only this ingester's own key counts
	if digest != "" && fingerprint != nil {
		m[KeyedDataField] = fingerprint([]byte("inventory secret data " + digest))
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil
	}
	return b
}

func (s *eventStage) apply(ctx context.Context, tx *store.Tx, work any) error {
	w := work.(*eventWork)
	stored, err := tx.UpsertInventory(ctx, w.rows)
	if err != nil {
		return err
	}
	if err := observeRunnables(ctx, tx, stored); err != nil {
		return err
	}
	if err := reopenCleanups(ctx, tx, stored); err != nil {
		return err
	}
	for cluster, at := range w.lastEvent {
		if err := tx.TouchAgent(ctx, cluster, nil, nil, &at); err != nil {
			return err
		}
	}
	_, err = tx.DeleteInventory(ctx, w.tombs)
	return err
}
