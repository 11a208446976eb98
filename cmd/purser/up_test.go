package main

import (
	"context"
	"encoding/base64"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"sigs.k8s.io/yaml"

	"github.com/purser-io/purser/internal/anchor"
	"github.com/purser-io/purser/internal/auth"
	"github.com/purser-io/purser/internal/store/storetest"
	"github.com/purser-io/purser/internal/stream"
	"github.com/purser-io/purser/internal/stream/streamtest"
)

// cli runs a purser client command with the environment of a user on the
// machine where `purser up` runs, and returns its combined output.
func cli(t *testing.T, bin, clientConfig string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "PURSER_CONFIG="+clientConfig, "PURSER_SERVER=", "PURSER_TOKEN=")
	cmd.Dir = "../.."
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("purser %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func mustContain(t *testing.T, what, out string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Fatalf("%s lacks %q:\n%s", what, w, out)
		}
	}
}

// The README's walk-through: `purser up --sandbox`, apply an example, see
// it in get and history; then a restart on the same data dir keeps it all.
func TestUpApplyGetHistory(t *testing.T) {
	bin := buildPurser(t)
	data := filepath.Join(t.TempDir(), "data")
	clientConfig := filepath.Join(t.TempDir(), "client.yaml")
	start := func() *running {
		up := startPurser(t, bin, "up", "--data-dir", data, "--listen", "127.0.0.1:0", "--sandbox", "1", "--client-config", clientConfig)
		up.waitLine(t, "purser is ready at http://", 30*time.Minute)
		return up
	}
	up := start()
	for _, f := range []string{"admin.token", "tokens.yaml", "policy.yaml", "secret.key"} {
		if fi, err := os.Stat(filepath.Join(data, f)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, mode %v (want 0600)", f, err, fi.Mode().Perm())
		}
	}
	token, _ := os.ReadFile(filepath.Join(data, "admin.token"))
	if tokens, _ := os.ReadFile(filepath.Join(data, "tokens.yaml")); strings.Contains(string(tokens), strings.TrimSpace(string(token))) {
		t.Fatal("tokens.yaml holds the admin token in clear")
	}

	out := cli(t, bin, clientConfig, "apply", "-f", "examples/runnable-job.yaml")
	mustContain(t, "apply", out, "runnable/team-a/nightly-report submitted (Queued)")
	out = cli(t, bin, clientConfig, "apply", "-f", "examples/runnable-job.yaml")
	mustContain(t, "second apply", out, "unchanged")
	out = cli(t, bin, clientConfig, "apply", "-f", "examples/deployable-secret.yaml")
	mustContain(t, "apply secret", out, "deployable/team-a/db-credentials created (generation 1")

	// The submitter places the Job, the agent and the ingester see it run
	// and complete on the sandbox cluster.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		out = cli(t, bin, clientConfig, "get", "runnables", "-n", "team-a")
		if regexp.MustCompile(`nightly-report\s+Job\s+Succeeded\s+sandbox-1\s+Healthy`).MatchString(out) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Job did not reach Succeeded:\n%s", out)
		}
		time.Sleep(time.Second)
	}
	// The inventory, from the database, knows the Job and its health.
	out = cli(t, bin, clientConfig, "inventory", "-n", "team-a", "--kind", "Job", "-l", "purser.io/runnable=nightly-report")
	if !regexp.MustCompile(`sandbox-1\s+team-a\s+Job\s+nightly-report\s+Healthy\s+Succeeded`).MatchString(out) {
		t.Fatalf("inventory:\n%s", out)
	}
	// The Job's status settles after the verdict (SuccessCriteriaMet comes
	// before the pod counts, Complete after): the kept result follows it.
	deadline = time.Now().Add(time.Minute)
	for {
		out = cli(t, bin, clientConfig, "get", "runnable", "nightly-report", "-n", "team-a", "-o", "json")
		if strings.Contains(out, `"succeeded": 1`) && strings.Contains(out, `"type": "Complete"`) || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	mustContain(t, "the kept result", out, `"succeeded": 1`, `"type": "Complete"`, `"result": "Succeeded"`)
	out = cli(t, bin, clientConfig, "get", "clusters")
	if !regexp.MustCompile(`sandbox-1\s+\S+\s+dc=dc-1`).MatchString(out) {
		t.Fatalf("get clusters:\n%s", out)
	}
	out = cli(t, bin, clientConfig, "get", "deployable", "db-credentials", "-n", "team-a", "-o", "yaml")
	if strings.Contains(out, "change-me") {
		t.Fatalf("the CLI shows a Secret value:\n%s", out)
	}
	out = cli(t, bin, clientConfig, "history")
	mustContain(t, "history", out, "admin", "create", "Cluster/sandbox-1", "Runnable/team-a/nightly-report", "Deployable/team-a/db-credentials",
		"submitter", "place", "submit", "ingester", "observe")
	mustContain(t, "history --verify", cli(t, bin, clientConfig, "history", "--verify"), "audit chain intact")
	out = cli(t, bin, clientConfig, "describe", "runnable", "nightly-report", "-n", "team-a")
	mustContain(t, "describe", out, "Phase:", "Succeeded", "#1  sandbox-1", "History:", "submitted", "succeeded on sandbox-1")

	up.cmd.Process.Signal(syscall.SIGINT)
	up.waitExit(t, 90*time.Second)
	assertNoSandboxProcess(t, filepath.Join(data, "sandbox"))

	up = start()
	out = cli(t, bin, clientConfig, "get", "runnables", "-A")
	mustContain(t, "get after restart", out, "nightly-report")
	out = cli(t, bin, clientConfig, "history", "--kind", "clusters")
	mustContain(t, "cluster history after restart", out, "create", "update")
	up.cmd.Process.Signal(syscall.SIGTERM)
	up.waitExit(t, 90*time.Second)
	assertNoSandboxProcess(t, filepath.Join(data, "sandbox"))
}

