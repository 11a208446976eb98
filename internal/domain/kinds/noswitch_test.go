package kinds

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const (
	module     = "github.com/purser-io/purser"
	kindsPath  = module + "/internal/domain/kinds"
	flinkPath  = module + "/internal/flink"
	repoRoot   = "../../.."
	driverHint = "ask the kind's driver (internal/domain/kinds) instead"
)

// allowedKindTests are the comparisons with a driver's kind that stay
// outside the drivers, each with why it is not knowledge of the kind that
// a driver should hold. A file:kind pair allows every comparison with that
// kind in that file.
var allowedKindTests = []struct {
	file, kind, why string
}{
	{"internal/member/agent/trim.go", "Pod",
		"the agent's cache trims the live Pods it watches (their status is most of their bulk), objects it observes on the " +
			"cluster, not a template purser places; no driver decides it"},
	{"internal/api/kubeapi/resources.go", "Pod",
		"the /k8s discovery leaves core Pods out of the kinds it serves from the inventory, a rule of that endpoint about " +
			"what the inventory holds, not about a kind purser places"},
}

// TestNoSwitchOnKindOutsideDrivers: no production Go file outside the
// drivers (internal/domain/kinds) and the operator knowledge they ask
// (internal/flink) compares a kind, in a switch or with == or !=, against
// one that the registry has a driver for: a kind is taught to purser in
// its driver, and everything that needs a kind asks it. The comparisons
// recognised are a string literal naming the kind ("Job"), a constant or
// variable of the kinds or flink packages naming it (kinds.Job,
// flink.KindDeployment), a GroupKind or GroupVersionKind literal of it,
// and a variable or constant of the file's package set to one of those.
// Purser's own kinds (Runnable, Deployable, Cluster, Quota) and the kinds
// admission reads as nested objects (Secret, the RBAC kinds of
// admission/rbac.go, Namespace) have no driver, so they are not kinds a
// driver could be asked about and are not flagged.
func TestNoSwitchOnKindOutsideDrivers(t *testing.T) {
	names := map[string]bool{}
	for _, gk := range Default().Kinds() {
		names[gk.Kind] = true
	}
	fset := token.NewFileSet()
	// The exported names of the two knowledge packages that stand for a
	// driver's kind.
	named := map[string]map[string]bool{}
	named[flinkPath] = kindNamesOf(t, fset, filepath.Join(repoRoot, "internal", "flink"), names, named)
	named[kindsPath] = kindNamesOf(t, fset, filepath.Join(repoRoot, "internal", "domain", "kinds"), names, named)
	if !named[kindsPath]["Job"] || !named[kindsPath]["FlinkDeployment"] || !named[flinkPath]["KindDeployment"] {
		t.Fatalf("the test no longer finds kinds.Job or flink.KindDeployment: %v", named)
	}
	byPkg := map[string][]*ast.File{}
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			switch {
			case rel != "." && strings.HasPrefix(d.Name(), "."),
				d.Name() == "testdata", d.Name() == "node_modules", d.Name() == "vendor",
				rel == "internal/domain/kinds", rel == "internal/flink":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		byPkg[filepath.Dir(rel)] = append(byPkg[filepath.Dir(rel)], f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	allowedUsed := map[int]bool{}
	for _, c := range kindComparisons(fset, byPkg, names, named) {
		file := strings.TrimPrefix(c.file, repoRoot+"/")
		allowed := false
		for i, a := range allowedKindTests {
			if a.file == file && a.kind == c.kind {
				allowedUsed[i], allowed = true, true
			}
		}
		if !allowed {
			found = append(found, fmt.Sprintf("%s:%d: %s %s: %s", file, c.line, c.what, c.kind, driverHint))
		}
	}
	slices.Sort(found)
	for _, f := range found {
		t.Error(f)
	}
	for i, a := range allowedKindTests {
		if !allowedUsed[i] {
			t.Errorf("allowedKindTests: %s no longer compares with %s; drop the exception", a.file, a.kind)
		}
	}
}

// comparison is one test of a kind found in a file.
type comparison struct {
	file       string
	line       int
	what, kind string
}

// kindComparisons finds, in the files of each package, every comparison
// (== or !=) and every case of a switch that tests a value against one of
// the drivers' kinds.
func kindComparisons(fset *token.FileSet, byPkg map[string][]*ast.File, names map[string]bool, named map[string]map[string]bool) []comparison {
	var out []comparison
	for _, files := range byPkg {
		// The package's own names for a kind, to a fixed point: a
		// variable may be set from another.
		local := map[string]bool{}
		for changed := true; changed; {
			changed = false
			for _, f := range files {
				k := kindTests{names: names, named: named, imports: importNames(f), local: local}
				set := func(name *ast.Ident, v ast.Expr) {
					if name.Name != "_" && !local[name.Name] && k.kindOf(v) != "" {
						local[name.Name] = true
						changed = true
					}
				}
				ast.Inspect(f, func(n ast.Node) bool {
					switch x := n.(type) {
					case *ast.ValueSpec:
						for i, v := range x.Values {
							if i < len(x.Names) {
								set(x.Names[i], v)
							}
						}
					case *ast.AssignStmt:
						if x.Tok != token.DEFINE || len(x.Lhs) != len(x.Rhs) {
							return true
						}
						for i, v := range x.Rhs {
							if id, ok := x.Lhs[i].(*ast.Ident); ok {
								set(id, v)
							}
						}
					}
					return true
				})
			}
		}
		for _, f := range files {
			k := kindTests{names: names, named: named, imports: importNames(f), local: local}
			file := filepath.ToSlash(fset.Position(f.Pos()).Filename)
			report := func(at token.Pos, what, kind string) {
				out = append(out, comparison{file: file, line: fset.Position(at).Line, what: what, kind: kind})
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch x := n.(type) {
				case *ast.BinaryExpr:
					if x.Op != token.EQL && x.Op != token.NEQ {
						return true
					}
					for _, side := range []ast.Expr{x.X, x.Y} {
						if kind := k.kindOf(side); kind != "" {
							report(x.OpPos, "compares with the kind", kind)
						}
					}
				case *ast.SwitchStmt:
					for _, st := range x.Body.List {
						cc, ok := st.(*ast.CaseClause)
						if !ok {
							continue
						}
						for _, e := range cc.List {
							if kind := k.kindOf(e); kind != "" {
								report(e.Pos(), "switches on the kind", kind)
							}
						}
					}
				}
				return true
			})
		}
	}
	return out
}

// kindTests finds the expressions that stand for a driver's kind.
type kindTests struct {
	names   map[string]bool            // the drivers' kinds
	named   map[string]map[string]bool // import path -> exported names standing for a kind
	imports map[string]string          // the file's import names -> paths
	local   map[string]bool            // the package's own variables and constants set to a kind
}

// kindOf is the driver's kind that e stands for, or "".
func (k kindTests) kindOf(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.ParenExpr:
		return k.kindOf(x.X)
	case *ast.BasicLit:
		if x.Kind != token.STRING {
			return ""
		}
		if s, err := strconv.Unquote(x.Value); err == nil && k.names[s] {
			return s
		}
	case *ast.Ident:
		if k.local[x.Name] {
			return x.Name
		}
	case *ast.SelectorExpr:
		if id, ok := x.X.(*ast.Ident); ok && k.named[k.imports[id.Name]][x.Sel.Name] {
			return id.Name + "." + x.Sel.Name
		}
	case *ast.CompositeLit:
		if !isGroupKindType(x.Type) {
			return ""
		}
		for _, el := range x.Elts {
			if kv, ok := el.(*ast.KeyValueExpr); ok {
				if key, ok := kv.Key.(*ast.Ident); ok && key.Name == "Kind" {
					return k.kindOf(kv.Value)
				}
			}
		}
	}
	return ""
}

