package inventory

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/platform/resourceversion"
)

// The events pipeline: eventConverter, then storeEvents, then (in the
// same transaction) moveRunnables, markFencedDeletions, reopenCleanups and
// touchAgentsByEvents.

// eventConverter turns a batch of events into at most one change per
// object: the newest by resourceVersion, a deletion winning a tie (a
// tombstone's final state carries the version of the last update it
// follows).
type eventConverter struct {
	health      Judge
	fingerprint func([]byte) string // Config.Fingerprint
	log         *slog.Logger
}

// eventBatch is the changes of a batch of events.
type eventBatch struct {
	rows  []store.InventoryRow
	tombs []store.InventoryTombstone
	// lastEvent is, per cluster, the time of its newest event in the
	// batch: how fresh that cluster's records now are.
	lastEvent map[string]time.Time
	// fenced are the deletions of purser's objects that their agent
	// marked fenced before deleting them (markFencedDeletions).
	fenced []fencedDeletion
}

// fencedDeletion is an object of a runnable that its agent deleted when
// its lease expired (a kind with no suspend of its own).
type fencedDeletion struct {
	cluster, uid, kind, namespace, name string
	labels                              map[string]string
}

func (c *eventConverter) convert(msgs []jetstream.Msg) (eventBatch, []jetstream.Msg) {
	type key struct{ cluster, uid string }
	newest := map[key]*decoded{}
	var order []key
	ready := make([]jetstream.Msg, 0, len(msgs))
	for _, m := range msgs {
		d, ok := c.decode(m)
		if !ok {
			continue
		}
		ready = append(ready, m)
		k := key{d.ev.Cluster, d.ev.UID}
		prev, seen := newest[k]
		if !seen {
			order = append(order, k)
			newest[k] = d
			continue
		}
		if newerEvent(d.ev, prev.ev) {
			newest[k] = d
		}
	}
	b := eventBatch{lastEvent: map[string]time.Time{}}
	for _, d := range newest {
		ev := d.ev
		if ev.Time.After(b.lastEvent[ev.Cluster]) {
			b.lastEvent[ev.Cluster] = ev.Time
		}
	}
	// Tombstones age by the ingesters' clock, which prunes them, not by
	// the agent's.
	now := time.Now()
	for _, k := range order {
		ev := newest[k].ev
		if ev.Type == stream.EventDeleted {
			b.tombs = append(b.tombs, store.InventoryTombstone{Cluster: ev.Cluster, UID: ev.UID,
				ResourceVersion: ev.ResourceVersion, DeletedAt: now})
			// The final state of a deleted object says whether fencing
			// deleted it; the update that marked it is often in the same
			// batch, and loses to the deletion above.
			if ev.Labels[v1alpha1.LabelRunnableUID] != "" {
				if _, fenced := objectStatus(ev.Object); fenced {
					b.fenced = append(b.fenced, fencedDeletion{cluster: ev.Cluster, uid: ev.UID, kind: ev.Kind,
						namespace: ev.Namespace, name: ev.Name, labels: ev.Labels})
				}
			}
			continue
		}
		b.rows = append(b.rows, c.row(newest[k]))
	}
	return b, ready
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

// decoded is an event and, when its kind is judged from its object, the
// object decoded in the same pass (stream.DecodeEvent).
type decoded struct {
	ev  *stream.Event
	obj map[string]any
}

// decode reads one event; a message that can never be applied is
// terminated so that it is not redelivered forever, and logged.
func (c *eventConverter) decode(m jetstream.Msg) (*decoded, bool) {
	cluster, ok := stream.ClusterOf(m.Subject())
	ev, obj, err := stream.DecodeEvent(m.Data(), func(apiVersion, kind string) bool {
		_, _, byKind := c.health.ByKind(apiVersion, kind)
		return !byKind && !stream.IsSecret(apiVersion, kind)
	})
	if !ok || err != nil || ev.UID == "" || ev.Kind == "" ||
		(ev.Type != stream.EventAdded && ev.Type != stream.EventModified && ev.Type != stream.EventDeleted) {
		c.log.Error("dropping malformed event", "subject", m.Subject(), "error", err)
		_ = m.Term()
		return nil, false
	}
	// The subject, not the payload, names the cluster: it is what the
	// stream's permissions let an agent publish on.
	ev.Cluster = cluster
	return &decoded{ev: ev, obj: obj}, true
}

func (c *eventConverter) row(d *decoded) store.InventoryRow {
	ev := d.ev
	obj := []byte(ev.Object)
	if stream.IsSecret(ev.APIVersion, ev.Kind) {
		// The agent never sends data; this guards against an agent that
		// does (an old or foreign one), because the inventory must not
		// hold it whatever arrives.
		obj = secretRecord(obj, c.fingerprint)
	}
	if len(obj) == 0 {
		obj = nil
	}
	health, phase := "Unknown", ""
	if obj != nil {
		health, phase = c.judge(ev, d.obj)
	}
	return store.InventoryRow{
		Cluster: ev.Cluster, APIVersion: ev.APIVersion, Kind: ev.Kind, Namespace: ev.Namespace, Name: ev.Name,
		UID: ev.UID, ResourceVersion: ev.ResourceVersion, Labels: ev.Labels, Health: health, Phase: phase,
		ObservedAt: ev.Time, Object: obj,
	}
}

// judge gives an event's object its health: by its kind alone when that
// decides, from the object decoded with the event otherwise. An object
// the decoder left as bytes (written before its kind) is decoded here; one
// that is not a JSON object is Unknown, and Pending, since its state is
// not known.
func (c *eventConverter) judge(ev *stream.Event, obj map[string]any) (health, phase string) {
	if health, phase, ok := c.health.ByKind(ev.APIVersion, ev.Kind); ok {
		return health, phase
	}
	if obj == nil && json.Unmarshal(ev.Object, &obj) != nil || obj == nil {
		return "Unknown", "Pending"
	}
	return c.health.Judge(obj)
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

// storeEvents is the events' sink: it writes each change unless the
// record is newer, and returns the rows it wrote. Only those may move a
// runnable or reopen a clean-up: an older state redelivered is not among
// them, so it never moves a runnable back.
func storeEvents(ctx context.Context, tx *store.Tx, b eventBatch) ([]store.InventoryRow, error) {
	if err := tx.Inventory().LockClusters(ctx, b.clusters()); err != nil {
		return nil, err
	}
	stored, err := tx.Inventory().Upsert(ctx, b.rows)
	if err != nil {
		return nil, err
	}
	if _, err := tx.Inventory().Delete(ctx, b.tombs); err != nil {
		return nil, err
	}
	return stored, nil
}

// touchAgentsByEvents records how fresh each cluster's records are, by
// its newest event in the batch.
func touchAgentsByEvents(ctx context.Context, tx *store.Tx, b eventBatch, _ []store.InventoryRow) error {
	touches := make([]store.AgentFreshness, 0, len(b.lastEvent))
	for _, cluster := range store.SortedClusters(slices.Collect(maps.Keys(b.lastEvent))) {
		at := b.lastEvent[cluster]
		touches = append(touches, store.AgentFreshness{Cluster: cluster, LastEvent: &at})
	}
	return tx.Agents().TouchAll(ctx, touches)
}

// clusters names every cluster the batch changes: those of its records,
// its tombstones and its agents' freshness.
func (b eventBatch) clusters() []string {
	names := make([]string, 0, len(b.lastEvent))
	for _, r := range b.rows {
		names = append(names, r.Cluster)
	}
	for _, t := range b.tombs {
		names = append(names, t.Cluster)
	}
	for c := range b.lastEvent {
		names = append(names, c)
	}
	return names
}
