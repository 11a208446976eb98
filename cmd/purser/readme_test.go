package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/purser-io/purser/internal/sandbox"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// The README's Flink walk-through ("A Flink farm to watch" and the cluster
// lost after it), followed as a newcomer would on a fresh clone: its shell
// blocks are read from README.md and run in order, each line with the
// binary the walk-through's own `go install` wrote, against the one `purser
// up --sandbox 2 --flink` the walk-through starts. Each line of the README
// is matched against a step below, comment included, so a change to the
// text (a command or the claim beside it) fails here until the step that
// checks it is changed too.
//
// Only the timings are shortened, in a copy of the example the test applies
// in place of examples/runnable-flink.yaml: a checkpoint every 10 s rather
// than 60 s and a tolerationSeconds of 20 rather than 120. A `-w` watch is
// run without -w until what its comment says shows, recording the phases
// it saw on the way. Its end writes a FlinkDeployment with the real
// kubectl (the sandbox's), through `purser kubeconfig --proxy` on a free
// port, and follows its failover with kubectl get. About 6 minutes, most
// of it waiting for the simulated jobs' checkpoints, which the simulator
// reports at its passes a minute apart as the operator does.
func TestReadmeFlinkWalkthrough(t *testing.T) {
	lines := readmeWalkthrough(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	w := &walk{t: t, root: root, bin: t.TempDir(), data: filepath.Join(t.TempDir(), "purser-data"),
		clientConfig: filepath.Join(t.TempDir(), "client.yaml"), example: shortenedExample(t, root, "runnable-flink.yaml"),
		kubeconfig: filepath.Join(t.TempDir(), "purser.kubeconfig"), policy: shortenedExample(t, root, "placementpolicy-flink.yaml"),
		flinkClick: shortenedExample(t, root, "flinkdeployment-clicks.yaml")}

	const chkTime = `purser get runnable clickstream -n team-a -o jsonpath='{.status.result.jobStatus.checkpointInfo.lastCheckpoint.timeStamp}'`
	var firstCheckpoint int64
	newerCheckpoint := func(out string) error {
		ms, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
		if err != nil {
			return fmt.Errorf("no checkpoint time yet: %q", out)
		}
		if ms <= firstCheckpoint {
			return fmt.Errorf("checkpoint time %d is not newer than %d", ms, firstCheckpoint)
		}
		firstCheckpoint = ms
		return nil
	}
	runnable := func(phase, cluster, health string) *regexp.Regexp {
		return regexp.MustCompile(`(?m)^clickstream\s+FlinkDeployment\s+` + phase + `\s+` + cluster + `\s+` + health + `\s`)
	}
	var job1, job2 string
	var seen []string
	const clicksChkTime = `purser get runnable clicks -n team-a -o jsonpath='{.status.result.jobStatus.checkpointInfo.lastCheckpoint.timeStamp}'`
	clicksCheckpointed := func(out string) error {
		if _, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64); err != nil {
			return fmt.Errorf("no checkpoint of clicks yet: %q", out)
		}
		return nil
	}
	var clicksOn string
	var clicksStates []string
	other := func(cluster string) string {
		if cluster == "sandbox-1" {
			return "sandbox-2"
		}
		return "sandbox-1"
	}
	steps := []step{
		{line: "go install ./cmd/purser", run: w.goInstall},
		// The test puts the folder `go install` wrote to (its GOBIN) on
		// the PATH of every command below, as this line does for a user.
		{line: `export PATH="$(go env GOPATH)/bin:$PATH"`, run: func(string) {}},
		{line: "purser up --sandbox 2 --flink", run: w.up},
		{line: "purser label cluster sandbox-1 tier=prod", want: "labeled"},
		{line: "purser label cluster sandbox-2 tier=prod", want: "labeled"},
		{line: "purser apply -f examples/runnable-flink.yaml", want: "runnable/team-a/clickstream submitted"},
		{line: "purser get runnables -n team-a -w      # Queued, then Running and Healthy on one cluster, say sandbox-1",
			until: showing(runnable("Running", "sandbox-1", "Healthy")), phases: []string{"Queued", "Scheduled", "Submitted", "Running"}},
		{line: chkTime, until: newerCheckpoint, within: 4 * time.Minute},
		{line: "purser sandbox flink fail team-a/clickstream", want: "FlinkDeployment team-a/clickstream on sandbox-1: fault Reconciling set"},
		{line: "purser get runnables -n team-a -w      # Unhealthy; 120 s later (tolerationSeconds) Running on sandbox-2",
			until: showing(runnable("Running", "sandbox-2", "Healthy")), healths: []string{"Unhealthy", "Healthy"}, within: 5 * time.Minute},
		{line: "purser describe runnable clickstream -n team-a", until: func(out string) error {
			// Attempt 2 restores from attempt 1's newest checkpoint, under
			// attempt 1's job id, as the README's describe shows.
			m := regexp.MustCompile(`Restore point:\s+s3://checkpoints/clickstream/([0-9a-f]{32})/chk-[1-9]\d* \(Checkpoint from attempt 1, newest completed checkpoint under s3://checkpoints/clickstream\)`).FindStringSubmatch(out)
			if m == nil {
				return fmt.Errorf("no restore point from attempt 1:\n%s", out)
			}
			job1 = m[1]
			return allOf(out,
				`#1\s+sandbox-1\s.*Evicted\s+ApplicationUnhealthy`,
				`#2\s+sandbox-2\s`,
				`#2 carried in:\s+flink.apache.org/job-id=`+job1+`,restorePath=s3://checkpoints/clickstream/`+job1+`/chk-`,
				`controller\s+evict\s+attempt 1 evicted from sandbox-1 \(ApplicationUnhealthy\): unhealthy on sandbox-1 since .*, longer than tolerationSeconds 20`,
				`controller\s+purge\s+FlinkDeployment team-a/clickstream of attempt 1 is gone from sandbox-1`,
				`submitter\s+place\s+failover of attempt 1 from sandbox-1 \(ApplicationUnhealthy\) to sandbox-2 as attempt 2, carrying .*restorePath=s3://checkpoints/clickstream/`+job1+`/chk-`)
		}},
		{line: "purser sandbox flink recover team-a/clickstream   # the fault stays with sandbox-1 until then", want: "fault removed"},
		{line: chkTime, until: newerCheckpoint, within: 4 * time.Minute},
		{line: "purser sandbox stop sandbox-2", want: "sandbox-2 stopped"},
		{line: "purser get clusters -o wide            # sandbox-2 NotReady, then tainted purser.io/unreachable (TAINT-LIST)",
			until: showing(regexp.MustCompile(`(?m)^sandbox-2\s+NotReady\s.*purser.io/unreachable`))},
		// What the text after the block says: from the first judgement
		// that its cluster is not Ready, the runnable reads Unknown and
		// names the cluster's state and what purser waits for.
		{extra: "purser describe runnable clickstream -n team-a", until: func(out string) error {
			return allOf(out, `Health:\s+Unknown`, `Waiting:\s+ClusterNotReady`,
				`Message:\s+cluster sandbox-2 is not Ready \(APIServerUnreachable\) since \S+, so what the runnable does there is not known; if the cluster is still not Ready at \S+ it is tainted NoExecute`)
		}},
		// The move waits for the NoExecute taint, which comes later than
		// the agent's lease and margin: the runnable stays until then.
		{line: "purser describe cluster sandbox-2      # purser's taints: purser.io/unreachable:NoSchedule, and 40 s later :NoExecute, which moves its work",
			until: func(out string) error {
				var taints []string
				for _, m := range regexp.MustCompile(`(?m)^\s+(purser\.io/unreachable:\S+)\s+added by purser`).FindAllStringSubmatch(out, -1) {
					taints = append(taints, m[1])
				}
				seen = appendNew(seen, strings.Join(taints, ","))
				if !isSubsequence([]string{"purser.io/unreachable:NoSchedule", "purser.io/unreachable:NoSchedule,purser.io/unreachable:NoExecute"}, seen) &&
					!isSubsequence([]string{"purser.io/unreachable:NoSchedule", "purser.io/unreachable:NoExecute,purser.io/unreachable:NoSchedule"}, seen) {
					return fmt.Errorf("purser's taints seen so far: %q, want NoSchedule then NoExecute too:\n%s", seen, out)
				}
				return allOf(out, `purser\.io/unreachable:NoExecute\s+added by purser from its conditions`)
			}},
		{line: "purser get runnables -n team-a -w      # about a minute after the stop: attempt 3 Running on sandbox-1, from the newest checkpoint",
			until: showing(runnable("Running", "sandbox-1", "Healthy")), within: 3 * time.Minute},
		// What the text after the block says: attempt 3 restores from
		// attempt 2's own checkpoint, under attempt 2's job id.
		{extra: "purser describe runnable clickstream -n team-a", until: func(out string) error {
			m := regexp.MustCompile(`Restore point:\s+s3://checkpoints/clickstream/([0-9a-f]{32})/chk-[1-9]\d* \(Checkpoint from attempt 2, `).FindStringSubmatch(out)
			if m == nil {
				return fmt.Errorf("no restore point from attempt 2:\n%s", out)
			}
			if job2 = m[1]; job2 == job1 {
				return fmt.Errorf("attempt 2 ran under attempt 1's job id %s:\n%s", job1, out)
			}
			return allOf(out, `#2\s+sandbox-2\s`, `#3\s+sandbox-1\s`,
				`#3 carried in:\s+flink.apache.org/job-id=`+job2+`,restorePath=s3://checkpoints/clickstream/`+job2+`/chk-`)
		}},
		{line: `purser sandbox start sandbox-2         # back; the old copy there is removed ("purge" in describe's history)`,
			want: "sandbox-2 is running again"},
		{extra: "purser describe runnable clickstream -n team-a", until: showing(regexp.MustCompile(`controller\s+purge\s+FlinkDeployment team-a/clickstream of attempt 2 is gone from sandbox-2`)),
			within: 3 * time.Minute},
		{line: "purser sandbox status                  # which clusters run", until: func(out string) error {
			return allOf(out, `(?m)^sandbox-1\s+running`, `(?m)^sandbox-2\s+running`)
		}},

		// The same from kubectl: the sandbox's kubectl, on the PATH.
		{line: "purser kubeconfig --proxy 127.0.0.1:8001 --output purser.kubeconfig &   # until interrupted", run: w.proxy},
		{line: "export KUBECONFIG=purser.kubeconfig", run: func(string) {}},
		{line: "kubectl apply -f examples/placementpolicy-flink.yaml   # placementpolicy.purser.io/streaming created",
			want: "placementpolicy.purser.io/streaming created"},
		{line: "kubectl apply -f examples/flinkdeployment-clicks.yaml  # flinkdeployment.flink.apache.org/clicks created: the runnable team-a/clicks",
			want: "flinkdeployment.flink.apache.org/clicks created"},
		{line: "kubectl get flinkdeployments -n team-a -w              # clicks, its CLUSTER, JOB STATUS RUNNING and LIFECYCLE STATE STABLE",
			until: func(out string) error {
				m := regexp.MustCompile(`(?m)^clicks\s+(sandbox-\d)\s+RUNNING\s+STABLE\s*$`).FindStringSubmatch(out)
				if m == nil {
					return fmt.Errorf("clicks is not RUNNING and STABLE on a cluster:\n%s", out)
				}
				clicksOn = m[1]
				return allOf(out, `(?m)^NAME\s+CLUSTER\s+JOB STATUS\s+LIFECYCLE STATE$`)
			}},
		{line: clicksChkTime, until: clicksCheckpointed, within: 4 * time.Minute},
		{line: "purser sandbox flink fail team-a/clicks", until: func(out string) error {
			return allOf(out, `FlinkDeployment team-a/clicks on `+clicksOn+`: fault Reconciling set`)
		}},
		{line: "kubectl get flinkdeployments -n team-a -w              # clicks RECONCILING; after tolerationSeconds, RUNNING on the other cluster",
			within: 5 * time.Minute, until: func(out string) error {
				for _, m := range regexp.MustCompile(`(?m)^clicks\s+(\S+)\s+(\S+)\s`).FindAllStringSubmatch(out, -1) {
					clicksStates = appendNew(clicksStates, m[2])
				}
				if !regexp.MustCompile(`(?m)^clicks\s+` + other(clicksOn) + `\s+RUNNING\s`).MatchString(out) {
					return fmt.Errorf("clicks does not run on %s yet (states seen %v):\n%s", other(clicksOn), clicksStates, out)
				}
				if !isSubsequence([]string{"RECONCILING", "RUNNING"}, clicksStates) {
					return fmt.Errorf("clicks' job states seen so far: %v, want RECONCILING then RUNNING:\n%s", clicksStates, out)
				}
				if got := strings.TrimSpace(w.purser("", []string{"get", "runnable", "clicks", "-n", "team-a", "-o", "jsonpath={.status.attemptCount} {.status.cluster} {.status.phase}"})); got != "2 "+other(clicksOn)+" Running" {
					return fmt.Errorf("team-a/clicks is %q, want attempt 2 Running on %s", got, other(clicksOn))
				}
				return nil
			}},
		{line: "kubectl get flinkdeployment clicks -n team-a -o yaml   # purser.io/attempt: \"2\", purser.io/cluster: the other one", until: func(out string) error {
			return allOf(out, `purser.io/attempt: "2"`, `purser.io/cluster: `+other(clicksOn), `purser.io/runnable: team-a/clicks`,
				`purser.io/placement-policy: PlacementPolicy team-a/streaming`, `app.kubernetes.io/part-of: streaming`)
		}},
		{line: "purser describe runnable clicks -n team-a              # Restore point: attempt 1's newest checkpoint", until: func(out string) error {
			return allOf(out, `Restore point:\s+s3://checkpoints/clicks/[0-9a-f]{32}/chk-[1-9]\d* \(Checkpoint from attempt 1, newest completed checkpoint under s3://checkpoints/clicks\)`)
		}},
	}

	todo := slices.Clone(steps)
	for _, line := range lines {
		for len(todo) > 0 && todo[0].extra != "" {
			w.do(todo[0], todo[0].extra)
			todo = todo[1:]
		}
		if len(todo) == 0 || todo[0].line != line {
			want := "nothing more"
			if len(todo) > 0 {
				want = fmt.Sprintf("%q", todo[0].line)
			}
			t.Fatalf("the README's walk-through has %q where this test expects %s: change the test's steps with the text", line, want)
		}
		w.do(todo[0], line)
		todo = todo[1:]
	}
	for _, s := range todo {
		if s.extra == "" {
			t.Fatalf("the README's walk-through lacks %q", s.line)
		}
		w.do(s, s.extra)
	}
	if w.kubeProxy != nil {
		interrupt(t, w.kubeProxy)
		w.kubeProxy.waitExit(t, 30*time.Second)
	}
	interrupt(t, w.purserUp)
	w.purserUp.waitExit(t, 90*time.Second)
}

