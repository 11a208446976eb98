package kubeapi_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/purser-io/purser/internal/cli/client"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
)

// kubectl runs the real kubectl, built at the sandbox's pinned version,
// against the farm, as user.
type kubectl struct {
	t          *testing.T
	bin        string
	kubeconfig string
	home       string
}

func newKubectl(t *testing.T, f *farm, user string) *kubectl {
	t.Helper()
	return newKubectlWith(t, client.KubeconfigOptions{Server: f.url, Name: "purser",
		Clusters: []string{"c1", "c2"}, Token: f.tokens[user], CAData: f.caPEM()})
}

func newKubectlWith(t *testing.T, opts client.KubeconfigOptions) *kubectl {
	t.Helper()
	home := t.TempDir()
	kc := filepath.Join(home, "kubeconfig")
	// What `purser kubeconfig` writes: the farm's context, and each
	// cluster's.
	data, err := client.WriteKubeconfig(client.Kubeconfig(opts))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kc, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return &kubectl{t: t, bin: env.Binaries(t).Kubectl(), kubeconfig: kc, home: home}
}

func (k *kubectl) cmd(ctx context.Context, args ...string) *exec.Cmd {
	c := exec.CommandContext(ctx, k.bin, append([]string{"--kubeconfig", k.kubeconfig, "--cache-dir", filepath.Join(k.home, "cache")}, args...)...)
	c.Env = append(os.Environ(), "HOME="+k.home, "KUBECTL_INTERACTIVE_DELETE=false")
	return c
}

// run returns kubectl's output and error output; failed says whether
// it exited non-zero.
func (k *kubectl) run(args ...string) (stdout, stderr string, failed bool) {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := k.cmd(ctx, args...)
	var out, errOut bytes.Buffer
	c.Stdout, c.Stderr = &out, &errOut
	err := c.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		k.t.Fatalf("kubectl %v: %v", args, err)
	}
	return out.String(), errOut.String(), err != nil
}

func (k *kubectl) ok(args ...string) string {
	k.t.Helper()
	out, errOut, failed := k.run(args...)
	if failed {
		k.t.Fatalf("kubectl %s failed:\n%s%s", strings.Join(args, " "), out, errOut)
	}
	return out
}

// table reads kubectl's table output: its header's columns, and each
// row's cells by column.
func table(t *testing.T, out string) (header []string, rows []map[string]string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) == 0 || lines[0] == "" {
		return nil, nil
	}
	split := regexp.MustCompile(`\s{2,}`)
	header = split.Split(strings.TrimSpace(lines[0]), -1)
	for _, l := range lines[1:] {
		cells := split.Split(strings.TrimSpace(l), -1)
		row := map[string]string{}
		for i, h := range header {
			if i < len(cells) {
				row[h] = cells[i]
			}
		}
		rows = append(rows, row)
	}
	return header, rows
}

func rowNames(rows []map[string]string) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r["CLUSTER"]+"/"+r["NAMESPACE"]+"/"+r["NAME"])
	}
	return out
}

