package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/nats-io/nats.go/jetstream"
	"sigs.k8s.io/yaml"

	"github.com/purser-io/purser/internal/api/auth"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/anchor"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/hub/stream/streamtest"
	"github.com/purser-io/purser/internal/platform/localport"
	"github.com/purser-io/purser/internal/sandbox"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// cli runs a purser client command with the environment of a user on the
// machine where `purser up` runs, and returns its combined output.
func cli(t *testing.T, bin, clientConfig string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), bin, args...)
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
	sandboxtest.Eventually(t, 3*time.Minute, "the Job Succeeded", func(context.Context) error {
		out = cli(t, bin, clientConfig, "get", "runnables", "-n", "team-a")
		if !regexp.MustCompile(`nightly-report\s+Job\s+Succeeded\s+sandbox-1\s+Healthy`).MatchString(out) {
			return fmt.Errorf("get runnables:\n%s", out)
		}
		return nil
	})
	// The inventory, from the database, knows the Job and its health.
	out = cli(t, bin, clientConfig, "inventory", "-n", "team-a", "--kind", "Job", "-l", "purser.io/runnable=nightly-report")
	if !regexp.MustCompile(`sandbox-1\s+team-a\s+Job\s+nightly-report\s+Healthy\s+Succeeded`).MatchString(out) {
		t.Fatalf("inventory:\n%s", out)
	}
	// The Job's status settles after the verdict (SuccessCriteriaMet comes
	// before the pod counts, Complete after): the kept result follows it.
	sandboxtest.Eventually(t, time.Minute, "the Job's kept result settled", func(context.Context) error {
		out = cli(t, bin, clientConfig, "get", "runnable", "nightly-report", "-n", "team-a", "-o", "json")
		if !strings.Contains(out, `"succeeded": 1`) || !strings.Contains(out, `"type": "Complete"`) {
			return fmt.Errorf("runnable:\n%s", out)
		}
		return nil
	})
	mustContain(t, "the kept result", out, `"result": "Succeeded"`)
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
	// A list shows the attempts a get shows.
	out = cli(t, bin, clientConfig, "get", "runnables", "-A", "-o", "wide")
	if !regexp.MustCompile(`team-a\s+nightly-report\s+Job\s+Succeeded\s+sandbox-1\s+Healthy\s+\S+\s+1\s+admin`).MatchString(out) {
		t.Fatalf("get -o wide lacks the attempt:\n%s", out)
	}
	// A label set by a user survives a restart of purser up.
	mustContain(t, "label", cli(t, bin, clientConfig, "label", "cluster", "sandbox-1", "tier=gold"), "cluster/sandbox-1 labeled")

	// A kube-apiserver killed by hand: purser up says so and starts it
	// again, and client-go's complaints meanwhile go to purser.log, not
	// the terminal.
	pid, err := os.ReadFile(filepath.Join(data, "sandbox", "sandbox-1", "pids", "kube-apiserver.pid"))
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(pid)))
	if err := syscall.Kill(n, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	up.waitLine(t, "sandbox-1: its kube-apiserver exited (signal: killed) without being asked to; restarting it", time.Minute)
	up.waitLine(t, "sandbox-1: its kube-apiserver is back", 3*time.Minute)
	sandboxtest.Eventually(t, 2*time.Minute, "client-go's log in purser.log", func(context.Context) error {
		log, _ := os.ReadFile(filepath.Join(data, "purser.log"))
		if !strings.Contains(string(log), "source=klog") {
			return errors.New("no klog line in purser.log yet")
		}
		return nil
	})
	if klogLine := regexp.MustCompile(`(?m)^[IWEF]\d{4} \d\d:\d\d:\d\d`).FindString(up.output()); klogLine != "" {
		t.Fatalf("klog wrote to the terminal: %q\n%s", klogLine, up.output())
	}

	interrupt(t, up)
	up.waitExit(t, 90*time.Second)
	assertNoSandboxProcess(t, filepath.Join(data, "sandbox"))
	lines := strings.Split(strings.TrimSpace(up.output()), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "purser stopped") {
		t.Fatalf("the last line of purser up is %q:\n%s", last, up.output())
	}

	up = start()
	out = cli(t, bin, clientConfig, "get", "runnables", "-A")
	mustContain(t, "get after restart", out, "nightly-report")
	if out = cli(t, bin, clientConfig, "get", "cluster", "sandbox-1", "-o", "jsonpath={.metadata.labels}"); !strings.Contains(out, `"tier":"gold"`) || !strings.Contains(out, `"dc":"dc-1"`) {
		t.Fatalf("labels after a restart: %s", out)
	}
	out = cli(t, bin, clientConfig, "history", "--kind", "clusters")
	mustContain(t, "cluster history after restart", out, "create", "update")
	terminate(t, up)
	up.waitExit(t, 90*time.Second)
	assertNoSandboxProcess(t, filepath.Join(data, "sandbox"))
	// Agents name their cluster once per line.
	if log, _ := os.ReadFile(filepath.Join(data, "purser.log")); strings.Contains(string(log), "cluster=sandbox-1 cluster=sandbox-1") {
		t.Fatalf("a log line names its cluster twice:\n%s", log)
	}
}

