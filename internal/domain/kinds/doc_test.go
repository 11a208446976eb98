package kinds

import (
	"os"
	"strings"
	"testing"
)

// What docs/kinds.md says of a kind whose driver lacks a capability: what
// purser does instead.
const (
	noDemand   = "every pod template found, one pod each"
	noSuspend  = "no: cancel it"
	noFence    = "deleted"
	noInPlace  = "not supported yet"
	noMove     = "afresh: the old copy removed first"
	noFailure  = "Other, with status.message"
	noSelector = "those it owns directly (owner references)"
)

// docTables renders the registry as docs/kinds.md's two tables write it:
// what each driver reads, and what it does for the loops.
func docTables(r *Registry) (reads, does string) {
	var a, b strings.Builder
	a.WriteString("| Kind | Group | Pods and nested objects the driver reads | Demand | Suspend | Fence | In place |\n|---|---|---|---|---|---|---|\n")
	b.WriteString("| Kind | Group | Planned move | Failure class | Pods purser describe lists |\n|---|---|---|---|---|\n")
	for _, gk := range r.Kinds() {
		d, _ := r.Driver(gk)
		group := gk.Group
		if group == "" {
			group = "(core)"
		}
		demand, suspend, fence, inPlace := noDemand, noSuspend, noFence, noInPlace
		if x, ok := d.(Demander); ok {
			demand = x.DemandBy()
		}
		if x, ok := d.(Suspender); ok {
			suspend = x.SuspendsBy()
		}
		if x, ok := d.(Fencer); ok {
			fence = x.FencesBy()
		}
		if x, ok := d.(InPlaceUpdater); ok {
			inPlace = x.InPlaceBy()
		}
		a.WriteString("| " + strings.Join([]string{gk.Kind, group, d.Knows(), demand, suspend, fence, inPlace}, " | ") + " |\n")
		move, failure, selector := noMove, noFailure, noSelector
		if x, ok := d.(SavepointMover); ok {
			move = x.MovesBy()
		}
		if x, ok := d.(FailureClassifier); ok {
			failure = x.ClassifiesBy()
		}
		if x, ok := d.(PodSelector); ok {
			selector = "`" + x.PodSelector("<uid>") + "`"
		}
		b.WriteString("| " + strings.Join([]string{gk.Kind, group, move, failure, selector}, " | ") + " |\n")
	}
	return a.String(), b.String()
}

// TestDocsListEveryKind: docs/kinds.md's two tables are the registry's,
// kind by kind, with what each driver knows and does.
func TestDocsListEveryKind(t *testing.T) {
	raw, err := os.ReadFile("../../../docs/kinds.md")
	if err != nil {
		t.Fatal(err)
	}
	var tables []string // the tables of the page, in order
	var cur []string
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "|") {
			cur = append(cur, line)
			continue
		}
		if len(cur) > 0 {
			tables = append(tables, strings.Join(cur, "\n")+"\n")
			cur = nil
		}
	}
	if len(cur) > 0 {
		tables = append(tables, strings.Join(cur, "\n")+"\n")
	}
	reads, does := docTables(Default())
	if len(tables) < 2 || tables[0] != reads {
		t.Errorf("docs/kinds.md's first table is not the registry's; it should read:\n%s", reads)
	}
	if len(tables) < 2 || tables[1] != does {
		t.Errorf("docs/kinds.md's second table is not the registry's; it should read:\n%s", does)
	}
}
