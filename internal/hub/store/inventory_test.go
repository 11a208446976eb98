package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
)

// TestInventory runs the inventory cases on each engine; they live apart
// from the main suite so that the inventory can change on its own.
func TestInventory(t *testing.T) {
	cases := []struct {
		name string
		fn   func(t *testing.T, eng engine)
	}{
		{"Ordering", testInventoryOrdering},
		{"Tombstones", testInventoryTombstones},
		{"Reconcile", testInventoryReconcile},
		{"List", testInventoryList},
		{"Selectors", testInventorySelectors},
	}
	for _, eng := range engines(t) {
		t.Run(eng.name, func(t *testing.T) {
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					tc.fn(t, eng)
				})
			}
		})
	}
}

func invRow(cluster, uid, rv string) InventoryRow {
	return InventoryRow{Cluster: cluster, APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "cm-" + uid,
		UID: uid, ResourceVersion: rv, Labels: map[string]string{"rv": rv}, Health: "Unknown",
		ObservedAt: time.Now(), Object: []byte(`{"rv":"` + rv + `"}`)}
}

// storedRV returns the stored version of uid, or "" when there is no record.
func storedRV(t *testing.T, s *Store, cluster, uid string) string {
	t.Helper()
	var rv string
	mustRead(t, s, func(tx *Tx) error {
		rows, _, err := tx.Inventory().List(t.Context(), InventoryFilter{Cluster: cluster, Name: "cm-" + uid})
		if err != nil || len(rows) == 0 {
			rv = ""
			return err
		}
		rv = rows[0].ResourceVersion
		if string(rows[0].Object) != `{"rv":"`+rv+`"}` || rows[0].Labels["rv"] != rv {
			t.Errorf("record %s at %s holds another state: %s %v", uid, rv, rows[0].Object, rows[0].Labels)
		}
		return nil
	})
	return rv
}

func upsert(t *testing.T, s *Store, rows ...InventoryRow) int {
	t.Helper()
	var written []InventoryRow
	mustTx(t, s, func(tx *Tx) (err error) { written, err = tx.Inventory().Upsert(t.Context(), rows); return err })
	return len(written)
}

func testInventoryOrdering(t *testing.T, eng engine) {
	s := eng.open(t)
	if n := upsert(t, s, invRow("c1", "a", "10"), invRow("c2", "a", "5")); n != 2 {
		t.Fatalf("first upsert wrote %d rows, want 2", n)
	}
	// Older, equal, then numerically newer though shorter as text is
	// not what matters: "9" < "10" as integers.
	for _, rv := range []string{"9", "10", "2"} {
		if n := upsert(t, s, invRow("c1", "a", rv)); n != 0 {
			t.Errorf("upsert at %s over 10 wrote %d rows", rv, n)
		}
	}
	if got := storedRV(t, s, "c1", "a"); got != "10" {
		t.Fatalf("after older upserts: %q, want 10", got)
	}
	upsert(t, s, invRow("c1", "a", "11"))
	if got := storedRV(t, s, "c1", "a"); got != "11" {
		t.Fatalf("after newer upsert: %q, want 11", got)
	}
	// The SQL guard alone, as when another ingester inserted the row
	// between this one's read and its write.
	mustTx(t, s, func(tx *Tx) error {
		_, err := tx.Inventory().write(t.Context(), []InventoryRow{invRow("c1", "a", "3")})
		return err
	})
	if got := storedRV(t, s, "c1", "a"); got != "11" {
		t.Fatalf("unguarded write of an older state: %q, want 11", got)
	}
	if got := storedRV(t, s, "c2", "a"); got != "5" {
		t.Fatalf("the same uid in another cluster changed: %q", got)
	}
}

