package placement

import (
	"testing"
	"time"
)

func TestQueuePositions(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	entries := []QueueEntry{
		{UID: "a-old", Namespace: "a", Share: 0.6, Since: at(0)},
		{UID: "a-new", Namespace: "a", Share: 0.6, Since: at(5)},
		{UID: "b-lone", Namespace: "b", Share: 0.1, Since: at(9)},
		{UID: "urgent", Namespace: "a", Share: 0.6, Priority: 10, Since: at(20)},
		{UID: "c-tie", Namespace: "c", Share: 0.6, Since: at(3)},
	}
	got := QueuePositions(entries)
	// Priority first; then b, furthest below its share; then, at equal
	// shares, by how long each has waited.
	want := map[string]int{"urgent": 1, "b-lone": 2, "a-old": 3, "c-tie": 4, "a-new": 5}
	for uid, p := range want {
		if got[uid] != p {
			t.Errorf("%s at %d, want %d (all: %v)", uid, got[uid], p, got)
		}
	}
	if why := Ahead(entries[2], entries[0]); why != "namespace b at 10% of its fair share, a at 60%" {
		t.Errorf("Ahead(b, a) = %q", why)
	}
	if why := Ahead(entries[0], entries[2]); why != "" {
		t.Errorf("a goes before b: %q", why)
	}
}