// writeAPIFiles writes what `purser api` needs to start: tokens, policy
// and key; it returns the admin token.
func writeAPIFiles(t *testing.T, dir string) string {
	t.Helper()
	token := auth.NewToken()
	tokens, _ := yaml.Marshal(auth.TokensFile{Tokens: []auth.TokenEntry{{User: "admin", SHA256: auth.HashToken(token)}}})
	pol, _ := yaml.Marshal(policy.PolicyFile{Admins: []string{"admin"}})
	key := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", 32)))
	for name, data := range map[string]string{"tokens.yaml": string(tokens), "policy.yaml": string(pol), "secret.key": key} {
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
				cmd := exec.CommandContext(t.Context(), bin, "apply", "-f", "-")
				cmd.Env = append(os.Environ(), env...)
				cmd.Stdin = strings.NewReader(body)
				if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "submitted") {
					t.Fatalf("apply with the stream down: %v\n%s", err, out)
				}
			}
			// kill -9: no chance to publish or clean up
			if err := api.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			<-api.done

			if n := countRows(t, dsn, "outbox"); n != 3 {
				t.Fatalf("outbox holds %d rows after the crash, want 3", n)
			}
			nats.Restart()
			listen = freeAddr(t)
			api = startPurser(t, bin, apiArgs(listen)...)
			api.waitLine(t, "listening on", time.Minute)

			// One lost and one duplicated submission would still be three.
			outboxDrained := func() {
				sandboxtest.Eventually(t, 30*time.Second, "outbox drained after the restart", func(context.Context) error {
					if n := countRows(t, dsn, "outbox"); n != 0 {
						return fmt.Errorf("%d rows", n)
					}
					return nil
				})
			}
			var got []string
			for _, s := range drainSubmissions(t, nats.URL, 3, outboxDrained) {
				got = append(got, s.Namespace+"/"+s.Name+" "+s.Event)
			}
			var want []string
			for _, name := range names {
				want = append(want, "team-a/"+name+" "+stream.SubmissionSubmit)
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("stream holds %v, want the 3 submissions once each: %v", got, want)
			}
			terminate(t, api)
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

