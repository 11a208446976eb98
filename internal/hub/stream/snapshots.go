package stream

import (
	"strconv"
	"time"
)

// SnapshotChunk is one message of a snapshot on SnapshotsSubject. A
// snapshot is complete when the ingester holds chunks 0..Total-1 of the
// same ID; only then is it applied, because a partial list would make
// present objects look like zombies.
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

// ChunkSnapshot splits lists into the messages of one snapshot, each under
// MaxMessage.
func ChunkSnapshot(cluster, id string, takenAt time.Time, lists []KindList) []SnapshotChunk {
	return chunkSnapshot(cluster, id, takenAt, lists, MaxMessage)
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
