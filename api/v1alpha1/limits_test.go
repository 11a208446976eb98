package v1alpha1

import (
	"errors"
	"strings"
	"testing"
)

func TestNestingLimit(t *testing.T) {
	body := func(depth int) string {
		// spec and template are two levels, the body itself one more.
		inner := strings.Repeat(`{"a":`, depth) + `1` + strings.Repeat(`}`, depth)
		return `{"apiVersion":"purser.io/v1alpha1","kind":"Runnable","metadata":{"name":"x","namespace":"a"},` +
			`"spec":{"template":{"apiVersion":"v1","kind":"ConfigMap","data":` + inner + `}}}`
	}
	if _, err := DecodeRunnable([]byte(body(MaxNesting-4)), "application/json"); err != nil {
		t.Fatalf("a template within the limit: %v", err)
	}
	for _, depth := range []int{MaxNesting, 5000} {
		_, err := DecodeRunnable([]byte(body(depth)), "application/json")
		var de *DecodeError
		if !errors.As(err, &de) || de.Malformed || len(de.Details) != 1 || de.Details[0].Field != "spec.template" {
			t.Fatalf("depth %d: %v, want a 422 naming spec.template", depth, err)
		}
	}
	// Brackets inside strings are not nesting.
	if n := nesting([]byte(`{"a":"[[[{{{\"]]]","b":[{}]}`)); n != 3 {
		t.Fatalf("nesting counted %d, want 3", n)
	}
}

func TestRunnableSecretRefused(t *testing.T) {
	r := validRunnable()
	r.Spec.Template = map[string]any{"apiVersion": "v1", "kind": "Secret", "stringData": map[string]any{"p": "x"}}
	errs := ValidateRunnable(r, testNow)
	if len(errs) != 1 || errs[0].Field != "spec.template.kind" || !strings.Contains(errs[0].Message, "Deployable") {
		t.Fatalf("a Secret Runnable: %v", errs)
	}
}