// freeAddr is a loopback address for a server a test starts, below the
// ephemeral range (localport): a server restarted on a new port must not
// find it taken by the source port of some client's connection.
func freeAddr(t *testing.T) string {
	t.Helper()
	port, err := localport.Free()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", port)
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

// drainSubmissions reads the submissions stream as a submitter would until
// want messages came, then, once published says nothing more will be
// published, whatever else the stream holds.
func drainSubmissions(t *testing.T, url string, want int, published func()) []stream.Submission {
	t.Helper()
	c := streamtest.Connect(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cons, err := c.JetStream().Consumer(ctx, stream.SubmissionsStream, stream.SubmitterConsumer)
	if err != nil {
		t.Fatal(err)
	}
	var subs []stream.Submission
	take := func(batch jetstream.MessageBatch) {
		for m := range batch.Messages() {
			var s stream.Submission
			if err := json.Unmarshal(m.Data(), &s); err != nil {
				t.Fatalf("submission %q: %v", m.Data(), err)
			}
			subs = append(subs, s)
			if err := m.Ack(); err != nil {
				t.Fatalf("ack submission: %v", err)
			}
		}
	}
	sandboxtest.Eventually(t, 30*time.Second, fmt.Sprintf("%d submissions", want), func(context.Context) error {
		batch, err := cons.Fetch(100, jetstream.FetchMaxWait(500*time.Millisecond))
		if err != nil {
			return err
		}
		take(batch)
		if len(subs) < want {
			return fmt.Errorf("%d so far", len(subs))
		}
		return nil
	})
	published()
	batch, err := cons.FetchNoWait(100)
	if err != nil {
		t.Fatal(err)
	}
	take(batch)
	return subs
}

// cliFails runs a purser client command that must fail and returns its
// combined output.
func cliFails(t *testing.T, bin, clientConfig string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), bin, args...)
	cmd.Env = append(os.Environ(), "PURSER_CONFIG="+clientConfig, "PURSER_SERVER=", "PURSER_TOKEN=")
	cmd.Dir = "../.."
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("purser %s succeeded, want a failure:\n%s", strings.Join(args, " "), out)
	}
	return string(out)
}

