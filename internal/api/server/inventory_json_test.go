package server

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// TestInventoryListJSON holds the hand-written encoding of inventory
// lists to what encoding/json writes for the same struct.
func TestInventoryListJSON(t *testing.T) {
	at := time.Date(2026, 11, 29, 13, 4, 5, 123456000, time.UTC)
	item := InventoryItem{Cluster: "dc1-a", APIVersion: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: "web",
		UID: "4f1c", ResourceVersion: "1234", Labels: map[string]string{"b": "2", "a": "1", "app.kubernetes.io/name": "x"},
		Health: "Healthy", Phase: "Running", ObservedAt: at,
		Object: json.RawMessage(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web"},"data":{"k":"v"}}`)}
	bare := InventoryItem{Cluster: "c", APIVersion: "v1", Kind: "Namespace", Name: "n", UID: "u", ResourceVersion: "1",
		Health: "Unknown", ObservedAt: at.In(time.FixedZone("x", 3600))}
	odd := item
	odd.Name, odd.Labels = "quo\"te<&>\tä\u2028", map[string]string{"k": "v\\w", "é": ""}
	for _, l := range []InventoryList{
		{Items: []InventoryItem{}, Clusters: []ClusterFreshness{}},
		{Items: []InventoryItem{item, bare, odd}, Continue: "eyJrIjoxfQ",
			Clusters: []ClusterFreshness{{Cluster: "c", Ready: true, LastHeartbeat: &at}, {Cluster: "dc1-a"}}},
	} {
		want, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		got, err := l.appendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("appendJSON:\n got %s\nwant %s", got, want)
		}
	}

	// The object is copied, not re-encoded: encoding/json would escape
	// its <, > and &, which changes the bytes and not the value.
	html := item
	html.Object = json.RawMessage(`{"data":{"page":"<b>&amp;</b>"}}`)
	got, _ := (&InventoryList{Items: []InventoryItem{html}}).appendJSON(nil)
	if !bytes.Contains(got, html.Object) {
		t.Errorf("the object was not copied as stored: %s", got)
	}
	var back InventoryList
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatal(err)
	}
	var a, b any
	if err := json.Unmarshal(back.Items[0].Object, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(html.Object, &b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("object %s, want %s", back.Items[0].Object, html.Object)
	}
}
