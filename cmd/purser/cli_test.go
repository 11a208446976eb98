package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// user runs purser client commands as a user of this machine would: with
// the client config that `purser up` writes and nothing in the
// environment.
type user struct {
	t *testing.T
	// ctx bounds the commands: that of the test that made the user,
	// which outlives the subtests that set t.
	ctx          context.Context
	bin, config  string
	env          []string
	stdin        string
	allowFailure bool
}

// run runs a command; it fails the test when the command fails, unless
// the user expects failure (fail), and returns stdout and stderr.
func (u user) run(args ...string) (string, string, error) {
	u.t.Helper()
	cmd := exec.CommandContext(u.ctx, u.bin, args...)
	cmd.Env = append(os.Environ(), append([]string{"PURSER_CONFIG=" + u.config, "PURSER_SERVER=", "PURSER_TOKEN="}, u.env...)...)
	cmd.Dir = "../.."
	cmd.Stdin = strings.NewReader(u.stdin)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if err != nil && !u.allowFailure {
		u.t.Fatalf("purser %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out.String(), errOut.String())
	}
	return out.String(), errOut.String(), err
}

// ok runs a command that must succeed and returns its standard output.
func (u user) ok(args ...string) string {
	u.t.Helper()
	out, _, _ := u.run(args...)
	return out
}

// fail runs a command that must fail and returns its standard error.
func (u user) fail(args ...string) string {
	u.t.Helper()
	u.allowFailure = true
	out, errOut, err := u.run(args...)
	if err == nil {
		u.t.Fatalf("purser %s succeeded:\n%s", strings.Join(args, " "), out)
	}
	return errOut
}

func (u user) with(stdin string) user {
	u.stdin = stdin
	return u
}

func matches(t *testing.T, what, out string, patterns ...string) {
	t.Helper()
	for _, p := range patterns {
		if !regexp.MustCompile(p).MatchString(out) {
			t.Fatalf("%s does not match %q:\n%s", what, p, out)
		}
	}
}

// startUp starts `purser up` without clusters and waits until it serves.
func startUp(t *testing.T, bin, data, config string, extra ...string) (*running, string) {
	t.Helper()
	up := startPurser(t, bin, append([]string{"up", "--data-dir", data, "--listen", "127.0.0.1:0", "--client-config", config}, extra...)...)
	up.waitLine(t, "purser is ready at http://", 2*time.Minute)
	url := regexp.MustCompile(`purser is ready at (http://\S+)`).FindStringSubmatch(up.output())[1]
	return up, url
}

// interrupt sends `purser up` the Ctrl-C of a user at its terminal.
func interrupt(t *testing.T, up *running) {
	t.Helper()
	if err := up.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatalf("interrupt purser up: %v\n%s", err, up.output())
	}
}

// terminate sends SIGTERM to a purser process, as the kubelet would.
func terminate(t *testing.T, r *running) {
	t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("terminate purser: %v\n%s", err, r.output())
	}
}

func stopUp(t *testing.T, up *running) {
	t.Helper()
	interrupt(t, up)
	up.waitExit(t, 90*time.Second)
	lines := strings.Split(strings.TrimSpace(up.output()), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "purser stopped") {
		t.Fatalf("the last line of purser up is %q, not that it stopped:\n%s", last, up.output())
	}
}

const unreachableCluster = `apiVersion: purser.io/v1alpha1
kind: Cluster
metadata:
  name: far-away
  labels: {dc: dc-9}
spec:
  kubeconfig: |
    apiVersion: v1
    kind: Config
    clusters: [{name: c, cluster: {server: "https://127.0.0.1:9"}}]
    users: [{name: u, user: {token: t}}]
    contexts: [{name: c, context: {cluster: c, user: u}}]
    current-context: c
`

