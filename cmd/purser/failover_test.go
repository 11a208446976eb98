package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

const longJob = `apiVersion: purser.io/v1alpha1
kind: Runnable
metadata: {name: long-report, namespace: team-a}
spec:
  template:
    apiVersion: batch/v1
    kind: Job
    spec:
      template:
        metadata:
          annotations:
            pod-complete.stage.kwok.x-k8s.io/delay: "1h"
            pod-complete.stage.kwok.x-k8s.io/jitter-delay: "1h"
        spec:
          restartPolicy: Never
          containers: [{name: report, image: busybox:1.36}]
`

// The override as a user meets it: an AtMostOne Job runs on a cluster
// whose kube-apiserver freezes (not dead, so purser up does not restart
// it; unreachable for purser and for the cluster's own agent alike). The
// runnable waits and says that only a person can move it, naming the
// command; `purser failover --confirm-stopped` moves it to the other
// cluster, in the audit log under the user's name. Then the ended
// runnable is deleted: gone, its history kept.
func TestFailoverOverrideAndDeletion(t *testing.T) {
	bin := buildPurser(t)
	data := filepath.Join(t.TempDir(), "data")
	config := filepath.Join(t.TempDir(), "client.yaml")
	up := startPurser(t, bin, "up", "--data-dir", data, "--listen", "127.0.0.1:0", "--sandbox", "2", "--client-config", config)
	up.waitLine(t, "purser is ready at http://", 30*time.Minute)
	me := user{t: t, ctx: t.Context(), bin: bin, config: config}
	get := func(path string) string {
		return me.ok("get", "runnable", "long-report", "-n", "team-a", "-o", "jsonpath="+path)
	}

	me.with(longJob).ok("apply", "-f", "-")
	var first string
	sandboxtest.Eventually(t, 3*time.Minute, "the Job runs", func(context.Context) error {
		got := strings.Fields(get("{.status.phase} {.status.cluster}"))
		if len(got) != 2 || got[0] != "Running" {
			return fmt.Errorf("phase and cluster: %q", got)
		}
		first = got[1]
		return nil
	})
	other := map[string]string{"sandbox-1": "sandbox-2", "sandbox-2": "sandbox-1"}[first]

	// Before anything is wrong, the override is refused.
	matches(t, "an override of nothing", me.fail("failover", "runnable", "long-report", "-n", "team-a", "--confirm-stopped"), `409 Conflict: .*not waiting`)
	matches(t, "an override without --confirm-stopped", me.fail("failover", "runnable", "long-report", "-n", "team-a"), `say --confirm-stopped`)

	pidData, err := os.ReadFile(filepath.Join(data, "sandbox", first, "pids", "kube-apiserver.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(pidData)))
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	thawed := false
	thaw := func() {
		if !thawed {
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
				t.Errorf("thaw the kube-apiserver of %s: %v", first, err)
			}
			thawed = true
		}
	}
	defer thaw()

	sandboxtest.Eventually(t, 5*time.Minute, "the runnable waits for a person", func(context.Context) error {
		if got := get("{.status.waiting}"); got != "CopyUnconfirmed\n" {
			return fmt.Errorf("waiting %q, message %q", got, get("{.status.message}"))
		}
		return nil
	})
	msg := get("{.status.message}")
	if !strings.Contains(msg, "purser failover runnable long-report -n team-a --confirm-stopped") {
		t.Fatalf("the message does not name the override: %s", msg)
	}
	out := me.ok("failover", "runnable", "long-report", "-n", "team-a", "--confirm-stopped")
	matches(t, "failover", out, `^runnable/team-a/long-report: admin confirmed that the copy of attempt 1 on `+first+` no longer runs`)
	sandboxtest.Eventually(t, 3*time.Minute, "the Job runs on the other cluster", func(context.Context) error {
		if got := get("{.status.phase} {.status.cluster}"); got != "Running "+other+"\n" {
			return fmt.Errorf("phase and cluster: %q", got)
		}
		return nil
	})
	matches(t, "history", me.ok("history", "--name", "long-report", "-n", "team-a"), `admin\s+confirm-stopped\s+Runnable/team-a/long-report`)
	thaw()

	// Delete it: the live runnable is cancelled; once its copy is gone, a
	// second delete removes it, and its history stays.
	matches(t, "delete of a live runnable", me.ok("delete", "runnable", "long-report", "-n", "team-a"), `^runnable/team-a/long-report cancelled`)
	sandboxtest.Eventually(t, 3*time.Minute, "the cancelled runnable deleted", func(context.Context) error {
		u := me
		u.allowFailure = true
		out, errOut, err := u.run("delete", "runnable", "long-report", "-n", "team-a")
		if err != nil {
			return fmt.Errorf("%s", errOut)
		}
		if !strings.Contains(out, "runnable/team-a/long-report deleted (it had ended: Cancelled); its history stays in the audit log") {
			return fmt.Errorf("delete said %q", out)
		}
		return nil
	})
	matches(t, "get after delete", me.fail("get", "runnable", "long-report", "-n", "team-a"), `404`)
	matches(t, "history after delete", me.ok("history", "--name", "long-report", "-n", "team-a"), `admin\s+delete\s+Runnable/team-a/long-report`, `admin\s+cancel\s+`)

	interrupt(t, up)
	up.waitExit(t, 90*time.Second)
	assertNoSandboxProcess(t, filepath.Join(data, "sandbox"))
}
