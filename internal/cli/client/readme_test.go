package client

import (
	"os"
	"strings"
	"testing"
)

// The README's list of kinds is what a newcomer reads first: it names
// every kind `purser get` serves, with its short name.
func TestReadmeNamesEveryKind(t *testing.T) {
	readme, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var line string
	for l := range strings.SplitSeq(string(readme), "\n") {
		if strings.Contains(l, "# the kinds:") {
			line = l
		}
	}
	if line == "" {
		t.Fatal("README.md has no line with `# the kinds:`")
	}
	for _, r := range Resources {
		if want := r.Plural + " (" + r.Short + ")"; !strings.Contains(line, want) {
			t.Errorf("README.md's kinds lack %q: %s", want, line)
		}
	}
}
