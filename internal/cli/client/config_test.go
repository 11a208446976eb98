package client

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// dead: no other `purser up` is alive.
func dead(Context) bool { return false }

func TestSaveUpContext(t *testing.T) {
	f := &File{}
	if n, cur := SaveUpContext(f, Context{DataDir: "/a/purser-data", Server: "http://a:1", Token: "ta"}, dead); n != "purser-data" || !cur {
		t.Fatalf("first context named %q, current %v", n, cur)
	}
	// Another folder of the same name gets a name of its own.
	if n, _ := SaveUpContext(f, Context{DataDir: "/b/purser-data", Server: "http://b:1", Token: "tb"}, dead); n != "purser-data-2" {
		t.Fatalf("second context named %q", n)
	}
	// A restart of the first refreshes its context and makes it current.
	if n, _ := SaveUpContext(f, Context{DataDir: "/a/purser-data", Server: "http://a:2", Token: "ta2"}, dead); n != "purser-data" || f.CurrentContext != "purser-data" {
		t.Fatalf("refresh named %q, current %q", n, f.CurrentContext)
	}
	if len(f.Contexts) != 2 || f.Contexts[0] != (Context{Name: "purser-data", Server: "http://a:2", Token: "ta2", DataDir: "/a/purser-data"}) {
		t.Fatalf("contexts %+v", f.Contexts)
	}
	// While the current one's `purser up` is alive, another up adds its
	// context and leaves the current one.
	alive := func(c Context) bool { return c.DataDir == "/a/purser-data" }
	if n, cur := SaveUpContext(f, Context{DataDir: "/c/demo", Server: "http://c:1", Token: "tc"}, alive); n != "demo" || cur || f.CurrentContext != "purser-data" {
		t.Fatalf("beside a live up: named %q, current %v (%q)", n, cur, f.CurrentContext)
	}
}

func TestPrune(t *testing.T) {
	here := t.TempDir()
	f := &File{CurrentContext: "gone", Contexts: []Context{
		{Name: "gone", Server: "http://g", DataDir: filepath.Join(here, "removed")},
		{Name: "answers", Server: "http://a", DataDir: filepath.Join(here, "removed-too")},
		{Name: "kept", Server: "http://k", DataDir: here},
		{Name: "remote", Server: "http://r"},
	}}
	gone := f.Prune(func(c Context) bool { return c.Server == "http://a" })
	if strings.Join(gone, ",") != "gone" || strings.Join(f.Names(), ",") != "answers,kept,remote" || f.CurrentContext != "" {
		t.Fatalf("pruned %v, left %v, current %q", gone, f.Names(), f.CurrentContext)
	}
}

func TestResolve(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	f := &File{}
	SaveUpContext(f, Context{DataDir: "/x/one", Server: "http://one", Token: "t1"}, dead)
	SaveUpContext(f, Context{DataDir: "/x/two", Server: "http://two", Token: "t2"}, dead)
	if err := EditFile(path, func(g *File) error { *g = *f; return nil }); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PURSER_SERVER", "")
	t.Setenv("PURSER_TOKEN", "")
	for _, tc := range []struct {
		name string
		sel  Selection
		env  [2]string
		want Config
		err  string
	}{
		{name: "current context", want: Config{Server: "http://two", Token: "t2", Context: "two"}},
		{name: "--context", sel: Selection{Context: "one"}, want: Config{Server: "http://one", Token: "t1", Context: "one"}},
		{name: "--context over the environment", sel: Selection{Context: "one"}, env: [2]string{"http://env", "te"},
			want: Config{Server: "http://one", Token: "t1", Context: "one"}},
		{name: "the environment over the current context", env: [2]string{"http://env", "te"}, want: Config{Server: "http://env", Token: "te"}},
		{name: "flags over everything", sel: Selection{Server: "http://flag", Token: "tf", Context: "one"}, want: Config{Server: "http://flag", Token: "tf"}},
		{name: "a context's token goes only to its server", sel: Selection{Server: "http://elsewhere"}, err: "no token for http://elsewhere"},
		{name: "--server of a context", sel: Selection{Server: "http://one", Context: "one"}, want: Config{Server: "http://one", Token: "t1", Context: "one"}},
		{name: "no such context", sel: Selection{Context: "three"}, err: `no context "three"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("PURSER_SERVER", tc.env[0])
			t.Setenv("PURSER_TOKEN", tc.env[1])
			tc.sel.ConfigPath = path
			got, err := Resolve(tc.sel)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Resolve = %+v, %v; want error %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Resolve = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// A config written before contexts is read as one context, "default".
func TestLegacyConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte("server: http://old\ntoken: t\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PURSER_SERVER", "")
	t.Setenv("PURSER_TOKEN", "")
	got, err := Resolve(Selection{ConfigPath: path})
	if err != nil || got != (Config{Server: "http://old", Token: "t", Context: LegacyContext}) {
		t.Fatalf("Resolve = %+v, %v", got, err)
	}
	if err := EditFile(path, func(f *File) error {
		SaveUpContext(f, Context{DataDir: "/d/purser-data", Server: "http://new", Token: "n"}, dead)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	f, err := ReadFile(path)
	if err != nil || len(f.Contexts) != 2 || f.Contexts[0].Name != LegacyContext || f.CurrentContext != "purser-data" {
		t.Fatalf("after an up: %+v, %v", f, err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("config mode %v", fi.Mode().Perm())
	}
}
