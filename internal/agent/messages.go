package agent

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
)

// Event types, as the watch API names them.
const (
	Added    = "ADDED"
	Modified = "MODIFIED"
	Deleted  = "DELETED"
)

// Event is the message published on stream.EventsSubject for every change
// the agent sees. It is a hint for the ingester, ordered by
// ResourceVersion, never trusted over a newer state.
type Event struct {
	Cluster         string            `json:"cluster"`
	APIVersion      string            `json:"apiVersion"`
	Kind            string            `json:"kind"`
	Namespace       string            `json:"namespace,omitempty"`
	Name            string            `json:"name"`
	UID             string            `json:"uid"`
	ResourceVersion string            `json:"resourceVersion"`
	Type            string            `json:"type"`
	Labels          map[string]string `json:"labels,omitempty"`
	// Time is when the agent saw the change, by its own clock.
	Time time.Time `json:"time"`
	// Object is the trimmed object; it is left out (and Truncated set)
	// when it would not fit in one stream message.
	Object    json.RawMessage `json:"object,omitempty"`
	Truncated bool            `json:"truncated,omitempty"`
}

// MsgID deduplicates republished events: the same object at the same
// version with the same change is one message however often it is sent.
func (e *Event) MsgID() string {
	return e.Cluster + "/" + e.UID + "/" + e.ResourceVersion + "/" + e.Type
}

// SnapshotChunk is one message of a snapshot. A snapshot is complete when
// the ingester holds chunks 0..Total-1 of the same ID; only then is it
// applied, because a partial list would make present objects look like
// zombies.
type SnapshotChunk struct {
	Cluster string     `json:"cluster"`
	ID      string     `json:"id"`
	Index   int        `json:"index"`
	Total   int        `json:"total"`
	TakenAt time.Time  `json:"takenAt"`
	Kinds   []KindList `json:"kinds"`
}

// MsgID makes a republished chunk a duplicate.
func (c *SnapshotChunk) MsgID() string {
	return c.Cluster + "/snapshot/" + c.ID + "/" + strconv.Itoa(c.Index)
}

// KindList is (part of) the list of one kind. A kind split over several
// chunks repeats its header in each; the ingester concatenates Items.
type KindList struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// ListResourceVersion: the cache was at least this new when listed.
	ListResourceVersion string `json:"listResourceVersion"`
	// Items are [uid, resourceVersion] pairs, as arrays to keep 100,000
	// objects within a few messages.
	Items [][2]string `json:"items"`
}

// Heartbeat is the value the agent puts under its cluster's key in
// stream.HeartbeatsBucket.
type Heartbeat struct {
	Cluster string `json:"cluster"`
	// Identity names the agent replica that sent it: the leader, when
	// several run.
	Identity string `json:"identity,omitempty"`
	// Time is when the agent sent it, by its own clock.
	Time time.Time `json:"time"`
	// Started is when this replica's current term of work began.
	Started time.Time `json:"started"`
	// LeaseSeconds is the agent's lease duration: this long after its last
	// acknowledged heartbeat it fences its cluster, suspending or deleting
	// the objects labelled purser.io/consistency=AtMostOne. The control
	// plane must not place them elsewhere sooner.
	LeaseSeconds float64 `json:"leaseSeconds,omitempty"`
	// Fenced counts the objects this replica suspended or deleted when
	// its lease had expired.
	Fenced int64 `json:"fenced,omitempty"`
	// Objects counts cached objects per "apiVersion/kind" being watched.
	Objects map[string]int `json:"objects"`
	// Pending is the number of events waiting to be published.
	Pending int `json:"pending"`
	// Resyncs counts full resyncs after the queue overflowed.
	Resyncs      int64     `json:"resyncs"`
	LastSnapshot time.Time `json:"lastSnapshot,omitzero"`
	// KubeAPI says whether the caches are synced and the kube-apiserver
	// answered the probe sent just before this beat (kubeapi.go); absent
	// from agents that predate it.
	KubeAPI *v1alpha1.AgentKubeAPI `json:"kubeAPI,omitempty"`
}

// maxMessage keeps every message under NATS's default 1 MiB payload limit
// with room for headers.
const maxMessage = 900 << 10

// ChunkSnapshot splits lists into the messages of one snapshot, each under
// the stream's message size.
func ChunkSnapshot(cluster, id string, takenAt time.Time, lists []KindList) []SnapshotChunk {
	return chunkSnapshot(cluster, id, takenAt, lists, maxMessage)
}

// chunkSnapshot splits lists into chunks whose encoding stays under limit
// bytes. Sizes are estimated per item (two quoted strings, brackets and
// commas), which is exact enough with the margin in limit.
func chunkSnapshot(cluster, id string, takenAt time.Time, lists []KindList, limit int) []SnapshotChunk {
	const headerCost = 256
	var (
		chunks []SnapshotChunk
		cur    = SnapshotChunk{Cluster: cluster, ID: id, TakenAt: takenAt}
		size   = headerCost
	)
	flush := func() {
		chunks = append(chunks, cur)
		cur = SnapshotChunk{Cluster: cluster, ID: id, TakenAt: takenAt}
		size = headerCost
	}
	for _, l := range lists {
		part := KindList{APIVersion: l.APIVersion, Kind: l.Kind, ListResourceVersion: l.ListResourceVersion, Items: [][2]string{}}
		size += headerCost
		for _, it := range l.Items {
			cost := len(it[0]) + len(it[1]) + 8
			if size+cost > limit && (len(part.Items) > 0 || len(cur.Kinds) > 0) {
				cur.Kinds = append(cur.Kinds, part)
				flush()
				part = KindList{APIVersion: l.APIVersion, Kind: l.Kind, ListResourceVersion: l.ListResourceVersion, Items: [][2]string{}}
				size += headerCost
			}
			part.Items = append(part.Items, it)
			size += cost
		}
		cur.Kinds = append(cur.Kinds, part)
	}
	flush()
	for i := range chunks {
		chunks[i].Index, chunks[i].Total = i, len(chunks)
	}
	return chunks
}

// kindKey names a tracked kind in logs and heartbeats.
func kindKey(apiVersion, kind string) string { return fmt.Sprintf("%s/%s", apiVersion, kind) }
