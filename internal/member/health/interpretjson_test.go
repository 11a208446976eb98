package health

import (
	"encoding/json"
	"testing"
)

// TestInterpretJSONByKind: a kind judged by its kind alone gets from
// InterpretJSON, which does not decode it, what Interpret gives the
// decoded object; a kind with a built-in or a rule is still decoded.
func TestInterpretJSONByKind(t *testing.T) {
	interp, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range []string{
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"v"}}`,
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","deletionTimestamp":"2026-01-01T00:00:00Z"}}`,
		`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"status":{"phase":"Running"}}`,
		`{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j"},"status":{"succeeded":1,"conditions":[{"type":"Complete","status":"True"}]}}`,
	} {
		var m map[string]any
		if err := json.Unmarshal([]byte(obj), &m); err != nil {
			t.Fatal(err)
		}
		want := interp.Interpret(m)
		health, phase := interp.InterpretJSON(m["apiVersion"].(string), m["kind"].(string), []byte(obj))
		if health != string(want.Health) || phase != want.Phase {
			t.Errorf("%s: InterpretJSON %q %q, Interpret %q %q", obj, health, phase, want.Health, want.Phase)
		}
	}
}
