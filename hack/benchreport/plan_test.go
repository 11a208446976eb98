package main

import (
	"regexp"
	"slices"
	"testing"
)

// TestLongEntries: a Long entry runs only when -only names it, and never
// with a whole make bench or a selection by section or package.
func TestLongEntries(t *testing.T) {
	ids := func(only *regexp.Regexp) []string {
		var out []string
		for _, e := range selectEntries(only) {
			out = append(out, e.ID)
		}
		return out
	}
	if got := ids(nil); slices.Contains(got, "kueue-baseline-full") || !slices.Contains(got, "kueue-baseline") {
		t.Errorf("make bench runs %v", got)
	}
	if got := ids(regexp.MustCompile(`^kueue-baseline$`)); slices.Contains(got, "kueue-baseline-full") {
		t.Errorf("-only '^kueue-baseline$' runs %v", got)
	}
	if got := ids(regexp.MustCompile(`submitter`)); slices.Contains(got, "kueue-baseline-full") {
		t.Errorf("-only submitter (the package) runs %v", got)
	}
	if got := ids(regexp.MustCompile(`^kueue-baseline-full$`)); !slices.Equal(got, []string{"kueue-baseline-full"}) {
		t.Errorf("-only '^kueue-baseline-full$' runs %v", got)
	}
}