// writeAPIFiles writes what `purser api` needs to start: tokens, policy
// and key; it returns the admin token.
func writeAPIFiles(t *testing.T, dir string) string {
	t.Helper()
	token := auth.NewToken()
	tokens, _ := yaml.Marshal(auth.TokensFile{Tokens: []auth.TokenEntry{{User: "admin", SHA256: auth.HashToken(token)}}})
	policy, _ := yaml.Marshal(auth.PolicyFile{Admins: []string{"admin"}})
	key := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", 32)))
	for name, data := range map[string]string{"tokens.yaml": string(tokens), "policy.yaml": string(policy), "secret.key": key} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := anchor.EnsureKeyFile(filepath.Join(dir, "audit.key")); err != nil {
		t.Fatal(err)
	}
	return token
}

// A `purser api` killed after it accepted submissions that it could not
// yet publish (the stream was down) loses none of them: the next one
// publishes every outbox row, once.
func TestAPICrashLosesNoSubmission(t *testing.T) {
	bin := buildPurser(t)
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			dir := t.TempDir()
			token := writeAPIFiles(t, dir)
			dsn := eng.NewDSN(t)
			nats := streamtest.Start(t, "")
			apiArgs := func(listen string) []string {
				return []string{"api", "--database", dsn, "--nats", nats.URL, "--listen", listen,
					"--tokens", filepath.Join(dir, "tokens.yaml"), "--policy", filepath.Join(dir, "policy.yaml"),
					"--audit-key", filepath.Join(dir, "audit.key"),
					"--key-file", filepath.Join(dir, "secret.key")}
			}
			listen := freeAddr(t)
			api := startPurser(t, bin, apiArgs(listen)...)
			api.waitLine(t, "listening on", time.Minute)
			env := []string{"PURSER_SERVER=http://" + listen, "PURSER_TOKEN=" + token, "PURSER_CONFIG=/nonexistent"}

			nats.Stop()
			var names []string
			for _, n := range []string{"a", "b", "c"} {
				name := "crash-" + n
				names = append(names, name)
				body := strings.Replace(mustRead(t, "../../examples/runnable-job.yaml"), "name: nightly-report", "name: "+name, 1)
				cmd := exec.Command(bin, "apply", "-f", "-")
				cmd.Env = append(os.Environ(), env...)
				cmd.Stdin = strings.NewReader(body)
				if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "submitted") {
					t.Fatalf("apply with the stream down: %v\n%s", err, out)
				}
			}
			api.cmd.Process.Kill() // kill -9: no chance to publish or clean up
			<-api.done

			if n := countRows(t, dsn, "outbox"); n != 3 {
				t.Fatalf("outbox holds %d rows after the crash, want 3", n)
			}
			nats.Restart()
			listen = freeAddr(t)
			api = startPurser(t, bin, apiArgs(listen)...)
			api.waitLine(t, "listening on", time.Minute)

			ids := drainSubmissions(t, nats.URL, 3)
			if len(ids) != 3 {
				t.Fatalf("stream holds %v, want the 3 submissions once each", ids)
			}
			deadline := time.Now().Add(30 * time.Second)
			for countRows(t, dsn, "outbox") != 0 {
				if time.Now().After(deadline) {
					t.Fatal("outbox not drained after the restart")
				}
				time.Sleep(100 * time.Millisecond)
			}
			api.cmd.Process.Signal(syscall.SIGTERM)
			api.waitExit(t, 30*time.Second)
		})
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func countRows(t *testing.T, dsn, table string) int {
	t.Helper()
	db := storetest.RawDB(t, dsn)
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM " + table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// drainSubmissions reads the submissions stream as a submitter would.
func drainSubmissions(t *testing.T, url string, want int) []string {
	t.Helper()
	c := streamtest.Connect(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cons, err := c.JetStream().Consumer(ctx, stream.SubmissionsStream, stream.SubmitterConsumer)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	deadline := time.Now().Add(30 * time.Second)
	for extra := false; ; {
		batch, err := cons.Fetch(100, jetstream.FetchMaxWait(500*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			ids = append(ids, m.Headers().Get(jetstream.MsgIDHeader))
			m.Ack()
		}
		if extra {
			return ids
		}
		extra = len(ids) >= want || time.Now().After(deadline)
	}
}
