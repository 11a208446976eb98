// Package printer renders purser's API objects for the command line as
// kubectl renders Kubernetes objects: tables (with -o wide), describe
// pages, the history and the inventory, and the -o formats yaml, json,
// name and jsonpath, sorted by --sort-by. It works on objects as decoded
// JSON, so that it shows whatever the server answers, fields it does not
// know included.
package printer

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/purser-io/purser/api/v1alpha1"
)

// Object is an API object as decoded JSON (numbers as json.Number).
type Object = map[string]any

// Field reads a nested value of a decoded object as text; "" when any step
// is missing.
func Field(obj Object, path ...string) string {
	switch v := Lookup(obj, path...).(type) {
	case nil:
		return ""
	case string:
		return v
	case json.Number:
		return v.String()
	case float64:
		return fmt.Sprint(int64(v))
	default:
		return fmt.Sprint(v)
	}
}

// Lookup walks a decoded object; nil when any step is missing.
func Lookup(obj Object, path ...string) any {
	v, _, _ := unstructured.NestedFieldNoCopy(obj, path...)
	return v
}

// list reads a nested list; nil when it is missing.
func list(obj Object, path ...string) []any {
	l, _ := Lookup(obj, path...).([]any)
	return l
}

// Age prints how long ago an RFC 3339 time was, as kubectl does.
func Age(ts string) string {
	t, err := time.Parse(time.RFC3339, ts)
	if err != nil {
		return "<unknown>"
	}
	return duration(time.Since(t))
}

func duration(d time.Duration) string {
	switch {
	case d < 2*time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < 2*time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}

// Timestamp prints an RFC 3339 time to the second, so that a column of
// them stays narrow.
func Timestamp(ts string) string {
	t, err := time.Parse(time.RFC3339, ts)
	if err != nil {
		return ts
	}
	return t.UTC().Format(time.RFC3339)
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

func orUnknown(s string) string {
	if s == "" {
		return "Unknown"
	}
	return s
}

// JoinLabels writes a label map as k=v,k=v, sorted.
func JoinLabels(l map[string]any) string {
	parts := make([]string, 0, len(l))
	for k, v := range l {
		parts = append(parts, fmt.Sprintf("%s=%v", k, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// ReadyCondition is a cluster's Ready condition, nil when it has none yet.
func ReadyCondition(obj Object) map[string]any {
	for _, c := range list(obj, "status", "conditions") {
		m, _ := c.(map[string]any)
		if m["type"] == v1alpha1.ConditionReady {
			return m
		}
	}
	return nil
}

// ClusterState is a cluster's state in kubectl's words for nodes (Ready,
// NotReady, Unknown), as the API serves it (status.state), else read from
// its Ready condition for a server that predates it.
func ClusterState(obj Object) string {
	if s := Field(obj, "status", "state"); s != "" {
		return s
	}
	switch Field(ReadyCondition(obj), "status") {
	case "True":
		return "Ready"
	case "False":
		return "NotReady"
	}
	return "Unknown"
}

// Taints are a cluster's taints: those set on it (spec.taints) and those
// purser adds from its conditions (status.taints); placement honours both.
func Taints(obj Object) []map[string]any {
	var out []map[string]any
	for _, path := range [][]string{{"spec", "taints"}, {"status", "taints"}} {
		for _, t := range list(obj, path...) {
			if m, ok := t.(map[string]any); ok {
				out = append(out, m)
			}
		}
	}
	return out
}

// FormatTaint writes a taint as kubectl taint takes it: key=value:Effect.
func FormatTaint(t map[string]any) string {
	s := Field(t, "key")
	if v := Field(t, "value"); v != "" {
		s += "=" + v
	}
	return s + ":" + Field(t, "effect")
}
