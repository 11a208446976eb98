package stream

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// TestChunkSnapshot: 100,000 objects split into messages under the stream's
// limit, every item exactly once, in order.
func TestChunkSnapshot(t *testing.T) {
	var items [][2]string
	for i := range 100000 {
		items = append(items, [2]string{fmt.Sprintf("%08d-aaaa-bbbb-cccc-dddddddddddd", i), fmt.Sprint(1000000 + i)})
	}
	lists := []KindList{
		{APIVersion: "v1", Kind: "ConfigMap", ListResourceVersion: "5", Items: items[:70000]},
		{APIVersion: "v1", Kind: "Secret", ListResourceVersion: "6", Items: [][2]string{}},
		{APIVersion: "batch/v1", Kind: "Job", ListResourceVersion: "7", Items: items[70000:]},
	}
	chunks := ChunkSnapshot("c", "id", time.Now(), lists)
	got := map[string][]string{}
	kinds := map[string]bool{}
	for i, c := range chunks {
		b, _ := json.Marshal(c)
		if len(b) >= 1<<20 {
			t.Errorf("chunk %d is %d bytes", i, len(b))
		}
		if c.Index != i || c.Total != len(chunks) {
			t.Errorf("chunk %d: index %d total %d", i, c.Index, c.Total)
		}
		for _, l := range c.Kinds {
			kinds[l.Kind] = true
			for _, it := range l.Items {
				got[l.Kind] = append(got[l.Kind], it[0])
			}
		}
	}
	if len(got["ConfigMap"]) != 70000 || len(got["Job"]) != 30000 || !kinds["Secret"] {
		t.Fatalf("lost items: %d ConfigMaps, %d Jobs, Secret listed %v", len(got["ConfigMap"]), len(got["Job"]), kinds["Secret"])
	}
	t.Logf("100,000 objects in %d chunks", len(chunks))
}