func testInventoryTombstones(t *testing.T, eng engine) {
	s := eng.open(t)
	ctx := t.Context()
	upsert(t, s, invRow("c1", "a", "10"), invRow("c1", "b", "20"))
	mustTx(t, s, func(tx *Tx) error {
		// A deletion older than the record (impossible from a real
		// cluster, possible from a replay) leaves the record.
		n, err := tx.Inventory().Delete(ctx, []InventoryTombstone{
			{Cluster: "c1", UID: "a", ResourceVersion: "12", DeletedAt: time.Now()},
			{Cluster: "c1", UID: "b", ResourceVersion: "15", DeletedAt: time.Now()},
		})
		if n != 1 {
			t.Errorf("removed %d, want 1", n)
		}
		return err
	})
	if got := storedRV(t, s, "c1", "a"); got != "" {
		t.Errorf("deleted record still there at %s", got)
	}
	if got := storedRV(t, s, "c1", "b"); got != "20" {
		t.Errorf("record newer than its deletion: %q, want 20", got)
	}
	// A late ADDED of the deleted object must not resurrect it.
	if n := upsert(t, s, invRow("c1", "a", "10")); n != 0 {
		t.Errorf("late event resurrected a deleted object")
	}
	mustTx(t, s, func(tx *Tx) error {
		n, err := tx.Inventory().PruneTombstones(ctx, time.Now().Add(time.Minute))
		if n != 2 {
			t.Errorf("pruned %d tombstones, want 2", n)
		}
		return err
	})
}

func testInventoryReconcile(t *testing.T, eng engine) {
	s := eng.open(t)
	ctx := t.Context()
	before := time.Now().Add(-time.Minute)
	old := invRow("c1", "zombie", "50")
	old.ObservedAt = before
	other := invRow("c1", "other-kind", "10")
	other.Kind = "Secret"
	upsert(t, s, invRow("c1", "live", "40"), old, invRow("c1", "racer", "101"), invRow("c1", "stale", "30"), other)

	var rec Reconciliation
	mustTx(t, s, func(tx *Tx) (err error) {
		rec, err = tx.Inventory().Reconcile(ctx, InventorySnapshot{
			Cluster: "c1", APIVersion: "v1", Kind: "ConfigMap", ListResourceVersion: "100", TakenAt: time.Now(),
			Items: map[string]string{"live": "40", "stale": "35", "new": "90"},
		})
		return err
	})
	want := Reconciliation{Removed: 1, Missing: 1, Stale: 1, Kept: 1}
	if rec != want {
		t.Errorf("reconciliation %+v, want %+v", rec, want)
	}
	for uid, rv := range map[string]string{"zombie": "", "live": "40", "racer": "101", "stale": "30"} {
		if got := storedRV(t, s, "c1", uid); got != rv {
			t.Errorf("%s: %q, want %q", uid, got, rv)
		}
	}
	// Another kind is not the snapshot's business.
	mustRead(t, s, func(tx *Tx) error {
		rows, _, err := tx.Inventory().List(ctx, InventoryFilter{Kind: "Secret"})
		if len(rows) != 1 {
			t.Errorf("a snapshot of ConfigMaps removed a Secret record")
		}
		return err
	})
	// The zombie's removal blocks its late events.
	if n := upsert(t, s, invRow("c1", "zombie", "60")); n != 0 {
		t.Errorf("late event of a zombie resurrected it")
	}
}

func testInventoryList(t *testing.T, eng engine) {
	s := eng.open(t)
	ctx := t.Context()
	var rows []InventoryRow
	for i := range 25 {
		r := invRow("c"+strconv.Itoa(i%2), fmt.Sprintf("u%02d", i), "1")
		r.Namespace = "ns" + strconv.Itoa(i%3)
		rows = append(rows, r)
	}
	upsert(t, s, rows...)
	seen := map[string]bool{}
	cont := ""
	pages := 0
	for {
		var (
			page []InventoryRow
			next string
		)
		mustRead(t, s, func(tx *Tx) (err error) {
			page, next, err = tx.Inventory().List(ctx, InventoryFilter{Kind: "ConfigMap", Limit: 4, Continue: cont, WithoutObject: true})
			return err
		})
		pages++
		for _, r := range page {
			if seen[r.Cluster+r.UID] {
				t.Errorf("%s/%s listed twice", r.Cluster, r.UID)
			}
			if r.Object != nil {
				t.Errorf("WithoutObject returned an object")
			}
			seen[r.Cluster+r.UID] = true
		}
		if next == "" {
			break
		}
		cont = next
	}
	if len(seen) != 25 || pages != 7 {
		t.Errorf("listed %d records in %d pages, want 25 in 7", len(seen), pages)
	}
	mustRead(t, s, func(tx *Tx) error {
		got, _, err := tx.Inventory().List(ctx, InventoryFilter{Cluster: "c1", Namespace: "ns0"})
		for _, r := range got {
			if r.Cluster != "c1" || r.Namespace != "ns0" {
				t.Errorf("filter let through %s %s", r.Cluster, r.Namespace)
			}
		}
		if len(got) != 4 {
			t.Errorf("filtered list: %d records, want 4", len(got))
		}
		_, _, err2 := tx.Inventory().List(ctx, InventoryFilter{Continue: "garbage!"})
		if err2 == nil {
			t.Errorf("bad continue token accepted")
		}
		return err
	})
}

