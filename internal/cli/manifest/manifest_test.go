package manifest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// where lists each object as "kind/name@where".
func where(objs []*Object) string {
	var parts []string
	for _, o := range objs {
		parts = append(parts, o.Kind()+"/"+o.Name()+"@"+o.Where())
	}
	return strings.Join(parts, " ")
}

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     string   // objects, by where
		errs     []string // each must be in the error; none: no error
	}{
		{
			name: "documents, comments and empty documents",
			in:   "---\n# a comment only\n---\nkind: Runnable\nmetadata: {name: a}\n---\n\n---\nkind: Deployable\nmetadata:\n  name: b\n...\n",
			want: "Runnable/a@f, document 1 Deployable/b@f, document 2",
		},
		{
			name: "a separator with a comment",
			in:   "kind: Runnable\nmetadata: {name: a}\n--- # next\nkind: Cluster\nmetadata: {name: c}\n",
			want: "Runnable/a@f, document 1 Cluster/c@f, document 2",
		},
		{
			name: "every bad document is reported, the good ones counted",
			in:   "kind: Runnable\nmetadata: {name: a}\n---\nkind: Runnable\nkind: Deployable\n---\nkind: Cluster\nmetadata: {name: c}\n---\n- a list\n---\nmetadata: {name: nokind}\n",
			errs: []string{`f: document 2: not valid YAML`, `"kind" already set`, "f: document 4: not an object but a list", "f: document 5: the object has no kind"},
		},
		{
			name: "unparsable YAML",
			in:   "kind: Runnable\nmetadata: {name: [a\n",
			errs: []string{"f: document 1: not valid YAML"},
		},
		{
			name: "a List's items",
			in:   "apiVersion: v1\nkind: List\nitems:\n- {kind: Runnable, metadata: {name: a}}\n- {kind: Cluster, metadata: {name: c}}\n",
			want: "Runnable/a@f, document 1, items[0] Cluster/c@f, document 1, items[1]",
		},
		{
			name: "items without a kind, as an API list answer",
			in:   "items:\n- {kind: Runnable, metadata: {name: a}}\n- {metadata: {name: b}}\n",
			errs: []string{"f: document 1: items[1]: the object has no kind"},
		},
		{
			// The API's own list answer leaves the kind and apiVersion of
			// its items out; a List's items must say theirs.
			name: "a typed list's items take its kind",
			in:   "apiVersion: purser.io/v1alpha1\nkind: RunnableList\nitems:\n- {metadata: {name: a}}\n- {apiVersion: v1, kind: Cluster, metadata: {name: c}}\n",
			want: "Runnable/a@f, document 1, items[0] Cluster/c@f, document 1, items[1]",
		},
		{
			name: "a List's items keep no kind",
			in:   "apiVersion: v1\nkind: List\nitems:\n- {metadata: {name: a}}\n",
			errs: []string{"f: document 1: items[0]: the object has no kind"},
		},
		{
			name: "a JSON stream",
			in:   `{"kind": "Runnable", "metadata": {"name": "a"}}` + "\n" + `{"kind": "Cluster", "metadata": {"name": "c"}}`,
			want: "Runnable/a@f, document 1 Cluster/c@f, document 2",
		},
		{
			name: "broken JSON",
			in:   `{"kind": "Runnable", "metadata": {"name": "a"}} {"kind": `,
			errs: []string{"f: document 2: not valid JSON"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := Decode(strings.NewReader(tc.in), "f")
			if len(tc.errs) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if got := where(objs); got != tc.want {
					t.Fatalf("got  %s\nwant %s", got, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error; objects %s", where(objs))
			}
			for _, e := range tc.errs {
				if !strings.Contains(err.Error(), e) {
					t.Errorf("error lacks %q:\n%v", e, err)
				}
			}
		})
	}
}

// A YAML document is sent as written, so that the server's strict decoder
// judges the user's text; a List's items go as JSON.
func TestBodies(t *testing.T) {
	in := "kind: Runnable # the job\nmetadata: {name: a}\n---\nkind: List\nitems: [{kind: Cluster, metadata: {name: c}}]\n"
	objs, err := Decode(strings.NewReader(in), "f")
	if err != nil {
		t.Fatal(err)
	}
	if objs[0].ContentType != ContentYAML || !strings.Contains(string(objs[0].Body), "# the job") {
		t.Errorf("first body (%s): %q", objs[0].ContentType, objs[0].Body)
	}
	if objs[1].ContentType != ContentJSON || string(objs[1].Body) != `{"kind":"Cluster","metadata":{"name":"c"}}` {
		t.Errorf("item body (%s): %q", objs[1].ContentType, objs[1].Body)
	}
}

func TestRead(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, content string) string {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	obj := func(kind, name string) string { return "kind: " + kind + "\nmetadata: {name: " + name + "}\n" }
	write("b.yaml", obj("Runnable", "b"))
	write("a.yml", obj("Runnable", "a")+"---\n"+obj("Deployable", "a2"))
	write("c.json", `{"kind": "Cluster", "metadata": {"name": "c"}}`)
	write("notes.txt", "not a manifest")
	write("sub/d.yaml", obj("Runnable", "d"))
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}

	names := func(objs []*Object) string {
		var s []string
		for _, o := range objs {
			s = append(s, o.Name())
		}
		return strings.Join(s, ",")
	}
	for _, tc := range []struct {
		name  string
		paths []string
		opts  Config
		want  string
		err   string
	}{
		{name: "a folder, in lexical order, without subfolders", paths: []string{dir}, want: "a,a2,b,c"},
		{name: "-R reads the subfolders", paths: []string{dir}, opts: Config{Recursive: true}, want: "a,a2,b,c,d"},
		{name: "several -f, in order", paths: []string{filepath.Join(dir, "c.json"), filepath.Join(dir, "b.yaml")}, want: "c,b"},
		{name: "standard input", paths: []string{"-", filepath.Join(dir, "b.yaml")}, opts: Config{Stdin: strings.NewReader(obj("Runnable", "in"))}, want: "in,b"},
		{name: "standard input twice", paths: []string{"-", "-"}, err: "standard input can be read once"},
		{name: "a missing file", paths: []string{filepath.Join(dir, "nope.yaml")}, err: "no such file"},
		{name: "an empty folder", paths: []string{empty}, err: "holds no .json, .yaml, .yml file (add -R"},
		{name: "nothing", err: "no input"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := Read(tc.paths, tc.opts)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := names(objs); got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}

	// One bad file: nothing is returned, and the error names the file.
	bad := write("bad/x.yaml", obj("Runnable", "x")+"---\nkind: [\n")
	objs, err := Read([]string{filepath.Join(dir, "b.yaml"), bad}, Config{})
	if err == nil || objs != nil || !strings.Contains(err.Error(), bad+": document 2: not valid YAML") {
		t.Fatalf("Read with a bad file = %v, %v", names(objs), err)
	}
}
