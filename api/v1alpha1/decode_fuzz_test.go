package v1alpha1

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/third_party/forked/golang/reflect"
)

// roundTripEqual is reflect.DeepEqual except that nil and empty lists and
// maps, which are the same JSON, are equal. Times are the same instant in
// the same zone, since Decode puts every time in UTC; the forked DeepEqual
// needs the function anyway, as it refuses unexported fields.
var roundTripEqual = reflect.EqualitiesOrDie(
	func(a, b time.Time) bool { return a.Equal(b) && a.Location() == b.Location() },
)

// fuzzContentTypes are the Content-Types the fuzzer picks from by index:
// fuzzing the header as free text spends the run on mime parsing, which is
// the standard library's, instead of on bodies.
var fuzzContentTypes = []string{"", "application/json", "application/yaml", "application/json; charset=utf-8", "text/x-yaml", "text/plain", "application/"}

func FuzzDecode(f *testing.F) {
	seeds := []struct{ body, contentType string }{
		{runnableYAML, "application/yaml"},
		{runnableJSON, "application/json"},
		{deployableYAML, "application/yaml"},
		{clusterYAML, ""},
		{`{"apiVersion":"purser.io/v1alpha1","kind":"Cluster","metadata":{"name":"dc1-a"},"spec":{"kubeconfig":"apiVersion: v1\nkind: Config\ncurrent-context: x\n","taints":[{"key":"k","effect":"NoExecute"}]}}`, "application/json"},
		{`{"apiVersion":"purser.io/v1alpha1","kind":"Deployable","metadata":{"name":"s","namespace":"n"},"spec":{"template":{"apiVersion":"v1","kind":"Secret","data":{"a":"!!"},"stringData":{"b":1}}}}`, ""},
		{`{"apiVersion":"purser.io/v1alpha1","kind":"Runnable","spec":{"template":{"n":[1e400]}}}`, ""},
		{`{"apiVersion":"purser.io/v1alpha1","kind":"Runnable","status":{"phase":"Running","attempts":[{"number":1,"startedAt":"2026-01-01T00:00:00+00:00"}],"result":{"x":-0.0}}}`, ""},
		{`{"apiVersion":"purser.io/v1alpha1","kind":"Runnable","spec":{"failover":{"application":{"statePreservation":{"rules":[{"aliasLabelName":"a","jsonPath":"{.a"}]}},"mutations":[{"when":"preserved[","path":"a..b","value":""}]}}}`, ""},
		{"apiVersion: purser.io/v1alpha1\nkind: Cluster\nmetadata: {name: a, creationTimestamp: \"2026-01-01T00:00:00.123456789-23:59\"}\nspec: {taints: [{key: a, effect: NoSchedule, timeAdded: \"9999-12-31T23:59:59-00:00\"}]}\nstatus: {conditions: [{type: Ready, status: Unknown, lastTransitionTime: \"0001-01-01T00:00:00Z\"}]}\n", "application/yaml"},
		{`{"kind":"Runnable","kind":"Runnable"}`, "application/json"},
		{"apiVersion: purser.io/v1alpha1\nkind: Runnable\nmetadata: &a {name: x}\nspec: *a\n", "application/yaml"},
		{"a: b\n---\nc: d\n", "application/yaml"},
		{`[1, 2]`, ""},
		{`"text"`, "application/json"},
		{"", ""},
		{"{", "application/json"},
	}
	for _, s := range seeds {
		f.Add([]byte(s.body), uint8(slices.Index(fuzzContentTypes, s.contentType)))
	}
	for _, body := range roundTripEdges {
		f.Add([]byte(body), uint8(0))
	}
	for _, obj := range []any{validRunnable(), validDeployable(), validCluster()} {
		data, err := json.Marshal(obj)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, uint8(1))
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, data []byte, format uint8) {
		obj, err := Decode(data, fuzzContentTypes[int(format)%len(fuzzContentTypes)])
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %T is not a *DecodeError: %v", err, err)
			}
			return
		}
		assertRoundTrip(t, obj)
		switch o := obj.(type) {
		case *Runnable:
			ValidateRunnable(o, now)
			o.SetDefaults()
			ValidateRunnable(o, now)
		case *Deployable:
			ValidateDeployable(o)
		case *Cluster:
			ValidateCluster(o)
			ValidateClusterUpdate(o, o)
		default:
			t.Fatalf("Decode returned %T", obj)
		}
	})
}
