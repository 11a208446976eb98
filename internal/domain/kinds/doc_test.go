package kinds

import (
	"os"
	"strings"
	"testing"
)

// docTable renders the registry as docs/kinds.md's table writes it.
func docTable(r *Registry) string {
	var b strings.Builder
	b.WriteString("| Kind | Group | Pods and nested objects the driver reads |\n|---|---|---|\n")
	for _, gk := range r.Kinds() {
		d, _ := r.Driver(gk)
		group := gk.Group
		if group == "" {
			group = "(core)"
		}
		b.WriteString("| " + gk.Kind + " | " + group + " | " + d.Knows() + " |\n")
	}
	return b.String()
}

// TestDocsListEveryKind: docs/kinds.md's table is the registry's, kind by
// kind, with what each driver knows.
func TestDocsListEveryKind(t *testing.T) {
	raw, err := os.ReadFile("../../../docs/kinds.md")
	if err != nil {
		t.Fatal(err)
	}
	var table []string // the first table of the page
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "|") {
			table = append(table, line)
		} else if len(table) > 0 {
			break
		}
	}
	got := strings.Join(table, "\n") + "\n"
	if want := docTable(Default()); got != want {
		t.Errorf("docs/kinds.md's table is not the registry's; it should read:\n%s", want)
	}
}
