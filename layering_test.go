package purser_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/purser-io/purser"

// layering lists what a package must never link, directly or through
// another package. A name matches itself and every package below it.
var layering = []struct {
	pkg    string
	never  []string
	reason string
}{
	{
		pkg:    module + "/internal/member/inventory",
		never:  []string{module + "/internal/member/agent", module + "/internal/control/lease"},
		reason: "the ingester meets the agent in internal/hub/stream (its messages and the Secret rule), never in the agent's code",
	},
	{
		pkg: module + "/internal/member/agent",
		never: []string{module + "/internal/hub/store", module + "/internal/control/lease",
			"modernc.org/sqlite", "github.com/jackc/pgx"},
		reason: "the agent runs beside a member cluster and talks to the stream only; it must not carry the database code",
	},
	{
		pkg:    module + "/internal/hub/stream",
		never:  []string{module + "/internal/member/agent", module + "/internal/member/inventory", module + "/internal/hub/store"},
		reason: "the stream is where producers and consumers meet, so it depends on neither",
	},
}

// TestLayering keeps the rules above true, from what the go command says
// the packages import (go list -deps), and names the chain of imports that
// breaks a rule.
func TestLayering(t *testing.T) {
	roots := make([]string, 0, len(layering))
	for _, r := range layering {
		roots = append(roots, r.pkg)
	}
	imports := importGraph(t, roots...)
	for _, r := range layering {
		if _, ok := imports[r.pkg]; !ok {
			t.Errorf("go list does not know %s; the rule names a package that moved", r.pkg)
			continue
		}
		for _, banned := range r.never {
			if chain := importChain(imports, r.pkg, banned); chain != nil {
				t.Errorf("%s must not link %s (%s), but it does: %s",
					short(r.pkg), short(banned), r.reason, strings.Join(mapShort(chain), " -> "))
			}
		}
	}
}

// importGraph returns the direct imports of roots and of every package
// they depend on, by import path.
func importGraph(t *testing.T, roots ...string) map[string][]string {
	t.Helper()
	args := append([]string{"list", "-deps", "-json=ImportPath,Imports"}, roots...)
	cmd := exec.Command("go", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v: %s", err, stderr.String())
	}
	graph := map[string][]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		graph[p.ImportPath] = p.Imports
	}
	return graph
}

// importChain returns the shortest chain of imports from pkg to a package
// matching banned (banned itself or below it), or nil if there is none.
func importChain(imports map[string][]string, pkg, banned string) []string {
	matches := func(p string) bool { return p == banned || strings.HasPrefix(p, banned+"/") }
	from := map[string]string{pkg: ""}
	queue := []string{pkg}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if matches(p) {
			var chain []string
			for ; p != ""; p = from[p] {
				chain = append(chain, p)
			}
			slices.Reverse(chain)
			return chain
		}
		for _, next := range imports[p] {
			if _, seen := from[next]; !seen {
				from[next] = p
				queue = append(queue, next)
			}
		}
	}
	return nil
}

// TestImportChain: the search finds the shortest chain, matches packages
// below a banned path, and finds nothing when nothing links it.
func TestImportChain(t *testing.T) {
	imports := map[string][]string{
		"a":   {"b", "c"},
		"b":   {"d/x"},
		"c":   {"e"},
		"e":   {"d"},
		"d/x": nil,
	}
	for _, tc := range []struct {
		pkg, banned string
		want        []string
	}{
		{"a", "d", []string{"a", "b", "d/x"}},
		{"c", "d", []string{"c", "e", "d"}},
		{"a", "e", []string{"a", "c", "e"}},
		{"b", "c", nil},
		{"a", "d/xy", nil},
	} {
		if got := importChain(imports, tc.pkg, tc.banned); !slices.Equal(got, tc.want) {
			t.Errorf("importChain(%s, %s) = %v, want %v", tc.pkg, tc.banned, got, tc.want)
		}
	}
}

func short(pkg string) string { return strings.TrimPrefix(pkg, module+"/") }

func mapShort(pkgs []string) []string {
	out := make([]string, len(pkgs))
	for i, p := range pkgs {
		out[i] = short(p)
	}
	return out
}