// testInventorySelectors checks label selectors against
// labels.Selector.Matches over records whose labels were written, changed,
// removed and reconciled away through every write path, listed in small
// pages so that the keyset crosses page boundaries.
func testInventorySelectors(t *testing.T, eng engine) {
	s := eng.open(t)
	ctx := t.Context()
	rnd := rand.New(rand.NewPCG(1, 2))
	randomLabels := func() map[string]string {
		l := map[string]string{}
		for _, k := range []string{"app", "tier", "zone"} {
			if rnd.IntN(4) > 0 {
				l[k] = fmt.Sprint(k[:1], rnd.IntN(3))
			}
		}
		return l
	}
	records := map[string]InventoryRow{} // cluster/uid -> what the store should hold
	var all []InventoryRow
	for i := range 120 {
		r := invRow("c"+strconv.Itoa(i%3), fmt.Sprintf("u%03d", i), "10")
		r.Namespace = "ns" + strconv.Itoa(i%2)
		r.Name = fmt.Sprintf("cm-%03d", i%40) // names repeat across clusters
		if i%10 == 0 {
			r.Kind = "Secret"
		}
		r.Labels = randomLabels()
		all = append(all, r)
	}
	upsert(t, s, all...)
	for _, r := range all {
		records[r.Cluster+"/"+r.UID] = r
	}
	// Newer versions with other labels (some unchanged), an older one that
	// must change nothing, deletions, and the SQL guard on its own.
	var changed []InventoryRow
	for i, r := range all {
		switch i % 4 {
		case 0:
			r.ResourceVersion, r.Labels = "11", randomLabels()
		case 1:
			r.ResourceVersion = "11"
		case 2:
			r.ResourceVersion, r.Labels = "9", map[string]string{"app": "stale"}
		default:
			continue
		}
		changed = append(changed, r)
	}
	upsert(t, s, changed...)
	for _, r := range changed {
		if r.ResourceVersion == "11" {
			records[r.Cluster+"/"+r.UID] = r
		}
	}
	mustTx(t, s, func(tx *Tx) error {
		var tombs []InventoryTombstone
		for _, r := range all[:30] {
			if r.Namespace == "ns1" {
				tombs = append(tombs, InventoryTombstone{Cluster: r.Cluster, UID: r.UID, ResourceVersion: "20", DeletedAt: time.Now()})
				delete(records, r.Cluster+"/"+r.UID)
			}
		}
		_, err := tx.Inventory().Delete(ctx, tombs)
		return err
	})
	// Labels no Kubernetes object can have, whose JSON holds the text of
	// pairs that the record does not have: a substring is not a label.
	odd := invRow("c0", "u999", "10")
	odd.Labels = map[string]string{`x"app`: "a1", "note": `"tier":"t0","zone":`}
	upsert(t, s, odd)
	records[odd.Cluster+"/"+odd.UID] = odd
	guarded := all[31]
	guarded.ResourceVersion, guarded.Labels = "1", map[string]string{"app": "guarded"}
	mustTx(t, s, func(tx *Tx) error {
		stored, err := tx.Inventory().write(ctx, []InventoryRow{guarded})
		if err == nil && stored[objectKey{guarded.Cluster, guarded.UID}] {
			t.Errorf("an older version of %s was written over a newer one", guarded.UID)
		}
		return err
	})
	mustTx(t, s, func(tx *Tx) error {
		items := map[string]string{}
		for key, r := range records {
			if r.Cluster == "c2" && r.Kind == "ConfigMap" && r.UID > "u060" {
				items[r.UID] = r.ResourceVersion
				continue
			}
			if r.Cluster == "c2" && r.Kind == "ConfigMap" {
				delete(records, key)
			}
		}
		_, err := tx.Inventory().Reconcile(ctx, InventorySnapshot{Cluster: "c2", APIVersion: "v1", Kind: "ConfigMap",
			ListResourceVersion: "100", TakenAt: time.Now(), Items: items})
		return err
	})

	list := func(f InventoryFilter) []string {
		var got []string
		for pages := 0; ; pages++ {
			var page []InventoryRow
			var next string
			mustRead(t, s, func(tx *Tx) (err error) { page, next, err = tx.Inventory().List(ctx, f); return err })
			for _, r := range page {
				got = append(got, r.Cluster+"/"+r.UID)
			}
			if next == "" || pages > 100 {
				return got
			}
			f.Continue = next
		}
	}
	filters := []InventoryFilter{{}, {Kind: "ConfigMap"}, {Kind: "ConfigMap", Namespace: "ns1"}, {Cluster: "c1"},
		{Kind: "ConfigMap", Namespace: "ns0", Name: "cm-004"}}
	for _, sel := range []string{"app=a1", "app==a0", "app!=a1", "app in (a0, a2)", "app notin (a0, a2)", "app",
		"!app", "app=a1,tier=t0", "app in (a0,a1),!zone", "tier,zone in (z0, z1, z2),app!=a2", "app=stale", "app=guarded",
		"app in (a0),tier in (t1, t2)"} {
		selector, err := labels.Parse(sel)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range filters {
			var want []InventoryRow
			for _, r := range records {
				if (f.Kind == "" || r.Kind == f.Kind) && (f.Namespace == "" || r.Namespace == f.Namespace) &&
					(f.Name == "" || r.Name == f.Name) && (f.Cluster == "" || r.Cluster == f.Cluster) &&
					selector.Matches(labels.Set(r.Labels)) {
					want = append(want, r)
				}
			}
			slices.SortFunc(want, func(a, b InventoryRow) int {
				for _, c := range [][2]string{{a.Kind, b.Kind}, {a.Namespace, b.Namespace}, {a.Name, b.Name},
					{a.Cluster, b.Cluster}, {a.UID, b.UID}} {
					if c[0] != c[1] {
						if c[0] < c[1] {
							return -1
						}
						return 1
					}
				}
				return 0
			})
			wantKeys := make([]string, len(want))
			for i, r := range want {
				wantKeys[i] = r.Cluster + "/" + r.UID
			}
			f.Selector, f.Limit = selector, 3
			if got := list(f); !slices.Equal(got, wantKeys) {
				t.Errorf("%q with %+v:\n got %v\nwant %v", sel, f, got, wantKeys)
			}
		}
	}

	// A continue token is of one listing.
	var next string
	mustRead(t, s, func(tx *Tx) (err error) {
		_, next, err = tx.Inventory().List(ctx, InventoryFilter{Kind: "ConfigMap", Namespace: "ns0", Limit: 2})
		return err
	})
	mustRead(t, s, func(tx *Tx) error {
		_, _, err := tx.Inventory().List(ctx, InventoryFilter{Kind: "ConfigMap", Namespace: "ns1", Limit: 2, Continue: next})
		if !errors.Is(err, ErrBadContinue) {
			t.Errorf("token of namespace ns0 used for ns1: %v, want ErrBadContinue", err)
		}
		return nil
	})
}

