package health

import (
	"encoding/json"
	"testing"
)

// TestByKind: a kind judged by its kind alone gets from ByKind, without
// its object, what Interpret gives the decoded object; a kind with a
// built-in or a rule is not judged by its kind, so that the ingester
// decodes it.
func TestByKind(t *testing.T) {
	interp, err := New([]Rule{{APIVersion: "example.com/v1", Kind: "Ruled", Health: "'Healthy'", Phase: "'Running'"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		obj    string
		byKind bool
	}{
		{`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"v"}}`, true},
		{`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","deletionTimestamp":"2026-01-01T00:00:00Z"}}`, true},
		{`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"status":{"phase":"Running"}}`, true},
		{`{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j"},"status":{"succeeded":1,"conditions":[{"type":"Complete","status":"True"}]}}`, false},
		{`{"apiVersion":"example.com/v1","kind":"Ruled","metadata":{"name":"r"}}`, false},
	} {
		var m map[string]any
		if err := json.Unmarshal([]byte(tc.obj), &m); err != nil {
			t.Fatal(err)
		}
		want := interp.Interpret(m)
		health, phase, ok := interp.ByKind(m["apiVersion"].(string), m["kind"].(string))
		if ok != tc.byKind {
			t.Errorf("%s: judged by its kind alone %v, want %v", tc.obj, ok, tc.byKind)
			continue
		}
		if !ok {
			health, phase = interp.Judge(m)
		}
		if health != string(want.Health) || phase != want.Phase {
			t.Errorf("%s: ByKind/Judge %q %q, Interpret %q %q", tc.obj, health, phase, want.Health, want.Phase)
		}
	}
}
