package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

const operatedJob = `apiVersion: purser.io/v1alpha1
kind: Runnable
metadata: {name: operated, namespace: team-a}
spec:
  template:
    apiVersion: batch/v1
    kind: Job
    spec:
      template:
        metadata:
          annotations:
            pod-complete.stage.kwok.x-k8s.io/delay: "30s"
            pod-complete.stage.kwok.x-k8s.io/jitter-delay: "30s"
        spec:
          restartPolicy: Never
          containers: [{name: report, image: busybox:1.36}]
`

const operatedDeployment = `apiVersion: purser.io/v1alpha1
kind: Runnable
metadata: {name: web, namespace: team-a}
spec:
  template:
    apiVersion: apps/v1
    kind: Deployment
    spec:
      selector: {matchLabels: {app: web}}
      template:
        metadata: {labels: {app: web}}
        spec:
          containers: [{name: web, image: nginx}]
`

// deadlineJob fails by its activeDeadlineSeconds (its pod would run for an
// hour): a DeadlineExceeded failure, as the Job's Failed condition says.
func deadlineJob(name, retry string) string {
	return fmt.Sprintf(`apiVersion: purser.io/v1alpha1
kind: Runnable
metadata: {name: %s, namespace: team-a}
spec:
%s  template:
    apiVersion: batch/v1
    kind: Job
    spec:
      activeDeadlineSeconds: 5
      backoffLimit: 0
      template:
        metadata:
          annotations:
            pod-complete.stage.kwok.x-k8s.io/delay: "1h"
            pod-complete.stage.kwok.x-k8s.io/jitter-delay: "1h"
        spec:
          restartPolicy: Never
          containers: [{name: report, image: busybox:1.36}]
`, name, retry)
}

