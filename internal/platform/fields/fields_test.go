package fields

import (
	"encoding/json"
	"testing"
)

func TestReads(t *testing.T) {
	obj := map[string]any{"status": map[string]any{
		"phase": "Running", "ready": true, "n64": int64(3), "n": 4, "f": float64(5), "frac": 1.5, "num": json.Number("6"),
		"labels": map[string]any{"a": "b", "c": 1},
	}, "list": []any{"x"}}
	if got := String(obj, "status", "phase"); got != "Running" {
		t.Errorf("String = %q", got)
	}
	if String(obj, "status", "ready") != "" || String(obj, "list", "x") != "" || String(obj, "missing") != "" {
		t.Error("String of a non-string, a step into a list or a missing field is not empty")
	}
	if !Bool(obj, "status", "ready") || Bool(obj, "status", "phase") {
		t.Error("Bool")
	}
	for path, want := range map[string]int64{"n64": 3, "n": 4, "f": 5, "num": 6} {
		if got, ok := Int(obj, "status", path); !ok || got != want {
			t.Errorf("Int(%s) = %d, %v", path, got, ok)
		}
	}
	if _, ok := Int(obj, "status", "frac"); ok {
		t.Error("a fraction is a count")
	}
	if m := StringMap(obj["status"].(map[string]any)["labels"]); len(m) != 1 || m["a"] != "b" {
		t.Errorf("StringMap = %v", m)
	}
	if StringMap("x") != nil {
		t.Error("StringMap of a string is not nil")
	}
}
