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

// layering lists what the packages below a path must never link,
// directly or through another package. A path matches itself and every
// package below it; except names what a rule allows inside a banned path.
// The groups under internal/ stand in this order, lowest first: platform
// and sandbox (which know nothing of purser's state), flink (what purser
// knows about the operator), domain/kinds (what purser knows of each kind
// it places, the FlinkDeployment's from flink), hub (the state), domain (the decisions and rules that
// the loops and the API share: the policy, admission, the lifecycle), member and
// control (what meets a member cluster, and the loops that decide), api,
// compose, and cmd above everything. Test helpers (packages named *test) are test code
// and are kept out of production by the last rule of TestLayering.
var layering = []struct {
	pkg    string
	never  []string
	except []string
	reason string
}{
	{
		pkg:    "internal/platform",
		never:  []string{""},
		except: []string{"internal/platform"},
		reason: "the small shared pieces know nothing of purser",
	},
	{
		pkg:    "internal/sandbox",
		never:  []string{"internal/hub", "internal/control", "internal/member", "internal/flink", "internal/api", "internal/compose", "internal/cli"},
		reason: "local clusters and simulators stand apart from what they host",
	},
	{
		pkg:    "internal/domain/kinds",
		never:  []string{"internal/hub", "internal/control", "internal/member", "internal/api", "internal/compose", "internal/cli", "internal/sandbox"},
		reason: "what purser knows of each kind is knowledge that admission, placement and the loops all import; it imports none of them, only the operator knowledge (internal/flink) its FlinkDeployment driver asks",
	},
	{
		pkg:    "internal/domain",
		never:  []string{"internal/control", "internal/member", "internal/api", "internal/compose", "internal/cli", "internal/sandbox"},
		reason: "the domain layer (kinds, admission, the lifecycle) is what the API and the control loops both import; it imports neither",
	},
	{
		pkg:    "internal/hub",
		never:  []string{"internal/control", "internal/member", "internal/flink", "internal/api", "internal/compose", "internal/cli", "internal/sandbox"},
		reason: "the hub is the state the others meet at; it knows none of them",
	},
	{
		pkg:    "internal/flink",
		never:  []string{"internal/domain", "internal/hub", "internal/control", "internal/member", "internal/api", "internal/compose", "internal/cli", "internal/sandbox"},
		reason: "what purser knows about the Flink operator is knowledge below the kind drivers, which ask it, as the health interpreter and the failover controller do for restore points",
	},
	{
		pkg:    "internal/control",
		never:  []string{"internal/api", "internal/compose", "internal/cli", "internal/sandbox", "internal/member/agent", "internal/member/inventory"},
		reason: "the control loops meet the API, the agent and the ingester only in the hub and the domain layer (whose policy and admission they ask again before they act)",
	},
	{
		pkg:    "internal/member",
		never:  []string{"internal/api", "internal/compose", "internal/cli", "internal/sandbox", "internal/control"},
		except: []string{"internal/cli/manifest"},
		reason: "what meets a member cluster moves a runnable only through its lifecycle in the domain layer (the ingester), and reads files as the command line does (purser health -f)",
	},
	{
		pkg:    "internal/member/agent",
		never:  []string{"internal/hub/store", "internal/hub/outbox", "internal/hub/anchor", "internal/hub/guard", "modernc.org/sqlite", "github.com/jackc/pgx"},
		reason: "the agent runs beside a member cluster and talks to the stream only; it must not carry the database code",
	},
	{
		pkg:    "internal/member/inventory",
		never:  []string{"internal/member/agent"},
		reason: "the ingester meets the agent in internal/hub/stream (its messages and the Secret rule), never in the agent's code",
	},
	{
		pkg:    "internal/control/submitter",
		never:  []string{"internal/control/failover", "internal/control/controller"},
		reason: "the submitter starts attempts and the failover controller ends them; they meet in the hub and in internal/control/attempt, never in each other's code",
	},
	{
		pkg:    "internal/hub/stream",
		never:  []string{"internal/hub/store"},
		reason: "the stream is where producers and consumers meet, so it depends on neither",
	},
	{
		pkg: "internal/api",
		never: []string{"internal/compose", "internal/cli", "internal/sandbox", "internal/control/submitter", "internal/control/syncer",
			"internal/control/failover", "internal/control/controller", "internal/member/agent", "internal/member/inventory"},
		reason: "the API writes desired state to the hub; the components act on it",
	},
	{
		pkg:    "internal/cli",
		never:  []string{"internal/hub", "internal/control", "internal/member", "internal/flink", "internal/api", "internal/compose", "internal/sandbox"},
		reason: "the command line talks to the REST API, never to the hub",
	},
}

// TestLayering keeps the rules above true, from what the go command says
// the packages import (go list -deps), and names the chain of imports that
// breaks a rule. No production package links a test helper.
func TestLayering(t *testing.T) {
	imports := importGraph(t, "./...")
	full := func(p string) string {
		if p == "" {
			return module
		}
		if strings.HasPrefix(p, "internal/") || strings.HasPrefix(p, "cmd/") || strings.HasPrefix(p, "api/") {
			return module + "/" + p
		}
		return p
	}
	var pkgs []string
	for p := range imports {
		if strings.HasPrefix(p, module) {
			pkgs = append(pkgs, p)
		}
	}
	slices.Sort(pkgs)
	for _, r := range layering {
		matched := 0
		for _, pkg := range pkgs {
			if !under(pkg, full(r.pkg)) || strings.HasSuffix(pkg, "test") {
				continue
			}
			matched++
			for _, banned := range r.never {
				var except []string
				for _, e := range r.except {
					except = append(except, full(e))
				}
				if chain := importChain(imports, pkg, full(banned), except...); chain != nil {
					t.Errorf("%s must not link %s (%s), but it does: %s",
						short(pkg), short(full(banned)), r.reason, strings.Join(mapShort(chain), " -> "))
				}
			}
		}
		if matched == 0 {
			t.Errorf("no package is below %s; the rule names a group that moved", r.pkg)
		}
	}
	for _, pkg := range pkgs {
		if strings.HasSuffix(pkg, "test") {
			continue
		}
		for _, imp := range imports[pkg] {
			if strings.HasPrefix(imp, module) && strings.HasSuffix(imp, "test") {
				t.Errorf("%s links the test helper %s", short(pkg), short(imp))
			}
		}
	}
}

// under reports whether p is path or below it.
func under(p, path string) bool { return p == path || strings.HasPrefix(p, path+"/") }

// importGraph returns the direct imports of roots and of every package
// they depend on, by import path.
func importGraph(t *testing.T, roots ...string) map[string][]string {
	t.Helper()
	args := append([]string{"list", "-deps", "-json=ImportPath,Imports"}, roots...)
	cmd := exec.CommandContext(t.Context(), "go", args...)
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

// importChain returns the shortest chain of imports from pkg to another
// package matching banned (banned itself or below it, but not below one of
// except), or nil if there is none.
func importChain(imports map[string][]string, pkg, banned string, except ...string) []string {
	matches := func(p string) bool {
		if p == pkg || !under(p, banned) {
			return false
		}
		for _, e := range except {
			if under(p, e) {
				return false
			}
		}
		return true
	}
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
