package v1alpha1

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// aliasBomb is a 105 KB body whose one 100 KiB anchor is referenced n
// times: about n * 100 KiB once expanded.
func aliasBomb(n int) string {
	var b strings.Builder
	b.WriteString("apiVersion: purser.io/v1alpha1\nkind: Deployable\nmetadata: {name: bomb, namespace: team-a}\nspec:\n  template:\n    apiVersion: v1\n    kind: ConfigMap\n    metadata: {name: bomb}\n    data:\n      a: &big \"")
	b.WriteString(strings.Repeat("x", 100<<10))
	b.WriteString("\"\n  placement:\n    clusterAffinity:\n      exclude: [")
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("*big")
	}
	b.WriteString("]\n")
	return b.String()
}

func TestAliasesAreMeasuredExpanded(t *testing.T) {
	body := aliasBomb(1000)
	if len(body) > 110_000 {
		t.Fatalf("the body is %d bytes; the case is a small body", len(body))
	}
	start := time.Now()
	_, err := Decode([]byte(body), "application/yaml")
	took := time.Since(start)
	var de *DecodeError
	if !errors.As(err, &de) || !de.TooLarge {
		t.Fatalf("err = %v, want a TooLarge DecodeError", err)
	}
	if !strings.Contains(de.Error(), "once its YAML aliases are expanded") {
		t.Errorf("message %q does not say why", de.Error())
	}
	// Not a timing assertion: the expansion would take tens of seconds
	// and gigabytes, so anything near that means it happened.
	t.Logf("refused in %v", took)
}

func TestExpandedSize(t *testing.T) {
	for _, tc := range []struct {
		doc      string
		min, max int
	}{
		{"a: b", 4, 20},
		{"a: &x " + strings.Repeat("y", 1000) + "\nb: *x\nc: *x", 3000, 3100},
		{"a: &x [1, 2, 3]\nb: [*x, *x, *x, *x]", 10, 100},
		// A small tree of aliases doubling at each level: 2^20 leaves.
		{func() string {
			var b strings.Builder
			b.WriteString("l0: &l0 [x, x]\n")
			for i := 1; i <= 20; i++ {
				fmt.Fprintf(&b, "l%d: &l%d [*l%d, *l%d]\n", i, i, i-1, i-1)
			}
			return b.String()
		}(), MaxObjectBytes + 1, 1 << 40},
	} {
		n, err := expandedSize([]byte(tc.doc), MaxObjectBytes)
		if err != nil {
			t.Fatal(err)
		}
		if n < tc.min || n > tc.max {
			t.Errorf("expandedSize(%.40q) = %d, want %d..%d", tc.doc, n, tc.min, tc.max)
		}
	}
}

// A JSON object over the limit is refused too (a body may reach it only
// through a larger body limit, but the rule is the object's size).
func TestLargeObjectRefused(t *testing.T) {
	body := `{"apiVersion":"purser.io/v1alpha1","kind":"Deployable","metadata":{"name":"x","namespace":"a"},"spec":{"template":{"apiVersion":"v1","kind":"ConfigMap","data":{"a":"` +
		strings.Repeat("x", MaxObjectBytes) + `"}}}}`
	_, err := Decode([]byte(body), "application/json")
	var de *DecodeError
	if !errors.As(err, &de) || !de.TooLarge {
		t.Fatalf("err = %v, want TooLarge", err)
	}
}

// Aliases that stay small are fine.
func TestSmallAliasesAccepted(t *testing.T) {
	body := "apiVersion: purser.io/v1alpha1\nkind: Deployable\nmetadata: {name: c, namespace: team-a}\nspec:\n  template:\n    apiVersion: v1\n    kind: ConfigMap\n    metadata: {name: c}\n    data: {a: &v hello, b: *v}\n"
	obj, err := Decode([]byte(body), "application/yaml")
	if err != nil {
		t.Fatal(err)
	}
	d := obj.(*Deployable)
	if got := d.Spec.Template["data"].(map[string]any)["b"]; got != "hello" {
		t.Errorf("data.b = %v", got)
	}
}

// BoundedJSON is the bound of every body, whatever its kind: a review, a
// move, a sign-in are refused as an object is.
func TestBoundedJSON(t *testing.T) {
	var doubling strings.Builder // 2^24 leaves of 8 bytes from a 1 KB body
	doubling.WriteString("apiVersion: authorization.k8s.io/v1\nkind: SelfSubjectAccessReview\nl0: &l0 [xxxxxxxx, xxxxxxxx]\n")
	for i := 1; i <= 24; i++ {
		fmt.Fprintf(&doubling, "l%d: &l%d [*l%d, *l%d]\n", i, i, i-1, i-1)
	}
	for _, tc := range []struct {
		name, body, contentType string
		tooLarge, malformed     bool
		want                    string
	}{
		{name: "json", body: `{"to": "c2"}`, contentType: "application/json", want: `{"to": "c2"}`},
		{name: "yaml", body: "to: c2\n", contentType: "application/yaml", want: `{"to":"c2"}`},
		{name: "sniffed yaml", body: "to: c2\n", want: `{"to":"c2"}`},
		{name: "an alias bomb of another kind", body: doubling.String(), contentType: "application/yaml", tooLarge: true},
		{name: "the same, sniffed", body: doubling.String(), tooLarge: true},
		{name: "a list, not an object", body: "[1, 2]", contentType: "application/json", malformed: true},
		{name: "two documents", body: "a: 1\n---\nb: 2\n", contentType: "application/yaml", malformed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js, err := BoundedJSON([]byte(tc.body), tc.contentType)
			var de *DecodeError
			switch {
			case tc.tooLarge || tc.malformed:
				if !errors.As(err, &de) || de.TooLarge != tc.tooLarge || (tc.malformed && !de.Malformed) {
					t.Fatalf("err = %v (%+v), want tooLarge=%v malformed=%v", err, de, tc.tooLarge, tc.malformed)
				}
			case err != nil:
				t.Fatal(err)
			case string(js) != tc.want:
				t.Errorf("BoundedJSON = %s, want %s", js, tc.want)
			}
		})
	}
}