// TestKubectl runs the real kubectl against the farm: get across
// clusters with a CLUSTER column, get by name, label selection, -o wide,
// watch, a stale cluster's warning, the policy's namespace rights, auth
// can-i, and a write refused.
func TestKubectl(t *testing.T) {
	f := newFarm(t, storetest.Engines()[0])
	for _, c := range []string{"c1", "c2"} {
		f.put(configMap(c, "team-a", "settings", map[string]string{"a": "1", "b": "2"}, map[string]string{"app": "web"}))
		f.put(configMap(c, "team-b", "other", map[string]string{"a": "1"}, nil))
	}
	f.put(configMap("c2", "team-a", "only-c2", nil, map[string]string{"app": "db"}))
	// A Node, which the agents track by default: refused to bob, and so is
	// '*' in its group.
	f.put(object{cluster: "c1", apiVersion: "v1", kind: "Node", name: "node-1"})
	f.put(object{cluster: "c1", apiVersion: "batch/v1", kind: "Job", namespace: "team-a", name: "train", body: map[string]any{
		"spec": map[string]any{"completions": 1, "selector": map[string]any{"matchLabels": map[string]any{"job": "train"}},
			"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "main", "image": "busybox:1"}}}}},
		"status": map[string]any{"succeeded": 1, "startTime": "2026-12-01T10:00:00Z", "completionTime": "2026-12-01T10:00:42Z",
			"conditions": []any{map[string]any{"type": "Complete", "status": "True"}}},
	}})
	// A Workflow, and its CRD as the agent reports it, whose columns
	// (those of Argo's CRD) the Table follows.
	f.put(object{cluster: "c1", apiVersion: "apiextensions.k8s.io/v1", kind: "CustomResourceDefinition", name: "workflows.argoproj.io",
		body: map[string]any{"spec": map[string]any{"group": "argoproj.io", "scope": "Namespaced",
			"names": map[string]any{"kind": "Workflow", "plural": "workflows", "singular": "workflow", "shortNames": []any{"wf"}},
			"versions": []any{map[string]any{"name": "v1alpha1", "additionalPrinterColumns": []any{
				map[string]any{"name": "Status", "type": "string", "jsonPath": ".status.phase"},
				map[string]any{"name": "Age", "type": "date", "jsonPath": ".status.startedAt"},
				map[string]any{"name": "Message", "type": "string", "jsonPath": ".status.message", "priority": 1},
			}}}}}})
	f.put(object{cluster: "c2", apiVersion: "argoproj.io/v1alpha1", kind: "Workflow", namespace: "team-a", name: "etl",
		body: map[string]any{"status": map[string]any{"phase": "Running", "startedAt": time.Now().Add(-20 * time.Minute).UTC().Format(time.RFC3339), "message": "step 2 of 3"}}})
	admin := newKubectl(t, f, "admin")
	header, rows := table(t, admin.ok("get", "wf", "-A", "-o", "wide"))
	if want := "NAMESPACE,NAME,CLUSTER,STATUS,AGE,MESSAGE"; strings.Join(header, ",") != want {
		t.Errorf("kubectl get wf -A -o wide: columns %v, want %s", header, want)
	}
	if len(rows) != 1 || rows[0]["STATUS"] != "Running" || rows[0]["AGE"] != "20m" || rows[0]["MESSAGE"] != "step 2 of 3" || rows[0]["CLUSTER"] != "c2" {
		t.Errorf("kubectl get wf -A -o wide: rows %v", rows)
	}

	// Across the farm: the same name in both clusters is two rows.
	header, rows = table(t, admin.ok("get", "configmaps", "-A"))
	if want := []string{"NAMESPACE", "NAME", "CLUSTER", "DATA", "AGE"}; strings.Join(header, ",") != strings.Join(want, ",") {
		t.Errorf("kubectl get cm -A: columns %v, want %v", header, want)
	}
	if got, want := strings.Join(rowNames(rows), " "), "c1/team-a/settings c2/team-a/settings c2/team-a/only-c2 c1/team-b/other c2/team-b/other"; !sameSet(got, want) {
		t.Errorf("kubectl get cm -A: rows %s, want %s", got, want)
	}
	for _, r := range rows {
		if r["NAME"] == "settings" && r["DATA"] != "2" {
			t.Errorf("kubectl get cm -A: settings in %s has DATA %q, want 2", r["CLUSTER"], r["DATA"])
		}
	}
	// By name: both clusters' objects.
	_, rows = table(t, admin.ok("get", "cm", "settings", "-n", "team-a"))
	if got := strings.Join(rowNames(rows), " "); !sameSet(got, "c1//settings c2//settings") {
		t.Errorf("kubectl get cm settings: rows %s", got)
	}
	// One cluster's context.
	_, rows = table(t, admin.ok("--context", "purser-c1", "get", "cm", "-A"))
	if got := strings.Join(rowNames(rows), " "); !sameSet(got, "c1/team-a/settings c1/team-b/other") {
		t.Errorf("kubectl --context purser-c1 get cm -A: rows %s", got)
	}
	// Label and field selection.
	_, rows = table(t, admin.ok("get", "cm", "-A", "-l", "app in (web,db)", "--field-selector", "cluster=c2"))
	if got := strings.Join(rowNames(rows), " "); !sameSet(got, "c2/team-a/settings c2/team-a/only-c2") {
		t.Errorf("kubectl get cm -l 'app in (web,db)' --field-selector cluster=c2: rows %s", got)
	}
	// A Job's columns, and -o wide's.
	header, rows = table(t, admin.ok("get", "jobs", "-n", "team-a", "-o", "wide"))
	if want := "NAME,CLUSTER,STATUS,COMPLETIONS,DURATION,AGE,CONTAINERS,IMAGES,SELECTOR"; strings.Join(header, ",") != want {
		t.Errorf("kubectl get jobs -o wide: columns %v, want %s", header, want)
	}
	if len(rows) != 1 || rows[0]["STATUS"] != "Complete" || rows[0]["COMPLETIONS"] != "1/1" || rows[0]["DURATION"] != "42s" ||
		rows[0]["IMAGES"] != "busybox:1" || rows[0]["SELECTOR"] != "job=train" {
		t.Errorf("kubectl get jobs -o wide: rows %v", rows)
	}
	header, _ = table(t, admin.ok("get", "jobs", "-n", "team-a"))
	if want := "NAME,CLUSTER,STATUS,COMPLETIONS,DURATION,AGE"; strings.Join(header, ",") != want {
		t.Errorf("kubectl get jobs: columns %v, want %s", header, want)
	}
	// An object as JSON carries its cluster; a sort needs the objects.
	if out := admin.ok("--context", "purser-c1", "get", "cm", "settings", "-n", "team-a", "-o", "jsonpath={.metadata.annotations.purser\\.io/cluster}"); out != "c1" {
		t.Errorf("kubectl get -o jsonpath: cluster annotation %q, want c1", out)
	}
	if out := admin.ok("get", "cm", "-n", "team-b", "--sort-by", ".metadata.annotations.purser\\.io/cluster", "-o", "name"); out != "configmap/other\nconfigmap/other\n" {
		t.Errorf("kubectl get --sort-by: %q", out)
	}

	// Writes are refused, pointing at purser's API.
	out, errOut, failed := admin.run("create", "configmap", "x", "-n", "team-a")
	if !failed || !strings.Contains(errOut, "read-only") || !strings.Contains(errOut, "/api/v1") {
		t.Errorf("kubectl create: failed=%v, %s%s; want refused as read-only, pointing at /api/v1", failed, out, errOut)
	}

	// bob views team-a only.
	bob := newKubectl(t, f, "bob")
	_, rows = table(t, bob.ok("get", "cm", "-n", "team-a"))
	if got := strings.Join(rowNames(rows), " "); !sameSet(got, "c1//settings c2//settings c2//only-c2") {
		t.Errorf("bob: kubectl get cm -n team-a: rows %s", got)
	}
	if _, errOut, failed := bob.run("get", "cm", "-n", "team-b"); !failed || !strings.Contains(errOut, "Forbidden") {
		t.Errorf("bob: kubectl get cm -n team-b: failed=%v %s; want Forbidden", failed, errOut)
	}
	if _, errOut, failed := bob.run("get", "cm", "-A"); !failed || !strings.Contains(errOut, "Forbidden") {
		t.Errorf("bob: kubectl get cm -A: failed=%v %s; want Forbidden", failed, errOut)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"list", "configmaps", "-n", "team-a"}, "yes"},
		{[]string{"watch", "jobs.batch", "-n", "team-a"}, "yes"},
		{[]string{"list", "configmaps", "-n", "team-b"}, "no"},
		{[]string{"list", "configmaps", "-A"}, "no"},
		{[]string{"create", "configmaps", "-n", "team-a"}, "no"},
		// Nodes are refused to bob: '*' is not every resource to him.
		{[]string{"list", "*", "-n", "team-a"}, "no"},
		{[]string{"list", "nodes"}, "no"},
	} {
		// kubectl prints yes or no, then the reason, if any.
		out, _, _ := bob.run(append([]string{"auth", "can-i"}, c.args...)...)
		if answer, _, _ := strings.Cut(strings.TrimSpace(out), " "); answer != c.want {
			t.Errorf("bob: kubectl auth can-i %s: %q, want %s", strings.Join(c.args, " "), out, c.want)
		}
	}
	// The rules list what the policy grants: the namespaced resources by
	// name, not *.* (Nodes stay refused).
	if out := bob.ok("auth", "can-i", "--list", "-n", "team-a"); strings.Contains(out, "*.*") || strings.Contains(out, "nodes") ||
		!strings.Contains(out, "configmaps") || !strings.Contains(out, "jobs.batch") || !strings.Contains(out, "[get list watch]") {
		t.Errorf("bob: kubectl auth can-i --list -n team-a:\n%s", out)
	}
	if out := bob.ok("auth", "can-i", "--list", "-n", "team-b"); strings.Contains(out, "*.*") || strings.Contains(out, "configmaps") {
		t.Errorf("bob: kubectl auth can-i --list -n team-b lists reads:\n%s", out)
	}
	if out := admin.ok("auth", "can-i", "list", "*", "-n", "team-a"); !strings.HasPrefix(out, "yes") {
		t.Errorf("admin: kubectl auth can-i list '*' -n team-a: %q", out)
	}

	// Watch: the list, then each change as it is stored.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w := admin.cmd(ctx, "get", "cm", "-n", "team-a", "-w")
	stdout, err := w.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var werr bytes.Buffer
	w.Stderr = &werr
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = w.Wait() }()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	expect := func(what string, match func(string) bool) {
		t.Helper()
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("kubectl get -w ended before %s: %s", what, werr.String())
				}
				if match(l) {
					return
				}
			case <-ctx.Done():
				t.Fatalf("kubectl get -w: no line for %s", what)
			}
		}
	}
	expect("the header", func(l string) bool { return strings.HasPrefix(l, "NAME") && strings.Contains(l, "CLUSTER") })
	expect("the listed only-c2", func(l string) bool { return strings.HasPrefix(l, "only-c2 ") })
	f.put(configMap("c1", "team-a", "watched", map[string]string{"x": "1", "y": "2", "z": "3"}, nil))
	expect("the new ConfigMap in c1", func(l string) bool {
		f := strings.Fields(l)
		return len(f) >= 3 && f[0] == "watched" && f[1] == "c1" && f[2] == "3"
	})
	f.put(configMap("c2", "team-a", "watched", nil, nil))
	expect("the same name in c2", func(l string) bool {
		f := strings.Fields(l)
		return len(f) >= 3 && f[0] == "watched" && f[1] == "c2" && f[2] == "0"
	})
	cancel()

	// A cluster whose agent went silent is named in a warning, which
	// kubectl prints, and its records are still listed.
	f.tx(func(tx *store.Tx) error {
		return tx.Clusters().Create(context.Background(), &store.Cluster{Name: "c3"})
	})
	f.heartbeat("c3", time.Now().Add(-5*time.Minute))
	f.put(configMap("c3", "team-b", "kept", nil, nil))
	out, errOut, failed = admin.run("get", "cm", "-n", "team-b")
	if failed || !strings.Contains(out, "kept") || !regexp.MustCompile(`Warning: cluster c3: its records may be stale \(agent silent`).MatchString(errOut) {
		t.Errorf("kubectl get cm with c3's agent silent: failed=%v\n%s%s\nwant c3's record and a warning naming c3", failed, out, errOut)
	}
	if strings.Contains(errOut, "cluster c1") || strings.Contains(errOut, "cluster c2") {
		t.Errorf("kubectl get cm: warnings name fresh clusters: %s", errOut)
	}
}