// Operating a runnable as a user does, on a whole purser (API, submitter,
// agents, ingester): a running Job is suspended (Suspended once its
// cluster has spec.suspend), resumed (it runs on and succeeds), and run
// again (attempt 2, which succeeds too); a Deployment cannot be
// suspended and is told why. Each step is in the history under the
// user's name. Meanwhile two Jobs fail by their deadline: the one whose
// spec.retry retries DeadlineExceeded once runs a second attempt, which
// fails too and spends the budget; the one without spec.retry is not
// retried (the default for anything but a disruption).
func TestSuspendResumeRerun(t *testing.T) {
	bin := buildPurser(t)
	data := filepath.Join(t.TempDir(), "data")
	config := filepath.Join(t.TempDir(), "client.yaml")
	up := startPurser(t, bin, "up", "--data-dir", data, "--listen", "127.0.0.1:0", "--sandbox", "2", "--client-config", config)
	up.waitLine(t, "purser is ready at http://", 30*time.Minute)
	me := user{t: t, ctx: t.Context(), bin: bin, config: config}
	get := func(path string) string {
		return me.ok("get", "runnable", "operated", "-n", "team-a", "-o", "jsonpath="+path)
	}
	waitFor := func(what, path, want string) {
		t.Helper()
		sandboxtest.Eventually(t, 3*time.Minute, what, func(context.Context) error {
			if got := get(path); got != want+"\n" {
				return fmt.Errorf("%s = %q (message %q)", path, got, get("{.status.message}"))
			}
			return nil
		})
	}

	me.with(deadlineJob("retried", "  retry: {limit: 1, rules: [{when: DeadlineExceeded, action: Retry}]}\n")).ok("apply", "-f", "-")
	me.with(deadlineJob("not-retried", "")).ok("apply", "-f", "-")
	me.with(operatedJob).ok("apply", "-f", "-")
	matches(t, "a suspend of a queued runnable", me.fail("suspend", "runnable", "operated", "-n", "team-a"), `409 Conflict: .*only a Submitted or Running runnable`)
	waitFor("the Job runs", "{.status.phase}", "Running")

	matches(t, "suspend", me.ok("suspend", "runnable", "operated", "-n", "team-a"), `^runnable/team-a/operated Suspended: suspended team-a/operated \(was Running; attempt 1`)
	waitFor("spec.suspend set on the cluster", "{.status.phase} {.status.suspension.applied}", "Suspended true")
	matches(t, "resume", me.ok("resume", "runnable", "operated", "-n", "team-a"), `^runnable/team-a/operated Suspended: resume of team-a/operated asked`)
	waitFor("the resumed Job succeeds", "{.status.phase}", "Succeeded")

	matches(t, "rerun", me.ok("rerun", "runnable", "operated", "-n", "team-a"), `^runnable/team-a/operated Queued: rerun team-a/operated, which had ended Succeeded, as attempt 2`)
	waitFor("attempt 2 succeeds", "{.status.phase} {.status.attemptCount}", "Succeeded 2")

	// apply on the ended runnable updates its spec, as kubectl apply
	// would; the same again is unchanged.
	changed := strings.Replace(operatedJob, "busybox:1.36", "busybox:1.37", 1)
	matches(t, "diff of a changed spec", me.with(changed).ok("diff", "-f", "-"),
		`--- runnable/team-a/operated \(stored, resourceVersion \d+\)`, `(?m)^-\s+- image: busybox:1\.36$`, `(?m)^\+\s+- image: busybox:1\.37$`)
	matches(t, "diff of a new runnable", me.with(strings.Replace(changed, "name: operated", "name: brand-new", 1)).ok("diff", "-f", "-"),
		`runnable/team-a/brand-new: new`)
	matches(t, "apply of a changed spec", me.with(changed).ok("apply", "-f", "-"), `runnable/team-a/operated configured`)
	matches(t, "diff once applied", me.with(changed).ok("diff", "-f", "-"), `runnable/team-a/operated: unchanged`)
	matches(t, "apply of the same spec", me.with(changed).ok("apply", "-f", "-"), `runnable/team-a/operated unchanged`)
	if got := get("{.metadata.generation} {.spec.template.spec.template.spec.containers[0].image}"); got != "2 busybox:1.37\n" {
		t.Fatalf("after apply: %q", got)
	}

	me.with(operatedDeployment).ok("apply", "-f", "-")
	sandboxtest.Eventually(t, 3*time.Minute, "the Deployment runs", func(context.Context) error {
		if got := me.ok("get", "runnable", "web", "-n", "team-a", "-o", "jsonpath={.status.phase}"); got != "Running\n" {
			return fmt.Errorf("phase %q", got)
		}
		return nil
	})
	matches(t, "a suspend of a Deployment", me.fail("suspend", "runnable", "web", "-n", "team-a"), `cannot be suspended`)
	webChanged := strings.Replace(operatedDeployment, "nginx", "nginx:1.27", 1)
	matches(t, "diff of a running runnable's change", me.with(webChanged).ok("diff", "-f", "-"),
		`--- runnable/team-a/web \(stored, resourceVersion \d+\)`, `(?m)^-\s+- image: nginx$`, `(?m)^\+\s+- image: nginx:1\.27$`)
	matches(t, "apply of a running Deployment's change", me.with(webChanged).fail("apply", "-f", "-"),
		`409 Conflict: .*changing the object of a running Deployment.apps in place is not supported yet`)

	other := func(name, path string) string {
		return me.ok("get", "runnable", name, "-n", "team-a", "-o", "jsonpath="+path)
	}
	retries := "{.status.phase} {.status.attemptCount} {.status.retries.used} {.status.retries.last.class} {.status.retries.last.action}"
	for name, want := range map[string]string{
		"retried":     "Failed 2 1 DeadlineExceeded Fail\n",
		"not-retried": "Failed 1 0 DeadlineExceeded Fail\n",
	} {
		sandboxtest.Eventually(t, 3*time.Minute, name+" judged", func(context.Context) error {
			if got := other(name, retries); got != want {
				return fmt.Errorf("%q, want %q (message %q)", got, want, other(name, "{.status.message}"))
			}
			return nil
		})
	}
	matches(t, "retried's budget", other("retried", "{.status.retries.last.why}"), `budget is spent \(1 of 1\)`)
	matches(t, "retried's history", me.ok("history", "--name", "retried", "-n", "team-a"),
		`submitter\s+retry\s+Runnable/team-a/retried`, `submitter\s+no-retry\s+Runnable/team-a/retried`)

	matches(t, "history", me.ok("history", "--name", "operated", "-n", "team-a"),
		`\s+suspend\s+Runnable/team-a/operated`, `\s+resume\s+Runnable/team-a/operated`, `\s+rerun\s+Runnable/team-a/operated`)

	// A planned move of the Deployment (a kind without a savepoint: its
	// old copy goes first), then a drain of the cluster it moved to, which
	// moves it back and leaves that cluster tainted NoExecute.
	from := strings.TrimSpace(other("web", "{.status.cluster}"))
	to := "sandbox-1"
	if from == to {
		to = "sandbox-2"
	}
	matches(t, "a move of an ended runnable", me.fail("move", "runnable", "operated", "-n", "team-a"), `409 Conflict: .*only a Running runnable can be moved`)
	matches(t, "a move to an unknown cluster", me.fail("move", "runnable", "web", "-n", "team-a", "--to", "nowhere"), `422 .*cluster nowhere is not registered`)
	matches(t, "move --wait", me.ok("move", "runnable", "web", "-n", "team-a", "--to", to, "--wait"),
		`(?m)^runnable/team-a/web move to `+to+` asked: planned move of team-a/web \(attempt 1\) from `+from,
		`(?m)^runnable/team-a/web moved to `+to+`, downtime \d+\.\d s$`)
	matches(t, "drain", me.ok("drain", to, "--concurrency", "2"), `(?m)^cluster/`+to+` cordoned$`,
		`(?m)^1 of 1 moved: team-a/web to `+from+`, downtime \d+\.\d s$`, `(?m)^cluster/`+to+` drained$`)
	if got := me.ok("get", "cluster", to, "-o", "jsonpath={.spec.taints[*].key}={.spec.taints[*].effect}"); got != "purser.io/cordon=NoExecute\n" {
		t.Fatalf("after the drain: %q", got)
	}
	matches(t, "move history", me.ok("history", "--name", "web", "-n", "team-a"), `\s+move\s+Runnable/team-a/web`, `\s+move-handover\s+Runnable/team-a/web`, `\s+moved\s+Runnable/team-a/web`)
	me.ok("uncordon", to)
}
