package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/purser-io/purser/internal/cli/client"
	"github.com/purser-io/purser/internal/hub/store/storetest"
)

// kubectlAt runs the real kubectl, built at the sandbox's pinned version,
// as user against the API's /k8s, served over TLS (kubectl sends a token
// only over TLS) by a proxy in front of the harness.
type kubectlAt struct {
	t                    *testing.T
	bin, kubeconfig, dir string
	env                  []string // more of kubectl's environment
}

func newKubectlAt(t *testing.T, h *harness, user string) *kubectlAt {
	t.Helper()
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, kubeconfigAt(t, h, user), 0o600); err != nil {
		t.Fatal(err)
	}
	return &kubectlAt{t: t, bin: sandboxes.Binaries(t).Kubectl(), kubeconfig: kc, dir: dir}
}

// kubeconfigAt is what `purser kubeconfig` writes for user, naming the
// API's /k8s served over TLS by a proxy in front of the harness.
func kubeconfigAt(t *testing.T, h *harness, user string) []byte {
	t.Helper()
	target, err := url.Parse(h.url)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewTLSServer(httputil.NewSingleHostReverseProxy(target))
	t.Cleanup(front.Close)
	data, err := client.WriteKubeconfig(client.Kubeconfig(client.KubeconfigOptions{Server: front.URL, Name: "purser",
		Token: h.tokens[user], CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: front.Certificate().Raw})}))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// run returns kubectl's output and error output, and whether it failed;
// stdin is fed to it.
func (k *kubectlAt) run(stdin string, args ...string) (string, string, bool) {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, k.bin, append([]string{"--kubeconfig", k.kubeconfig, "--cache-dir", filepath.Join(k.dir, "cache")}, args...)...)
	c.Env = append(append(os.Environ(), "HOME="+k.dir), k.env...)
	c.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	c.Stdout, c.Stderr = &out, &errOut
	err := c.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		k.t.Fatalf("kubectl %v: %v", args, err)
	}
	return out.String(), errOut.String(), err != nil
}

func (k *kubectlAt) ok(stdin string, args ...string) string {
	k.t.Helper()
	out, errOut, failed := k.run(stdin, args...)
	if failed {
		k.t.Fatalf("kubectl %s failed:\n%s%s", strings.Join(args, " "), out, errOut)
	}
	return out
}

func (k *kubectlAt) fails(stdin, want string, args ...string) {
	k.t.Helper()
	out, errOut, failed := k.run(stdin, args...)
	if !failed || !strings.Contains(errOut, want) {
		k.t.Fatalf("kubectl %s: failed %v, want a failure saying %q:\n%s%s", strings.Join(args, " "), failed, want, out, errOut)
	}
}

// table reads kubectl's table output: its header, and each row's cells
// by column.
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

// history is the audit log, oldest first, as "actor action object".
func history(t *testing.T, h *harness) []string {
	t.Helper()
	var got []string
	for _, e := range h.get("admin", "/api/v1/history?limit=500").want(t, http.StatusOK).items() {
		got = append(got, fmt.Sprintf("%v %v %v", e["actor"], e["action"], e["object"]))
	}
	return got
}