// The README's Flink walk-through on `purser up --sandbox 1 --flink`: the
// example FlinkDeployment, placed by its cluster affinity, runs on the
// operator simulator and completes checkpoints into the sandbox's S3
// store; a job failed on purpose is judged Unhealthy and Healthy again once
// it recovers; a cluster stopped on purpose stays down (the supervisor
// does not restart it) and purser sees it not Ready until it is started
// again.
func TestUpFlinkSandboxStopStart(t *testing.T) {
	bin := buildPurser(t)
	data := filepath.Join(t.TempDir(), "data")
	clientConfig := filepath.Join(t.TempDir(), "client.yaml")
	up := startPurser(t, bin, "up", "--data-dir", data, "--listen", "127.0.0.1:0", "--sandbox", "1", "--flink", "--client-config", clientConfig)
	up.waitLine(t, "purser is ready at http://", 30*time.Minute)
	mustContain(t, "purser up --flink", up.output(), "Flink operator SIMULATOR", "not the real operator")
	m := regexp.MustCompile(`storage \(S3-compatible, gofakes3\): http://(\S+), kept in (\S+)`).FindStringSubmatch(up.output())
	if len(m) != 3 || m[2] != filepath.Join(data, "flink-storage") {
		t.Fatalf("purser up does not say where the Flink storage is (want it in the data dir):\n%s", up.output())
	}
	s3, err := minio.New(m[1], &minio.Options{Creds: credentials.NewStaticV4("any", "any", ""), BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}

	mustContain(t, "label", cli(t, bin, clientConfig, "label", "cluster", "sandbox-1", "tier=prod"), "labeled")
	mustContain(t, "apply", cli(t, bin, clientConfig, "apply", "-f", "examples/runnable-flink.yaml"), "runnable/team-a/clickstream submitted")
	running := regexp.MustCompile(`clickstream\s+FlinkDeployment\s+Running\s+sandbox-1\s+Healthy`)
	sandboxtest.Eventually(t, 3*time.Minute, "the FlinkDeployment Running and Healthy", func(context.Context) error {
		if out := cli(t, bin, clientConfig, "get", "runnables", "-n", "team-a"); !running.MatchString(out) {
			return fmt.Errorf("get runnables:\n%s", out)
		}
		return nil
	})
	// The example checkpoints every 60 s into s3://checkpoints/clickstream:
	// <jobId>/chk-<n>/_metadata, as Flink completes them.
	chk := regexp.MustCompile(`^clickstream/[0-9a-f]{32}/chk-[1-9]\d*/_metadata$`)
	sandboxtest.Eventually(t, 3*time.Minute, "a completed checkpoint in the S3 store", func(ctx context.Context) error {
		var keys []string
		for obj := range s3.ListObjects(ctx, "checkpoints", minio.ListObjectsOptions{Prefix: "clickstream/", Recursive: true}) {
			if obj.Err != nil {
				return obj.Err
			}
			if chk.MatchString(obj.Key) {
				return nil
			}
			keys = append(keys, obj.Key)
		}
		return fmt.Errorf("no checkpoint yet: %v", keys)
	})

	// A JobManager that cannot run, on purpose: purser judges it, and the
	// recovered one (before its tolerationSeconds, 120 s: with one cluster
	// it has nowhere to go).
	mustContain(t, "flink fail", cli(t, bin, clientConfig, "sandbox", "flink", "fail", "team-a/clickstream"),
		"FlinkDeployment team-a/clickstream on sandbox-1: fault Reconciling set")
	sandboxtest.Eventually(t, time.Minute, "the failed job judged Unhealthy", func(context.Context) error {
		if out := cli(t, bin, clientConfig, "get", "runnables", "-n", "team-a"); !regexp.MustCompile(`clickstream\s+FlinkDeployment\s+\S+\s+sandbox-1\s+Unhealthy`).MatchString(out) {
			return fmt.Errorf("get runnables:\n%s", out)
		}
		return nil
	})
	mustContain(t, "flink fail of nothing", cliFails(t, bin, clientConfig, "sandbox", "flink", "fail", "team-a/nothing"), "no running sandbox cluster holds FlinkDeployment team-a/nothing")
	mustContain(t, "flink recover", cli(t, bin, clientConfig, "sandbox", "flink", "recover", "team-a/clickstream"), "fault removed")
	sandboxtest.Eventually(t, time.Minute, "the recovered job Healthy", func(context.Context) error {
		if out := cli(t, bin, clientConfig, "get", "runnables", "-n", "team-a"); !running.MatchString(out) {
			return fmt.Errorf("get runnables:\n%s", out)
		}
		return nil
	})

	// The cluster taken down on purpose stays down and is seen so.
	mustContain(t, "sandbox stop", cli(t, bin, clientConfig, "sandbox", "stop", "sandbox-1"), "sandbox-1 stopped")
	mustContain(t, "second stop", cliFails(t, bin, clientConfig, "sandbox", "stop", "sandbox-1"), "already stopped")
	mustContain(t, "stop of an unknown cluster", cliFails(t, bin, clientConfig, "sandbox", "stop", "sandbox-9"), `no such sandbox cluster "sandbox-9"`)
	if out := cli(t, bin, clientConfig, "sandbox", "status"); !regexp.MustCompile(`sandbox-1\s+stopped`).MatchString(out) {
		t.Fatalf("sandbox status:\n%s", out)
	}
	sandboxtest.Eventually(t, 2*time.Minute, "sandbox-1 not Ready", func(context.Context) error {
		if out := cli(t, bin, clientConfig, "get", "clusters"); !regexp.MustCompile(`(?m)^sandbox-1\s+(NotReady|Unknown)\s`).MatchString(out) {
			return fmt.Errorf("get clusters:\n%s", out)
		}
		return nil
	})
	if left := sandbox.Leftovers(filepath.Join(data, "sandbox", "sandbox-1")); len(left) > 0 {
		t.Fatalf("processes of the stopped cluster still run: %v", left)
	}
	mustContain(t, "sandbox start", cli(t, bin, clientConfig, "sandbox", "start", "sandbox-1"), "sandbox-1 is running again")
	sandboxtest.Eventually(t, 2*time.Minute, "sandbox-1 Ready again", func(context.Context) error {
		if out := cli(t, bin, clientConfig, "get", "clusters"); !regexp.MustCompile(`(?m)^sandbox-1\s+Ready\s`).MatchString(out) {
			return fmt.Errorf("get clusters:\n%s", out)
		}
		return nil
	})
	if strings.Contains(up.output(), "without being asked to") {
		t.Fatalf("the supervisor restarted a kube-apiserver stopped on purpose:\n%s", up.output())
	}
	mustContain(t, "purser up's terminal", up.output(), "sandbox-1: stopped on request", "sandbox-1: started again on request")

	interrupt(t, up)
	up.waitExit(t, 90*time.Second)
	assertNoSandboxProcess(t, filepath.Join(data, "sandbox"))
	if _, err := os.Stat(filepath.Join(data, "sandbox", "control.sock")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the control socket outlives purser up: %v", err)
	}
	if _, err := os.Stat(filepath.Join(data, "flink-storage", "objects.db")); err != nil {
		t.Fatalf("the Flink storage is not kept in the data dir: %v", err)
	}
}