// BenchmarkUpsertInventory writes new records 500 at a time through the
// ordering checks, one transaction per batch, as the ingester does.
func BenchmarkUpsertInventory(b *testing.B) {
	for _, eng := range engines(b) {
		b.Run(eng.name, func(b *testing.B) {
			s := eng.open(b)
			n := 0
			for b.Loop() {
				rows := make([]InventoryRow, 500)
				for i := range rows {
					rows[i] = invRow("c1", fmt.Sprintf("u-%08d", n), "5")
					n++
				}
				if err := s.Tx(b.Context(), func(tx *Tx) error { _, err := tx.Inventory().Upsert(b.Context(), rows); return err }); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

func TestDecodeLabels(t *testing.T) {
	for _, l := range []map[string]string{
		nil,
		{"app": "web"},
		{"app.kubernetes.io/name": "inventory-bench", "shard": "7", "empty": ""},
		{`quo"te`: `back\slash`, "tab": "a\tb", "html": "<a&b>", "unicode": "é✓", "colon": `":"`, "comma": ","},
	} {
		stored, err := labelsJSON(l)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeLabels(stored)
		if err != nil {
			t.Errorf("%s: %v", stored, err)
			continue
		}
		if fmt.Sprint(got) != fmt.Sprint(l) || (got == nil) != (len(l) == 0) {
			t.Errorf("%s: decoded %v, want %v", stored, got, l)
		}
	}
	for _, bad := range []string{"", "{", `{"a":}`, `{"a":"b",}`, `{"a":"b"`, `["a"]`, `{"a":1}`} {
		if got, err := decodeLabels(bad); err == nil {
			t.Errorf("%q: decoded %v, want an error", bad, got)
		}
	}
}