// TestKubeWrite writes purser's kinds through /k8s with the real kubectl:
// create, apply (client-side), patch (merge and JSON), replace, delete,
// dry runs, and the REST API's refusals in the kube-apiserver's words; each
// write lands as the same write through /api/v1 does, audited with the
// caller as actor.
func TestKubeWrite(t *testing.T) {
	h := newHarness(t, storetest.Engines()[0])
	alice, bob := newKubectlAt(t, h, "alice"), newKubectlAt(t, h, "bob")

	// Discovery names the kinds and their verbs.
	res := alice.ok("", "api-resources", "--api-group=purser.io", "-o", "wide")
	for _, want := range []string{"runnables", "deployables", "quotas", "create,delete,get,list,patch,update"} {
		if !strings.Contains(res, want) {
			t.Fatalf("api-resources lacks %q:\n%s", want, res)
		}
	}

	// explain reads the OpenAPI v3 schema made from the Go types.
	if out := alice.ok("", "explain", "runnables.spec"); !strings.Contains(out, "template") || !strings.Contains(out, "purser.io") {
		t.Fatalf("explain runnables.spec:\n%s", out)
	}
	if out := alice.ok("", "explain", "runnables"); !strings.Contains(out, "one member cluster at a time") {
		t.Fatalf("explain runnables:\n%s", out)
	}

	// auth can-i answers the writes from the handlers' rule.
	for _, c := range []struct {
		k    *kubectlAt
		args []string
		want string
	}{
		{alice, []string{"create", "runnables.purser.io", "-n", "team-a"}, "yes"},
		{alice, []string{"patch", "deployables.purser.io", "-n", "team-a"}, "yes"},
		{alice, []string{"create", "runnables.purser.io", "-n", "team-z"}, "no"},
		{bob, []string{"delete", "runnables.purser.io", "-n", "team-a"}, "no"},
		{alice, []string{"update", "quotas.purser.io/team-a"}, "no"},
	} {
		out, _, _ := c.k.run("", append([]string{"auth", "can-i"}, c.args...)...)
		if got, _, _ := strings.Cut(strings.TrimSpace(out), " "); got != c.want {
			t.Errorf("auth can-i %v: %q, want %q", c.args, out, c.want)
		}
	}
	if out := alice.ok("", "auth", "can-i", "--list", "-n", "team-a"); !strings.Contains(out, "runnables.purser.io") || !strings.Contains(out, "create delete patch update]") {
		t.Errorf("auth can-i --list -n team-a:\n%s", out)
	}

	// create, then read back as a Kubernetes object.
	alice.ok(runnableYAML("team-a", "k1", "sleep 1"), "create", "-f", "-")
	y := alice.ok("", "get", "runnables", "-n", "team-a", "-o", "yaml")
	for _, want := range []string{"apiVersion: purser.io/v1alpha1", "kind: Runnable", "name: k1", "resourceVersion:", "uid:", "creationTimestamp:", "kind: List"} {
		if !strings.Contains(y, want) {
			t.Fatalf("get -o yaml lacks %q:\n%s", want, y)
		}
	}
	if _, rows := table(t, alice.ok("", "get", "runnable", "k1", "-n", "team-a")); len(rows) != 1 || rows[0]["NAME"] != "k1" || rows[0]["PHASE"] != "Queued" {
		t.Fatalf("get runnable k1: %v", rows)
	}
	if header, _ := table(t, alice.ok("", "get", "runnables", "-n", "team-a", "-o", "wide")); !slices.Contains(header, "ATTEMPTS") {
		t.Fatalf("get runnables -o wide: %v", header)
	}
	rest := h.get("alice", "/api/v1/runnables/team-a/k1").want(t, http.StatusOK)
	if rest.str("metadata", "uid") == "" || !strings.Contains(y, "uid: "+rest.str("metadata", "uid")) {
		t.Fatalf("the object read through /k8s is not the one the REST API stored:\n%s\n%s", y, rest.raw)
	}
	alice.fails(runnableYAML("team-a", "k1", "sleep 1"), "AlreadyExists", "create", "-f", "-")

	// Refusals, as the REST API's, in the kube-apiserver's words.
	bob.fails(runnableYAML("team-a", "k2", "true"), "Forbidden", "create", "-f", "-")
	alice.fails(runnableYAML("team-z", "k2", "true"), "Forbidden", "create", "-f", "-")
	bad := strings.Replace(runnableYAML("team-a", "k3", "true"), "spec:\n", "spec:\n  bogus: 1\n", 1)
	alice.fails(bad, "is invalid", "create", "-f", "-")
	if r := h.do("alice", http.MethodPost, "/k8s/apis/purser.io/v1alpha1/namespaces/team-a/runnables", "application/yaml", []byte(bad)); r.code != http.StatusUnprocessableEntity ||
		r.str("reason") != "Invalid" || !strings.Contains(string(r.raw), `"field":"spec.bogus"`) {
		t.Fatalf("an invalid runnable through /k8s: %d %s, want 422 Invalid with causes naming the field", r.code, r.raw)
	}
	h.get("alice", "/api/v1/runnables/team-a/k2").want(t, http.StatusNotFound)
	h.get("alice", "/api/v1/runnables/team-a/k3").want(t, http.StatusNotFound)

	// dryRun=All answers as the write would, and writes nothing.
	before := history(t, h)
	alice.ok(runnableYAML("team-a", "dry", "true"), "create", "--dry-run=server", "-f", "-")
	h.get("alice", "/api/v1/runnables/team-a/dry").want(t, http.StatusNotFound)
	alice.ok("", "patch", "runnable", "k1", "-n", "team-a", "--dry-run=server", "--type=merge", "-p", `{"metadata":{"labels":{"dry":"run"}}}`)
	if got := history(t, h); !slices.Equal(got, before) {
		t.Fatalf("a dry run wrote history:\n%s", strings.Join(got[len(before):], "\n"))
	}
	if h.get("alice", "/api/v1/runnables/team-a/k1").str("metadata", "labels", "dry") != "" {
		t.Fatal("a dry-run patch changed the runnable")
	}

	// patch, merge and JSON, through the REST API's update.
	alice.ok("", "patch", "runnable", "k1", "-n", "team-a", "--type=merge", "-p", `{"metadata":{"labels":{"team":"a"}}}`)
	alice.ok("", "patch", "runnable", "k1", "-n", "team-a", "--type=json", "-p", `[{"op":"add","path":"/metadata/labels/tier","value":"gold"}]`)
	got := h.get("alice", "/api/v1/runnables/team-a/k1").want(t, http.StatusOK)
	if got.str("metadata", "labels", "team") != "a" || got.str("metadata", "labels", "tier") != "gold" {
		t.Fatalf("after the patches: %s", got.raw)
	}
	bob.fails("", "Forbidden", "patch", "runnable", "k1", "-n", "team-a", "--type=merge", "-p", `{"metadata":{"labels":{"team":"b"}}}`)

	// update with a stale resourceVersion: 409 Conflict, nothing written.
	stale := strings.Replace(runnableYAML("team-a", "k1", "sleep 1"), "  namespace: team-a\n", "  namespace: team-a\n  resourceVersion: \"1\"\n", 1)
	r := h.do("alice", http.MethodPut, "/k8s/apis/purser.io/v1alpha1/namespaces/team-a/runnables/k1", "application/yaml", []byte(stale))
	if r.code != http.StatusConflict || r.str("reason") != "Conflict" || r.str("kind") != "Status" {
		t.Fatalf("PUT with a stale resourceVersion: %d %s, want 409 Conflict", r.code, r.raw)
	}

	// apply (client-side): creates, then changes through a merge patch.
	alice.ok(configMapDeployable("team-a", "cfg", "v1"), "apply", "-f", "-")
	alice.ok(configMapDeployable("team-a", "cfg", "v2"), "apply", "-f", "-")
	d := h.get("alice", "/api/v1/deployables/team-a/cfg").want(t, http.StatusOK)
	if !strings.Contains(string(d.raw), `"key":"v2"`) {
		t.Fatalf("after apply of v2: %s", d.raw)
	}

	// diff (a dry-run patch), edit (an EDITOR script), and get -o yaml
	// round-tripped through replace.
	diff, _, _ := alice.run(configMapDeployable("team-a", "cfg", "v3"), "diff", "-f", "-")
	if !strings.Contains(diff, "-      key: v2") || !strings.Contains(diff, "+      key: v3") {
		t.Fatalf("kubectl diff:\n%s", diff)
	}
	editor := filepath.Join(t.TempDir(), "editor.sh")
	if err := os.WriteFile(editor, []byte("#!/bin/sh\nsed -i 's/key: v2/key: edited/' \"$1\"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	alice.env = []string{"KUBE_EDITOR=" + editor}
	alice.ok("", "edit", "deployable", "cfg", "-n", "team-a")
	alice.env = nil
	if d := h.get("alice", "/api/v1/deployables/team-a/cfg"); !strings.Contains(string(d.raw), `"key":"edited"`) {
		t.Fatalf("after kubectl edit: %s", d.raw)
	}
	y = alice.ok("", "get", "deployable", "cfg", "-n", "team-a", "-o", "yaml")
	alice.ok(strings.Replace(y, "key: edited", "key: replaced", 1), "replace", "-f", "-")
	if d := h.get("alice", "/api/v1/deployables/team-a/cfg"); !strings.Contains(string(d.raw), `"key":"replaced"`) {
		t.Fatalf("after get -o yaml | replace: %s", d.raw)
	}

	// delete: the REST API's delete, a cancel of a runnable that has not
	// ended.
	alice.ok("", "delete", "runnable", "k1", "-n", "team-a", "--wait=false")
	if p := h.get("alice", "/api/v1/runnables/team-a/k1").str("status", "phase"); p != "Cancelled" {
		t.Fatalf("after kubectl delete the runnable is %q, want Cancelled", p)
	}
	alice.ok("", "delete", "deployable", "cfg", "-n", "team-a", "--wait=false")

	// Every write above, audited as the REST API's, alice its actor.
	want := []string{
		"alice create Runnable/team-a/k1",
		"alice update Runnable/team-a/k1",
		"alice update Runnable/team-a/k1",
		"alice create Deployable/team-a/cfg",
		"alice update Deployable/team-a/cfg",
		"alice update Deployable/team-a/cfg",
		"alice update Deployable/team-a/cfg",
		"alice cancel Runnable/team-a/k1",
		"alice delete Deployable/team-a/cfg",
	}
	if got := history(t, h); !slices.Equal(got, want) {
		t.Fatalf("history:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestKubeServerSideApply: kubectl apply --server-side by two field
// managers, the second's change of a field the first owns refused as the
// kube-apiserver refuses it (409, the conflict naming the field and its
// manager), then taken with --force-conflicts; the ownership record is
// stored with the object and served as metadata.managedFields.
func TestKubeServerSideApply(t *testing.T) {
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) { testKubeServerSideApply(t, newHarness(t, eng)) })
	}
}

func testKubeServerSideApply(t *testing.T, h *harness) {
	alice := newKubectlAt(t, h, "alice")
	labelled := func(value, label string) string {
		return strings.Replace(configMapDeployable("team-a", "cfg", value), "metadata: {name: cfg, namespace: team-a}",
			"metadata: {name: cfg, namespace: team-a, labels: {"+label+": \"yes\"}}", 1)
	}
	alice.ok(labelled("v1", "ci"), "apply", "--server-side", "--field-manager=ci", "-f", "-")
	d := h.get("alice", "/api/v1/deployables/team-a/cfg").want(t, http.StatusOK)
	if !strings.Contains(string(d.raw), `"key":"v1"`) || d.str("metadata", "labels", "ci") != "yes" {
		t.Fatalf("after the first apply: %s", d.raw)
	}
	// The same configuration again writes nothing new and conflicts with
	// nothing.
	alice.ok(labelled("v1", "ci"), "apply", "--server-side", "--field-manager=ci", "-f", "-")

	// Another manager changing the data the first owns: a conflict.
	out, errOut, failed := alice.run(labelled("v2", "ops"), "apply", "--server-side", "--field-manager=ops", "-f", "-")
	if !failed || !strings.Contains(errOut, "conflict with \"ci\"") || !strings.Contains(errOut, ".spec.template.data.key") {
		t.Fatalf("the second manager's apply: failed %v\n%s%s", failed, out, errOut)
	}
	if d := h.get("alice", "/api/v1/deployables/team-a/cfg"); !strings.Contains(string(d.raw), `"key":"v1"`) {
		t.Fatalf("a refused apply changed the deployable: %s", d.raw)
	}
	r := h.do("alice", http.MethodPatch, "/k8s/apis/purser.io/v1alpha1/namespaces/team-a/deployables/cfg?fieldManager=ops", "application/apply-patch+yaml", []byte(labelled("v2", "ops")))
	if r.code != http.StatusConflict || r.str("reason") != "Conflict" || !strings.Contains(string(r.raw), `"reason":"FieldManagerConflict"`) {
		t.Fatalf("the conflict over HTTP: %d %s", r.code, r.raw)
	}

	// --force-conflicts takes the field.
	alice.ok(labelled("v2", "ops"), "apply", "--server-side", "--field-manager=ops", "--force-conflicts", "-f", "-")
	d = h.get("alice", "/api/v1/deployables/team-a/cfg").want(t, http.StatusOK)
	if !strings.Contains(string(d.raw), `"key":"v2"`) || d.str("metadata", "labels", "ops") != "yes" {
		t.Fatalf("after the forced apply: %s", d.raw)
	}
	y := alice.ok("", "get", "deployable", "cfg", "-n", "team-a", "-o", "yaml", "--show-managed-fields")
	for _, want := range []string{"manager: ci", "manager: ops", "operation: Apply", "f:key: {}"} {
		if !strings.Contains(y, want) {
			t.Fatalf("managedFields lack %q:\n%s", want, y)
		}
	}
	// ci now owns its label only: ops owns the data.
	if i := strings.Index(y, "manager: ci"); i < 0 || strings.Contains(y[strings.LastIndex(y[:i], "- apiVersion"):i], "f:key") {
		t.Fatalf("the forced field is still ci's:\n%s", y)
	}

	// A plain write through /k8s takes the fields it changes for its
	// manager, as the kube-apiserver's does: the applier's next apply
	// meets a conflict rather than undoing the change unawares.
	alice.ok("", "patch", "deployable", "cfg", "-n", "team-a", "--type=merge", "-p", `{"spec":{"template":{"data":{"key":"patched"}}}}`)
	out, errOut, failed = alice.run(labelled("v2", "ops"), "apply", "--server-side", "--field-manager=ops", "-f", "-")
	if !failed || !strings.Contains(errOut, `conflict with "kubectl-patch"`) {
		t.Fatalf("ops's apply after kubectl patch: failed %v\n%s%s", failed, out, errOut)
	}
	if y := alice.ok("", "get", "deployable", "cfg", "-n", "team-a", "-o", "yaml", "--show-managed-fields"); !strings.Contains(y, "manager: kubectl-patch") || !strings.Contains(y, "operation: Update") {
		t.Fatalf("managedFields after kubectl patch:\n%s", y)
	}

	// Without a field manager, apply is refused as the kube-apiserver
	// refuses it.
	r = h.do("alice", http.MethodPatch, "/k8s/apis/purser.io/v1alpha1/namespaces/team-a/deployables/cfg", "application/apply-patch+yaml", []byte(labelled("v3", "x")))
	if r.code != http.StatusUnprocessableEntity || !strings.Contains(string(r.raw), "fieldManager") {
		t.Fatalf("apply without fieldManager: %d %s", r.code, r.raw)
	}

	// A server-side apply creates a runnable too, audited as alice.
	alice.ok(runnableYAML("team-a", "ssa", "true"), "apply", "--server-side", "--field-manager=ci", "-f", "-")
	h.get("alice", "/api/v1/runnables/team-a/ssa").want(t, http.StatusOK)
	hist := history(t, h)
	if !slices.Contains(hist, "alice create Runnable/team-a/ssa") || !slices.Contains(hist, "alice create Deployable/team-a/cfg") {
		t.Fatalf("history:\n%s", strings.Join(hist, "\n"))
	}
}

// TestKubeWriteClusters: clusters through /k8s are the admins' to write,
// as through /api/v1; their credentials are never served.
func TestKubeWriteClusters(t *testing.T) {
	h := newHarness(t, storetest.Engines()[0])
	admin, alice := newKubectlAt(t, h, "admin"), newKubectlAt(t, h, "alice")
	alice.fails(clusterYAML("dc9", "tok-9"), "Forbidden", "create", "-f", "-")
	alice.fails(clusterYAML("dc9", "tok-9"), "Forbidden", "apply", "--server-side", "-f", "-")
	admin.ok(clusterYAML("dc9", "tok-9"), "create", "-f", "-")
	admin.ok("", "label", "cluster", "dc9", "tier=gold", "--overwrite")
	if got := h.get("admin", "/api/v1/clusters/dc9").want(t, http.StatusOK).str("metadata", "labels", "tier"); got != "gold" {
		t.Fatalf("after kubectl label the cluster's tier is %q", got)
	}
	admin.ok(strings.Replace(clusterYAML("dc9", "tok-9"), "tier: prod", "tier: silver", 1), "apply", "--server-side", "--force-conflicts", "-f", "-")
	y := admin.ok("", "get", "clusters", "-o", "yaml")
	if !strings.Contains(y, "tier: silver") || strings.Contains(y, "tok-9") {
		t.Fatalf("clusters through /k8s:\n%s", y)
	}
	alice.fails("", "Forbidden", "delete", "cluster", "dc9", "--wait=false")
	admin.ok("", "delete", "cluster", "dc9", "--wait=false")
	h.get("admin", "/api/v1/clusters/dc9").want(t, http.StatusNotFound)
}

// TestKubeWriteSameAsREST: the same write through /api/v1 and through
// /k8s (create, then a change of spec) stores the same object and the
// same audit entry, but for the name.
func TestKubeWriteSameAsREST(t *testing.T) {
	h := newHarness(t, storetest.Engines()[0])
	h.yaml("alice", "POST", "/api/v1/runnables", runnableYAML("team-a", "via-rest", "sleep 1")).want(t, http.StatusAccepted)
	h.do("alice", "POST", "/k8s/apis/purser.io/v1alpha1/namespaces/team-a/runnables", "application/yaml", []byte(runnableYAML("team-a", "via-k8s", "sleep 1"))).want(t, http.StatusCreated)
	for _, name := range []string{"via-rest", "via-k8s"} {
		rv := h.get("alice", "/api/v1/runnables/team-a/"+name).want(t, http.StatusOK).str("metadata", "resourceVersion")
		changed := strings.Replace(runnableYAML("team-a", name, "sleep 2"), "  namespace: team-a\n", "  namespace: team-a\n  resourceVersion: \""+rv+"\"\n", 1)
		path := "/api/v1/runnables/team-a/" + name
		if name == "via-k8s" {
			path = "/k8s/apis/purser.io/v1alpha1/namespaces/team-a/runnables/" + name
		}
		h.yaml("alice", "PUT", path, changed).want(t, http.StatusOK)
	}
	strip := func(name string) string {
		r := h.get("alice", "/api/v1/runnables/team-a/"+name).want(t, http.StatusOK)
		spec, _ := json.Marshal(r.body["spec"])
		return string(spec) + " " + r.str("status", "phase") + " " + r.str("status", "submittedBy")
	}
	if a, b := strip("via-rest"), strip("via-k8s"); a != b {
		t.Fatalf("stored through /api/v1:\n%s\nthrough /k8s:\n%s", a, b)
	}
	entries := map[string][]string{}
	for _, e := range h.get("admin", "/api/v1/history?limit=500").want(t, http.StatusOK).items() {
		obj := fmt.Sprint(e["object"])
		name := obj[strings.LastIndex(obj, "/")+1:]
		delete(e, "seq")
		delete(e, "time")
		delete(e, "hash")
		delete(e, "prevHash")
		delete(e, "object")
		b, _ := json.Marshal(e)
		entries[name] = append(entries[name], strings.ReplaceAll(string(b), name, "NAME"))
	}
	if len(entries["via-rest"]) != 2 || !slices.Equal(entries["via-rest"], entries["via-k8s"]) {
		t.Fatalf("audit through /api/v1:\n%s\nthrough /k8s:\n%s", strings.Join(entries["via-rest"], "\n"), strings.Join(entries["via-k8s"], "\n"))
	}
}

// TestKubePrune: a folder applied with --prune -l keeps purser's kinds
// as the folder says: a file removed, its deployable is deleted (through
// the REST API's delete), and what the selector does not select stays.
func TestKubePrune(t *testing.T) {
	h := newHarness(t, storetest.Engines()[0])
	alice := newKubectlAt(t, h, "alice")
	dir := t.TempDir()
	labelled := func(name string) string {
		return strings.Replace(configMapDeployable("team-a", name, "v1"), "metadata: {name: "+name+", namespace: team-a}",
			"metadata: {name: "+name+", namespace: team-a, labels: {app: gitops}}", 1)
	}
	for _, name := range []string{"one", "two"} {
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(labelled(name)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	h.yaml("alice", "PUT", "/api/v1/deployables/team-a/other", configMapDeployable("team-a", "other", "v1")).want(t, http.StatusCreated)
	prune := []string{"apply", "-f", dir, "--prune", "-l", "app=gitops", "--prune-allowlist=purser.io/v1alpha1/Deployable", "-n", "team-a"}
	alice.ok("", prune...)
	if _, rows := table(t, alice.ok("", "get", "deployables", "-n", "team-a", "-l", "app=gitops")); len(rows) != 2 {
		t.Fatalf("deployables labelled app=gitops: %v", rows)
	}
	if err := os.Remove(filepath.Join(dir, "two.yaml")); err != nil {
		t.Fatal(err)
	}
	out := alice.ok("", prune...)
	if !strings.Contains(out, "deployable.purser.io/two pruned") {
		t.Fatalf("apply --prune:\n%s", out)
	}
	h.get("alice", "/api/v1/deployables/team-a/one").want(t, http.StatusOK)
	h.get("alice", "/api/v1/deployables/team-a/other").want(t, http.StatusOK)
	if !slices.Contains(history(t, h), "alice delete Deployable/team-a/two") {
		t.Fatalf("the prune is not in the history:\n%s", strings.Join(history(t, h), "\n"))
	}
}
