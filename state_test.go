package purser_test

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// aggregates are the parts of the state a transaction reaches, by the
// name of their accessor on store.Tx, in the order docs/architecture.md
// lists them.
var aggregates = []string{"Runnables", "Attempts", "LeftoverCopies", "Deployables", "Inventory",
	"Clusters", "Kinds", "Agents", "Quotas", "Schedules", "Triggers", "PlacementPolicies", "Drills", "Audit", "Outbox", "Leases", "ManagedFields"}

// storeReads are the methods of store.Store that reach an aggregate
// outside a caller's transaction.
var storeReads = map[string]string{
	"PendingOutbox":       "Outbox",
	"DeleteOutbox":        "Outbox",
	"VerifyAudit":         "Audit",
	"VerifyAuditAnchored": "Audit",
	"CheckAuditAppended":  "Audit",
}

const stateSection = "## What each component touches of the state"

// TestStateAggregates: the table of docs/architecture.md that says which
// aggregates of the state each package touches is what the code does, so
// that a new use of one shows in review. A package touches an aggregate
// when a file of it that imports the store calls the aggregate's
// accessor (tx.Runnables().Get...) or one of storeReads; test files and
// test helpers (packages named *test) do not count.
func TestStateAggregates(t *testing.T) {
	documented := documentedAggregates(t)
	used := usedAggregates(t)
	var pkgs []string
	for p := range documented {
		pkgs = append(pkgs, p)
	}
	for p := range used {
		if _, ok := documented[p]; !ok {
			pkgs = append(pkgs, p)
		}
	}
	slices.Sort(pkgs)
	for _, p := range pkgs {
		if got, want := used[p], documented[p]; !slices.Equal(got, want) {
			t.Errorf("%s touches %s; docs/architecture.md (%q) says %s; the row should read:\n| `%s` | %s |",
				p, listed(got), stateSection[3:], listed(want), p, strings.Join(got, ", "))
		}
	}
}

func listed(aggs []string) string {
	if len(aggs) == 0 {
		return "nothing"
	}
	return strings.Join(aggs, ", ")
}

// documentedAggregates reads the table of the section stateSection: rows
// "| `package` | Aggregate, Aggregate |".
func documentedAggregates(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open("docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	row := regexp.MustCompile("^\\| `([^`]+)` \\| ([^|]*) \\|$")
	out := map[string][]string{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == stateSection
			continue
		}
		m := row.FindStringSubmatch(line)
		if !in || m == nil {
			continue
		}
		var aggs []string
		for a := range strings.SplitSeq(m[2], ",") {
			a = strings.TrimSpace(a)
			if !slices.Contains(aggregates, a) {
				t.Errorf("docs/architecture.md: %s: %q is not one of %s", m[1], a, strings.Join(aggregates, ", "))
			}
			aggs = append(aggs, a)
		}
		out[m[1]] = inOrder(aggs)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("docs/architecture.md has no table under %q", stateSection)
	}
	return out
}

// usedAggregates scans the non-test Go files of internal/ and cmd/.
func usedAggregates(t *testing.T) map[string][]string {
	t.Helper()
	storePath := strconv.Quote(module + "/internal/hub/store")
	seen := map[string]map[string]bool{}
	for _, root := range []string{"internal", "cmd"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if path == "internal/hub/store" || strings.HasSuffix(d.Name(), "test") {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			file, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			if !slices.ContainsFunc(file.Imports, func(s *ast.ImportSpec) bool { return s.Path.Value == storePath }) {
				return nil
			}
			pkg := filepath.ToSlash(filepath.Dir(path))
			touch := func(agg string) {
				if seen[pkg] == nil {
					seen[pkg] = map[string]bool{}
				}
				seen[pkg][agg] = true
			}
			ast.Inspect(file, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.SelectorExpr: // X.Runnables().Get
					if c, ok := n.X.(*ast.CallExpr); ok && len(c.Args) == 0 {
						if s, ok := c.Fun.(*ast.SelectorExpr); ok && slices.Contains(aggregates, s.Sel.Name) {
							touch(s.Sel.Name)
						}
					}
				case *ast.CallExpr: // X.PendingOutbox(...)
					if s, ok := n.Fun.(*ast.SelectorExpr); ok && storeReads[s.Sel.Name] != "" {
						touch(storeReads[s.Sel.Name])
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	out := map[string][]string{}
	for pkg, aggs := range seen {
		var list []string
		for a := range aggs {
			list = append(list, a)
		}
		out[pkg] = inOrder(list)
	}
	return out
}

// inOrder sorts aggs as aggregates lists them.
func inOrder(aggs []string) []string {
	slices.SortFunc(aggs, func(a, b string) int { return slices.Index(aggregates, a) - slices.Index(aggregates, b) })
	return aggs
}