// readmeWalkthrough is every line of the shell blocks from "## A Flink farm
// to watch" to the next section.
func readmeWalkthrough(t *testing.T) []string {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "\n## A Flink farm to watch\n")
	section, _, _ := strings.Cut(rest, "\n## ")
	if !ok {
		t.Fatal(`README.md has no "A Flink farm to watch" section`)
	}
	var lines []string
	for _, block := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(section, -1) {
		for _, l := range strings.Split(strings.TrimSpace(block[1]), "\n") {
			if l = strings.TrimSpace(l); l != "" {
				lines = append(lines, l)
			}
		}
	}
	if !slices.Contains(lines, "purser sandbox stop sandbox-2") {
		t.Fatalf("README.md's Flink walk-through does not take a cluster down:\n%s", strings.Join(lines, "\n"))
	}
	return lines
}

// shortenedExample is examples/NAME with the walk-through's waits
// shortened (the checkpoint interval and tolerationSeconds it has),
// written to a file of the test's.
func shortenedExample(t *testing.T, root, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	s, changed := string(b), false
	for _, r := range []struct{ re, to string }{
		{`(?m)^(\s+execution\.checkpointing\.interval:) 60s$`, "$1 10s"},
		{`(?m)^(\s+tolerationSeconds:) 120$`, "$1 20"},
	} {
		re := regexp.MustCompile(r.re)
		if re.MatchString(s) {
			s, changed = re.ReplaceAllString(s, r.to), true
		}
	}
	if !changed {
		t.Fatalf("examples/%s no longer has the checkpoint interval or the tolerationSeconds the README's timings describe", name)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// step is one line of the walk-through and what the README says of it.
type step struct {
	line  string // the README's line, comment included
	extra string // or a command the test adds to check what the text around the blocks says
	run   func(line string)
	want  string             // run once; the output must contain want
	until func(string) error // run until nil
	// phases is the order a watch may show phases in (a poll may miss
	// one, never reorder them); healths, what it must have shown, in
	// this order, among the states it went through.
	phases, healths []string
	within          time.Duration
}

type walk struct {
	t                                      *testing.T
	root, bin, data, clientConfig, example string
	purserUp                               *running
	// The part from kubectl: the kubeconfig `purser kubeconfig` writes,
	// its proxy, and the examples it applies, shortened as example is.
	kubeconfig         string
	kubeProxy          *running
	policy, flinkClick string
}

// env is a user's on the machine where `purser up` runs, with the
// installed binary on the PATH.
func (w *walk) env() []string {
	return append(os.Environ(), "PATH="+w.bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"PURSER_CONFIG="+w.clientConfig, "PURSER_SERVER=", "PURSER_TOKEN=")
}

func (w *walk) goInstall(line string) {
	cmd := exec.CommandContext(w.t.Context(), "go", shellWords(w.t, line)[1:]...)
	cmd.Dir, cmd.Env = w.root, append(w.env(), "GOBIN="+w.bin)
	if out, err := cmd.CombinedOutput(); err != nil {
		w.t.Fatalf("%s: %v\n%s", line, err, out)
	}
}

// up starts the README's `purser up` in a data folder, at an address and
// with a client config of the test's.
func (w *walk) up(line string) {
	args := shellWords(w.t, line)[1:]
	args = append(args, "--data-dir", w.data, "--listen", "127.0.0.1:0", "--client-config", w.clientConfig)
	cmd := exec.CommandContext(w.t.Context(), filepath.Join(w.bin, "purser"), args...)
	cmd.Dir, cmd.Env = w.root, w.env()
	w.purserUp = startCommand(w.t, cmd)
	w.purserUp.waitLine(w.t, "purser is ready at http://", 30*time.Minute)
}

func (w *walk) do(s step, line string) {
	t := w.t
	t.Logf("%s: %s", time.Now().Format("15:04:05"), line)
	if s.run != nil {
		s.run(line)
		return
	}
	code, _, _ := strings.Cut(line, " #")
	args := shellWords(t, code)
	run := w.purser
	switch args[0] {
	case "purser":
	case "kubectl":
		run = w.kubectl
	default:
		t.Fatalf("%q: the walk-through runs purser or kubectl here", line)
	}
	watch := slices.Contains(args, "-w")
	args = slices.DeleteFunc(args[1:], func(a string) bool { return a == "-w" })
	for i, a := range args {
		switch a {
		case "examples/runnable-flink.yaml":
			args[i] = w.example
		case "examples/placementpolicy-flink.yaml":
			args[i] = w.policy
		case "examples/flinkdeployment-clicks.yaml":
			args[i] = w.flinkClick
		}
	}
	if s.want != "" {
		mustContain(t, line, run(line, args), s.want)
		return
	}
	var phases, healths []string
	within := s.within
	if within == 0 {
		within = 2 * time.Minute
	}
	sandboxtest.Eventually(t, within, line, func(context.Context) error {
		out := run(line, args)
		if watch {
			if m := regexp.MustCompile(`(?m)^clickstream\s+\S+\s+(\S+)\s+\S+\s+(\S+)`).FindStringSubmatch(out); m != nil {
				phases, healths = appendNew(phases, m[1]), appendNew(healths, m[2])
			}
		}
		return s.until(out)
	})
	if (s.phases != nil && !isSubsequence(phases, s.phases)) || !isSubsequence(s.healths, healths) {
		t.Fatalf("%s: saw phases %v and health %v, want phases in the order %v and health %v in this order", line, phases, healths, s.phases, s.healths)
	}
	if watch {
		t.Logf("  the watch showed phases %v, health %v", phases, healths)
	}
}

// proxy starts the walk-through's `purser kubeconfig --proxy ... &` in the
// background, on a free port and writing the test's kubeconfig, and puts
// the sandbox's kubectl on the PATH.
func (w *walk) proxy(line string) {
	code, _, _ := strings.Cut(line, " #")
	args := shellWords(w.t, strings.TrimSuffix(strings.TrimSpace(code), "&"))[1:]
	for i, a := range args {
		switch a {
		case "127.0.0.1:8001":
			args[i] = freeAddress(w.t)
		case "purser.kubeconfig":
			args[i] = w.kubeconfig
		}
	}
	cmd := exec.CommandContext(w.t.Context(), filepath.Join(w.bin, "purser"), args...)
	cmd.Dir, cmd.Env = w.root, w.env()
	w.kubeProxy = startCommand(w.t, cmd)
	w.kubeProxy.waitLine(w.t, "proxying ", time.Minute)
	bins, err := sandbox.Ensure(w.t.Context(), sandbox.BuildConfig{})
	if err != nil {
		w.t.Fatal(err)
	}
	if err := os.Symlink(bins.Kubectl(), filepath.Join(w.bin, "kubectl")); err != nil {
		w.t.Fatal(err)
	}
}

// freeAddress is a loopback address nothing listens on.
func freeAddress(t *testing.T) string {
	t.Helper()
	l, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// kubectl runs one kubectl command of the walk-through, with the
// kubeconfig `purser kubeconfig` wrote.
func (w *walk) kubectl(line string, args []string) string {
	cmd := exec.CommandContext(w.t.Context(), filepath.Join(w.bin, "kubectl"), args...)
	cmd.Dir, cmd.Env = w.root, append(w.env(), "KUBECONFIG="+w.kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		w.t.Fatalf("%s: %v\n%s", line, err, out)
	}
	return string(out)
}

// purser runs one client command of the walk-through.
func (w *walk) purser(line string, args []string) string {
	cmd := exec.CommandContext(w.t.Context(), filepath.Join(w.bin, "purser"), args...)
	cmd.Dir, cmd.Env = w.root, w.env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		w.t.Fatalf("%s: %v\n%s", line, err, out)
	}
	return string(out)
}

// shellWords splits a command line as the shell does, for the quoting the
// README uses: single and double quotes, no expansions.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	in, quote := false, rune(0)
	for _, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if quote != 0 {
		t.Fatalf("unclosed quote in %q", line)
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

func showing(re *regexp.Regexp) func(string) error {
	return func(out string) error {
		if !re.MatchString(out) {
			return fmt.Errorf("no match for %s in:\n%s", re, out)
		}
		return nil
	}
}

func allOf(out string, res ...string) error {
	for _, re := range res {
		if !regexp.MustCompile(re).MatchString(out) {
			return fmt.Errorf("no match for %s in:\n%s", re, out)
		}
	}
	return nil
}

// appendNew appends each of ss that differs from the last one seen.
func appendNew(seen []string, ss ...string) []string {
	for _, s := range ss {
		if len(seen) == 0 || seen[len(seen)-1] != s {
			seen = append(seen, s)
		}
	}
	return seen
}

// isSubsequence says whether want occurs in seen in order.
func isSubsequence(want, seen []string) bool {
	i := 0
	for _, s := range seen {
		if i < len(want) && s == want[i] {
			i++
		}
	}
	return i == len(want)
}