// The command line as a kubectl user would try it, against `purser up`
// without clusters: contexts of two servers, apply of several files,
// folders and standard input, the get flags, history order, cluster edits,
// tokens and policy checks.
func TestCLIAsAKubectlUser(t *testing.T) {
	t.Parallel() // no clusters: it waits on the server more than it works
	bin := buildPurser(t)
	dir := t.TempDir()
	config := filepath.Join(dir, "client.yaml")
	me := user{t: t, ctx: t.Context(), bin: bin, config: config}

	var aliceToken []byte
	first, firstURL := startUp(t, bin, filepath.Join(dir, "farm-a"), config)
	second, secondURL := startUp(t, bin, filepath.Join(dir, "farm-b"), config)
	if !strings.Contains(first.output(), "context farm-a (now the current one)") {
		t.Fatalf("the first up does not say its context:\n%s", first.output())
	}
	// The first is running: the second leaves it current, and says how
	// to switch.
	if !strings.Contains(second.output(), "context farm-b; the current context stays farm-a, whose purser up is running: `purser config use-context farm-b` switches") {
		t.Fatalf("the second up does not say its context:\n%s", second.output())
	}
	if out := me.ok("config", "current-context"); out != "farm-a\n" {
		t.Fatalf("current context after the second up: %q", out)
	}
	me.ok("config", "use-context", "farm-b")

	t.Run("contexts", func(t *testing.T) {
		me.t = t
		// Both servers, one a line, with their data folders; the second
		// up did not overwrite the first.
		out := me.ok("config", "get-contexts")
		matches(t, "get-contexts", out,
			`(?m)^CURRENT\s+NAME\s+SERVER\s+DATA-DIR$`,
			`(?m)^\s+farm-a\s+`+regexp.QuoteMeta(firstURL)+`\s+`+regexp.QuoteMeta(filepath.Join(dir, "farm-a"))+`$`,
			`(?m)^\*\s+farm-b\s+`+regexp.QuoteMeta(secondURL)+`\s+`+regexp.QuoteMeta(filepath.Join(dir, "farm-b"))+`$`)
		if strings.Contains(out, "token") || len(strings.Split(strings.TrimSpace(out), "\n")) != 3 {
			t.Fatalf("get-contexts:\n%s", out)
		}
		if got := me.ok("config", "get-contexts", "-o", "name"); got != "farm-a\nfarm-b\n" {
			t.Fatalf("get-contexts -o name: %q", got)
		}
		// --context picks a server; -v and the first line of an error say
		// which one answered.
		me.ok("apply", "-f", "examples/runnable-job.yaml", "--context", "farm-a")
		if out := me.ok("get", "rn", "-n", "team-a", "--context", "farm-a", "-o", "name"); out != "runnable/nightly-report\n" {
			t.Fatalf("farm-a holds %q", out)
		}
		_, stderr, _ := me.run("get", "rn", "-n", "team-a", "-v")
		if !strings.Contains(stderr, "talking to purser at "+secondURL+" (context farm-b)") || !strings.Contains(stderr, "No runnables found in namespace team-a") {
			t.Fatalf("-v on farm-b:\n%s", stderr)
		}
		errOut := me.fail("get", "runnable", "nightly-report", "-n", "team-a")
		if first := strings.SplitN(errOut, "\n", 2)[0]; !strings.Contains(first, "purser at "+secondURL+" (context farm-b)") || !strings.Contains(first, "not found") {
			t.Fatalf("the error's first line: %q", first)
		}
		me.ok("config", "use-context", "farm-a")
		if out := me.ok("config", "current-context"); out != "farm-a\n" {
			t.Fatalf("current-context: %q", out)
		}
		me.ok("get", "runnable", "nightly-report", "-n", "team-a")
		if errOut := me.fail("get", "rn", "--context", "farm-z"); !strings.Contains(errOut, `no context "farm-z"`) {
			t.Fatalf("unknown context: %s", errOut)
		}
		// Every client command explains --server and names --context.
		help := me.ok("get", "--help")
		matches(t, "get --help", help, `--server URL\s+URL of the purser API`, `--context NAME\s+NAME of the context`)
	})
	stopUp(t, second)
	me.ok("config", "use-context", "farm-a")

	t.Run("apply", func(t *testing.T) {
		me.t = t
		conf := filepath.Join(dir, "conf")
		write := func(rel, content string) {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(conf, rel)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(conf, rel), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cm := func(name, value string) string {
			return fmt.Sprintf("apiVersion: purser.io/v1alpha1\nkind: Deployable\nmetadata: {name: %s, namespace: team-a, labels: {app: web}}\nspec:\n  template: {apiVersion: v1, kind: ConfigMap, metadata: {name: %s}, data: {v: %q}}\n", name, name, value)
		}
		write("a.yaml", cm("cfg-a", "1")+"---\n# nothing but a comment\n---\n"+cm("cfg-b", "1"))
		write("sub/c.yml", cm("cfg-c", "1"))
		write("notes.txt", "not read")

		// A folder applies its files, without its subfolders unless -R;
		// several -f apply in order; - reads standard input.
		out := me.ok("apply", "-f", conf)
		if out != "deployable/team-a/cfg-a created (generation 1, Active)\ndeployable/team-a/cfg-b created (generation 1, Active)\n" {
			t.Fatalf("apply -f DIR:\n%s", out)
		}
		out = me.ok("apply", "-f", conf, "-R")
		matches(t, "apply -f DIR -R", out, `cfg-a unchanged`, `cfg-b unchanged`, `cfg-c created`)
		out = me.with(cm("cfg-d", "1")).ok("apply", "-f", "examples/deployable-configmap.yaml", "-f", "-", "-f", filepath.Join(conf, "a.yaml"))
		matches(t, "several -f", out, `(?s)app-config created.*cfg-d created.*cfg-a unchanged.*cfg-b unchanged`)
		// An identical object again is unchanged; a changed one configured.
		write("a.yaml", cm("cfg-a", "2"))
		matches(t, "a change", me.ok("apply", "-f", filepath.Join(conf, "a.yaml")), `cfg-a configured \(generation 2`)
		matches(t, "the same runnable again", me.ok("apply", "-f", "examples/runnable-job.yaml"), `runnable/team-a/nightly-report unchanged`)

		// One bad document: nothing is applied, and every problem names
		// its file and document.
		write("bad.yaml", cm("cfg-e", "1")+"---\nkind: Deployable\nkind: Runnable\n---\n"+cm("cfg-f", "1")+"---\n- not an object\n")
		errOut := me.fail("apply", "-f", filepath.Join(conf, "bad.yaml"))
		for _, want := range []string{filepath.Join(conf, "bad.yaml") + ": document 2: not valid YAML", `"kind" already set`, "bad.yaml: document 4: not an object but a list"} {
			if !strings.Contains(errOut, want) {
				t.Errorf("the error lacks %q:\n%s", want, errOut)
			}
		}
		if out, _, _ := (user{t: t, ctx: t.Context(), bin: bin, config: config, allowFailure: true}).run("get", "dp", "cfg-e", "-n", "team-a"); out != "" {
			t.Fatalf("an object of a bad file was applied:\n%s", out)
		}
		// What the server refuses is reported per object, by place.
		errOut = me.with(cm("cfg-g", "1")+"---\napiVersion: purser.io/v1alpha1\nkind: Deployable\nmetadata: {name: cfg-h, namespace: team-a}\nspec: {template: {apiVersion: v1, kind: ConfigMap}, bogus: 1}\n").fail("apply", "-f", "-")
		matches(t, "a refused object", errOut, `<stdin>, document 2: .*spec.bogus`, `purser at `+regexp.QuoteMeta(firstURL)+` \(context farm-a\): 1 of 2 objects failed`)

		// delete -f removes what the files name.
		out = me.ok("delete", "-f", filepath.Join(conf, "sub"))
		matches(t, "delete -f", out, `deployable/team-a/cfg-c deleted`)
	})

	t.Run("get", func(t *testing.T) {
		me.t = t
		// Without a kind, the kinds.
		matches(t, "get", me.ok("get"), `(?m)^runnables\s+rn\s+true\s+Runnable$`, `(?m)^clusters\s+cl\s+false\s+Cluster$`)
		// -l, -o name, several kinds, --sort-by, jsonpath.
		if out := me.ok("get", "dp", "-n", "team-a", "-l", "app=web", "-o", "name", "--sort-by", "{.metadata.name}"); out != "deployable/cfg-a\ndeployable/cfg-b\ndeployable/cfg-d\ndeployable/cfg-g\n" {
			t.Fatalf("-l app=web -o name:\n%s", out)
		}
		if out := me.ok("get", "dp", "-n", "team-a", "-l", "app!=web", "-o", "name"); out != "deployable/app-config\n" {
			t.Fatalf("-l app!=web:\n%s", out)
		}
		out := me.ok("get", "runnables,deployables", "-n", "team-a")
		matches(t, "get runnables,deployables", out, `(?s)NAME\s+KIND\s+PHASE.*nightly-report\s+Job\s+Queued.*\n\nNAME\s+KIND\s+GENERATION.*cfg-a\s+ConfigMap\s+2`)
		// --no-headers, and the shared flags before the command, as
		// kubectl takes them.
		out = me.ok("-n", "team-a", "-v", "get", "runnables,deployables", "--no-headers")
		matches(t, "--no-headers before the command", out, `(?s)nightly-report\s+Job\s+Queued.*\n\n.*cfg-a\s+ConfigMap\s+2`)
		if strings.Contains(out, "NAME") {
			t.Fatalf("--no-headers printed a header:\n%s", out)
		}
		matches(t, "a shared flag a command lacks", me.fail("-n", "team-a", "version"), `--namespace: not a flag of "purser version"`)
		out = me.ok("get", "dp", "-n", "team-a", "--sort-by", ".status.generation", "-o", "jsonpath={.items[*].status.generation}")
		if !strings.HasSuffix(out, " 2\n") || !strings.HasPrefix(out, "1 ") {
			t.Fatalf("--sort-by .status.generation: %q", out)
		}
		if out := me.ok("get", "runnable", "nightly-report", "-n", "team-a", "-o", "jsonpath={.spec.template.kind}/{.status.phase}"); out != "Job/Queued\n" {
			t.Fatalf("jsonpath of one: %q", out)
		}
		matches(t, "a bad --phase", me.fail("get", "rn", "-n", "team-a", "--phase", "Runing"),
			`"Runing" is not a phase of a Runnable; the phases are PendingApproval, Queued, .*Running`)
		matches(t, "-o xml", me.fail("get", "rn", "-o", "xml"), `use wide, yaml, json, name, jsonpath=TEMPLATE`)
		matches(t, "--sort-by a missing field", me.fail("get", "dp", "-n", "team-a", "--sort-by", ".spec.nope"), `no object has a field`)

		// -w: the list, then each change as it happens.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		watch := exec.CommandContext(ctx, bin, "get", "dp", "-n", "team-a", "-w", "-o", "name")
		watch.Env = append(os.Environ(), "PURSER_CONFIG="+config, "PURSER_SERVER=", "PURSER_TOKEN=")
		pipe, _ := watch.StdoutPipe()
		if err := watch.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 100)
		go func() {
			sc := bufio.NewScanner(pipe)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		waitFor := func(want string) {
			t.Helper()
			timeout := time.After(time.Minute)
			for {
				select {
				case l, ok := <-lines:
					if !ok {
						t.Fatalf("get -w ended before %q", want)
					}
					if l == want {
						return
					}
				case <-timeout:
					t.Fatalf("get -w printed no %q", want)
				}
			}
		}
		waitFor("deployable/cfg-g") // the first list, to its end
		me.with("apiVersion: purser.io/v1alpha1\nkind: Deployable\nmetadata: {name: cfg-w, namespace: team-a}\n"+
			"spec:\n  template: {apiVersion: v1, kind: ConfigMap, metadata: {name: cfg-w}}\n").ok("apply", "-f", "-")
		waitFor("deployable/cfg-w")
		me.ok("delete", "dp", "cfg-w", "-n", "team-a")
		waitFor("deployable/cfg-w") // once more: gone
		cancel()
		_ = watch.Wait() // the kill of cancel: its error says only that
	})

	t.Run("history", func(t *testing.T) {
		me.t = t
		all := me.ok("history", "-o", "jsonpath={.items[*].seq}")
		seqs := strings.Fields(all)
		if len(seqs) < 5 {
			t.Fatalf("history: %q", all)
		}
		// Newest first by default; --limit 2 the two newest; with
		// --oldest-first the two oldest.
		if got := me.ok("history", "--limit", "2", "-o", "jsonpath={.items[*].seq}"); got != seqs[0]+" "+seqs[1]+"\n" || seqs[0] < seqs[1] {
			t.Fatalf("history --limit 2: %q of %q", got, all)
		}
		if got := me.ok("history", "--limit", "2", "--oldest-first", "-o", "jsonpath={.items[*].seq}"); got != "1 2\n" {
			t.Fatalf("history --limit 2 --oldest-first: %q", got)
		}
		matches(t, "history table", me.ok("history", "--limit", "1"), `(?m)^SEQ\s+TIME\s+ACTOR\s+ACTION\s+OBJECT\s+OUTCOME\s+SUMMARY\n`+seqs[0]+`\s+`)
	})

	t.Run("clusters", func(t *testing.T) {
		me.t = t
		me.with(unreachableCluster).ok("apply", "-f", "-")
		// purser judges the cluster unreachable and taints it; the list
		// counts those taints with the cluster's own, describe shows them
		// apart with the condition's reason.
		sandboxtest.Eventually(t, time.Minute, "far-away judged", func(context.Context) error {
			out := me.ok("describe", "cluster", "far-away")
			if !strings.Contains(out, "APIServerUnreachable") || !strings.Contains(out, "added by purser from its conditions") {
				return errors.New(out)
			}
			return nil
		})
		me.ok("taint", "cluster", "far-away", "maintenance=planned:NoSchedule")
		out := me.ok("get", "clusters", "-o", "wide")
		matches(t, "get clusters", out, `(?m)^far-away\s+(NotReady|Unknown)\s+dc=dc-9\s+2\s+0\s+\S+\s+APIServerUnreachable\s+\S+\s+maintenance=planned:NoSchedule,purser.io/unreachable:NoSchedule`)
		out = me.ok("describe", "cluster", "far-away")
		matches(t, "describe cluster", out, `Ready:\s+(False|Unknown) \(APIServerUnreachable\)`, `maintenance=planned:NoSchedule\s+set on the cluster`,
			`purser.io/unreachable:\S+\s+added by purser from its conditions`)

		// get -o yaml, edit, apply: the kubeconfig is not resent, and kept.
		yaml := me.ok("get", "cluster", "far-away", "-o", "yaml")
		if strings.Contains(yaml, "kubeconfig") {
			t.Fatalf("the kubeconfig is shown:\n%s", yaml)
		}
		edited := strings.Replace(yaml, "dc: dc-9", "dc: dc-10", 1)
		matches(t, "apply of an edited get", me.with(edited).ok("apply", "-f", "-"), `cluster/far-away configured`)
		matches(t, "apply of what get says", me.with(me.ok("get", "cluster", "far-away", "-o", "yaml")).ok("apply", "-f", "-"), `cluster/far-away unchanged`)
		// A stale copy (its resourceVersion is old) does not undo a newer
		// change.
		me.ok("label", "cluster", "far-away", "tier=gold")
		matches(t, "a stale apply", me.with(edited).fail("apply", "-f", "-"), `changed since resourceVersion`)

		// label, taint, cordon, drain, uncordon.
		matches(t, "label without --overwrite", me.fail("label", "cluster", "far-away", "tier=silver"), `tier is already "gold"; add --overwrite`)
		matches(t, "label --overwrite", me.ok("label", "cl/far-away", "tier=silver", "--overwrite"), `cluster/far-away labeled`)
		matches(t, "taint -", me.ok("taint", "cluster", "far-away", "maintenance-"), `cluster/far-away untainted`)
		matches(t, "cordon", me.ok("cordon", "far-away"), `cluster/far-away cordoned`)
		matches(t, "cordon again", me.ok("cordon", "cluster", "far-away"), `already cordoned`)
		matches(t, "drain", me.ok("drain", "far-away"), `cluster/far-away drained`)
		out = me.ok("get", "cluster", "far-away", "-o", "jsonpath={.metadata.labels.tier} {.spec.taints[*].key}={.spec.taints[*].effect}")
		if out != "silver purser.io/cordon=NoExecute\n" {
			t.Fatalf("after label and drain: %q", out)
		}
		matches(t, "uncordon", me.ok("uncordon", "far-away"), `cluster/far-away uncordoned`)
		matches(t, "cluster history", me.ok("history", "--kind", "clusters", "--name", "far-away"), `updated cluster far-away \(labels dc=dc-10,tier=silver, 0 taints\)`)
		if strings.Contains(me.ok("history", "--kind", "clusters", "--name", "far-away"), "new kubeconfig") {
			t.Fatal("an edit without a kubeconfig replaced it")
		}
	})

	t.Run("health of a runnable", func(t *testing.T) {
		me.t = t
		yaml := me.ok("get", "runnable", "nightly-report", "-n", "team-a", "-o", "yaml")
		out := me.with(yaml).ok("health", "-f", "-")
		matches(t, "health -f", out, `^Runnable/nightly-report \S+ \S+ judged its template, a batch/v1 Job`)
	})

	t.Run("tokens and policy", func(t *testing.T) {
		me.t = t
		aliceToken = []byte(me.ok("token", "create", "alice", "--group", "team-a"))
		token := strings.TrimSpace(string(aliceToken))
		if len(token) != 64 {
			t.Fatalf("token %q", token)
		}
		tokens, _ := os.ReadFile(filepath.Join(dir, "farm-a", "tokens.yaml"))
		if strings.Contains(string(tokens), token) || !strings.Contains(string(tokens), "user: alice") {
			t.Fatalf("tokens file:\n%s", tokens)
		}
		matches(t, "policy check", me.ok("policy", "check"), `policy.yaml is valid`)
		bad := filepath.Join(dir, "policy.yaml")
		if err := os.WriteFile(bad, []byte("admins: [admin]\nnamespaces:\n  team-a:\n    rols: {editor: [alice]}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		matches(t, "policy check of a bad file", me.fail("policy", "check", bad), `namespaces.team-a.rols: unknown field`)
	})
	// The server reloads the tokens file: alice's token authenticates
	// (any user may read the clusters) without a restart, and a wrong one
	// does not.
	t.Run("a created token works", func(t *testing.T) {
		alice := user{t: t, ctx: t.Context(), bin: bin, config: filepath.Join(dir, "none.yaml"), allowFailure: true}
		token := strings.TrimSpace(string(aliceToken))
		sandboxtest.Eventually(t, time.Minute, "alice's token accepted", func(context.Context) error {
			out, errOut, err := alice.run("get", "clusters", "--server", firstURL, "--token", token)
			if err != nil {
				return fmt.Errorf("%w: %s", err, errOut)
			}
			if !strings.Contains(out, "far-away") {
				return fmt.Errorf("clusters listed without far-away: %s", out)
			}
			return nil
		})
		matches(t, "a wrong token", alice.fail("get", "clusters", "--server", firstURL, "--token", strings.Repeat("0", 64)), `401`)
	})

	t.Run("rollout", func(t *testing.T) {
		me.t = t
		file := filepath.Join(dir, "rolled.yaml")
		dp := func(v, rollout string) {
			body := fmt.Sprintf("apiVersion: purser.io/v1alpha1\nkind: Deployable\nmetadata: {name: rolled, namespace: team-a}\nspec:\n  template: {apiVersion: v1, kind: ConfigMap, data: {v: %q}}\n%s", v, rollout)
			if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		dp("1", "")
		me.ok("apply", "-f", file)
		// One wave; far-away (unreachable) is in it and never turns
		// healthy, so the rollout stays where a user can steer it.
		dp("2", "  rollout: {waves: [{name: all}]}\n")
		me.ok("apply", "-f", file)
		status := func(want ...string) {
			t.Helper()
			sandboxtest.Eventually(t, time.Minute, "rollout status", func(context.Context) error {
				out := me.ok("rollout", "status", "rolled", "-n", "team-a")
				for _, w := range want {
					if !regexp.MustCompile(w).MatchString(out) {
						return fmt.Errorf("%q not in:\n%s", w, out)
					}
				}
				return nil
			})
		}
		status(`generation 2 \(previous 1\): Progressing at wave all`, `(?m)^far-away\s+all\s+2\s`)
		matches(t, "pause", me.ok("rollout", "pause", "rolled", "-n", "team-a"), `pause asked for generation 2`)
		status(`Paused at wave all \(PausedByUser\)`)
		me.ok("rollout", "resume", "rolled", "-n", "team-a")
		status(`Progressing at wave all`)
		me.ok("rollout", "rollback", "rolled", "-n", "team-a")
		status(`RolledBack`, `(?m)^far-away\s+all\s+1\s+\S*\s*Previous`)
		matches(t, "rollout history", me.ok("rollout", "history", "rolled", "-n", "team-a"),
			`rollout-pause`, `rollout-resume`, `rollout-rollback`, `rollout of generation 2 started \(previous 1\)`, `rolled back by hand to generation 1`)
		matches(t, "a deployable without a rollout", me.fail("rollout", "pause", "cfg-a", "-n", "team-a"), `no spec.rollout`)
		matches(t, "diff", me.ok("diff", "-f", file), `deployable/team-a/rolled`, `far-away: cannot tell`)
	})
	stopUp(t, first)
}
