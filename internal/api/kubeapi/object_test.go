package kubeapi

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/purser-io/purser/internal/hub/store"
)

// TestAppendObject: the served object is valid JSON with purser's
// resourceVersion, the cluster's annotations beside the object's own, the
// stored members as they were, and a Secret's data never.
func TestAppendObject(t *testing.T) {
	for _, tc := range []struct {
		name, kind string
		stored     string
		check      func(t *testing.T, obj map[string]any)
	}{
		{"annotations kept", "ConfigMap",
			`{"apiVersion":"v1","data":{"a\"b":"x\\y"},"kind":"ConfigMap","metadata":{"annotations":{"team":"a","purser.io/cluster":"forged"},"name":"n","resourceVersion":"41","uid":"u"}}`,
			func(t *testing.T, obj map[string]any) {
				md := obj["metadata"].(map[string]any)
				ann := md["annotations"].(map[string]any)
				if ann["team"] != "a" || ann[ClusterAnnotation] != "c1" || ann[ClusterResourceVersionAnnotation] != "41" || md["resourceVersion"] != "7" {
					t.Errorf("metadata %v", md)
				}
				if obj["data"].(map[string]any)[`a"b`] != `x\y` {
					t.Errorf("data %v", obj["data"])
				}
			}},
		{"no metadata stored", "ConfigMap", `{"data":{}}`,
			func(t *testing.T, obj map[string]any) {
				md := obj["metadata"].(map[string]any)
				if md["name"] != "n" || md["namespace"] != "ns" || md["creationTimestamp"] == nil || obj["kind"] != "ConfigMap" {
					t.Errorf("object %v", obj)
				}
			}},
		{"secret data left out", "Secret", `{"data":{"k":"c2VjcmV0"},"stringData":{"k":"secret"},"type":"Opaque","metadata":{"name":"n"}}`,
			func(t *testing.T, obj map[string]any) {
				if _, ok := obj["data"]; ok {
					t.Errorf("a Secret's data is served: %v", obj)
				}
				if _, ok := obj["stringData"]; ok {
					t.Errorf("a Secret's stringData is served: %v", obj)
				}
				if obj["type"] != "Opaque" {
					t.Errorf("type %v", obj["type"])
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &store.InventoryRow{Cluster: "c1", APIVersion: "v1", Kind: tc.kind, Namespace: "ns", Name: "n", UID: "u",
				ResourceVersion: "41", ObservedAt: time.Now(), Object: []byte(tc.stored)}
			b, err := appendObject(nil, r, 7)
			if err != nil {
				t.Fatal(err)
			}
			var obj map[string]any
			if err := json.Unmarshal(b, &obj); err != nil {
				t.Fatalf("not JSON: %v: %s", err, b)
			}
			tc.check(t, obj)
		})
	}
}

// TestEncodeTable: the hand-made encoding is what encoding/json writes.
func TestEncodeTable(t *testing.T) {
	tbl := &metav1.Table{TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: "meta.k8s.io/v1"},
		ListMeta:          metav1.ListMeta{ResourceVersion: "9", Continue: "tok"},
		ColumnDefinitions: []metav1.TableColumnDefinition{{Name: "Name", Type: "string", Format: "name"}},
		Rows: []metav1.TableRow{{Cells: []any{"a", int64(2), nil}, Object: runtime.RawExtension{Raw: []byte(`{"kind":"X"}`)}},
			{Cells: []any{"b"}}}}
	got, err := encodeTable(tbl)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(tbl)
	if !bytes.Equal(got, want) {
		t.Errorf("encodeTable:\n%s\nencoding/json:\n%s", got, want)
	}
}