// TestKubectlThroughProxy: kubectl sends no credential to an http://
// server, so a purser served over plain HTTP is read through the proxy of
// `purser kubeconfig --proxy`, which adds the user's.
func TestKubectlThroughProxy(t *testing.T) {
	f := newFarm(t, storetest.Engines()[0])
	f.put(configMap("c1", "team-a", "settings", nil, nil))
	f.put(configMap("c2", "team-b", "settings", nil, nil))
	plain := httptest.NewServer(f.handler)
	t.Cleanup(plain.Close)
	if !client.NeedsProxy(plain.URL) {
		t.Fatalf("%s needs no proxy, says NeedsProxy", plain.URL)
	}
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- client.KubeProxy(ctx, ln, plain.URL, func(context.Context) (string, error) { return f.tokens["bob"], nil })
	}()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("the proxy: %v", err)
		}
	}()
	bob := newKubectlWith(t, client.KubeconfigOptions{Server: "http://" + ln.Addr().String(), Name: "purser", Clusters: []string{"c1", "c2"}})
	_, rows := table(t, bob.ok("get", "cm", "-n", "team-a"))
	if got := strings.Join(rowNames(rows), " "); got != "c1//settings" {
		t.Errorf("through the proxy, bob: kubectl get cm -n team-a: rows %s", got)
	}
	if _, errOut, failed := bob.run("--context", "purser-c2", "get", "cm", "-n", "team-b"); !failed || !strings.Contains(errOut, "Forbidden") {
		t.Errorf("through the proxy, bob: kubectl get cm -n team-b: failed=%v %s; want Forbidden (bob's credential, not more)", failed, errOut)
	}
}

func sameSet(a, b string) bool {
	x, y := strings.Fields(a), strings.Fields(b)
	if len(x) != len(y) {
		return false
	}
	seen := map[string]int{}
	for _, s := range x {
		seen[s]++
	}
	for _, s := range y {
		seen[s]--
	}
	for _, n := range seen {
		if n != 0 {
			return false
		}
	}
	return true
}