func isGroupKindType(e ast.Expr) bool {
	name := ""
	switch t := e.(type) {
	case *ast.Ident:
		name = t.Name
	case *ast.SelectorExpr:
		name = t.Sel.Name
	}
	return name == "GroupKind" || name == "GroupVersionKind"
}

// importNames maps the names f refers to its imports by to their paths.
func importNames(f *ast.File) map[string]string {
	out := map[string]string{}
	for _, im := range f.Imports {
		path, _ := strconv.Unquote(im.Path.Value)
		name := path[strings.LastIndex(path, "/")+1:]
		if im.Name != nil {
			name = im.Name.Name
		}
		out[name] = path
	}
	return out
}

// kindNamesOf lists the exported top-level variables and constants of the
// package in dir whose value names one of the drivers' kinds.
func kindNamesOf(t *testing.T, fset *token.FileSet, dir string, names map[string]bool, named map[string]map[string]bool) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	entries, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	k := kindTests{names: names, named: named, local: map[string]bool{}}
	for _, path := range entries {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		k.imports = importNames(f)
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, s := range gd.Specs {
				vs, ok := s.(*ast.ValueSpec)
				if !ok {
					continue
				}
				for i, v := range vs.Values {
					if i < len(vs.Names) && vs.Names[i].IsExported() && k.kindOf(v) != "" {
						out[vs.Names[i].Name] = true
					}
				}
			}
		}
	}
	return out
}

// TestKindComparisonsFind: each way the switches that moved into the
// drivers tested a kind is found, and a test of a kind without a driver,
// or of anything else, is not.
func TestKindComparisonsFind(t *testing.T) {
	const a = `package a

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	fl "github.com/purser-io/purser/internal/flink"
	"github.com/purser-io/purser/internal/domain/kinds"
)

var (
	jobKind   = schema.GroupKind{Group: "batch", Kind: "Job"}
	flinkKind = schema.GroupKind{Group: fl.Group, Kind: fl.KindDeployment}
	alias     = jobKind
)

func f(gk schema.GroupKind, kind, group string) {
	switch gk {
	case jobKind, flinkKind: // 18
	case kinds.ArgoWorkflow: // 19
	}
	switch kind {
	case "Job": // 22
	case fl.KindDeployment: // 23
	case "Runnable", "Secret", "Role":
	}
	_ = group == "apps" && (kind == "Deployment" || kind == "Pod") // 26
	_ = gk != alias // 27
	_ = gk == schema.GroupKind{Kind: "Pod"} // 28
	_ = kind == "Event" || kind == "Deployable" || group == "batch"
	wanted := kinds.Job
	_ = gk == wanted // 31
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "a.go", a, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, gk := range Default().Kinds() {
		names[gk.Kind] = true
	}
	named := map[string]map[string]bool{
		flinkPath: {"KindDeployment": true},
		kindsPath: {"ArgoWorkflow": true, "Job": true},
	}
	var got []string
	for _, c := range kindComparisons(fset, map[string][]*ast.File{"a": {f}}, names, named) {
		got = append(got, fmt.Sprintf("%d %s", c.line, c.kind))
	}
	slices.Sort(got)
	want := []string{"18 flinkKind", "18 jobKind", "19 kinds.ArgoWorkflow", "22 Job", "23 fl.KindDeployment",
		"26 Deployment", "26 Pod", "27 alias", "28 Pod", "31 wanted"}
	if !slices.Equal(got, want) {
		t.Errorf("found %q, want %q", got, want)
	}
}
