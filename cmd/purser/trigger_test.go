package main

import (
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

const hookTrigger = `apiVersion: purser.io/v1alpha1
kind: Trigger
metadata: {name: hook, namespace: team-a}
spec:
  source: {webhook: {}}
  template:
    template:
      apiVersion: batch/v1
      kind: Job
      spec:
        template:
          spec:
            restartPolicy: Never
            containers: [{name: c, image: busybox}]
`

const afterCancel = `apiVersion: purser.io/v1alpha1
kind: Trigger
metadata: {name: after-cancel, namespace: team-a}
spec:
  source: {runnableEnded: {phases: [Cancelled], selector: {matchLabels: {app: etl}}}}
  template:
    template:
      apiVersion: batch/v1
      kind: Job
      spec:
        template:
          spec:
            restartPolicy: Never
            containers: [{name: c, image: busybox}]
`

const etlRunnable = `apiVersion: purser.io/v1alpha1
kind: Runnable
metadata: {name: etl, namespace: team-a, labels: {app: etl}}
spec:
  template:
    apiVersion: batch/v1
    kind: Job
    spec:
      template:
        spec:
          restartPolicy: Never
          containers: [{name: c, image: busybox}]
`

// Triggers through the command line against `purser up`: a webhook
// trigger applied (its token printed once), called, its token rotated;
// a trigger on ended runnables fired by the controller's loop when a
// runnable is cancelled; get, describe, delete.
func TestCLITriggers(t *testing.T) {
	t.Parallel() // no clusters
	bin := buildPurser(t)
	dir := t.TempDir()
	config := filepath.Join(dir, "client.yaml")
	me := user{t: t, ctx: t.Context(), bin: bin, config: config}
	up, url := startUp(t, bin, filepath.Join(dir, "farm"), config)
	defer stopUp(t, up)

	out := me.with(hookTrigger).ok("apply", "-f", "-")
	matches(t, "apply", out, `^trigger/team-a/hook created \(webhook POST /api/v1/triggers/team-a/hook/webhook with Authorization: Bearer pwh_\S+ \(shown once; keep it\)\)`)
	token := regexp.MustCompile(`Bearer (pwh_[A-Za-z0-9_-]+)`).FindStringSubmatch(out)[1]
	matches(t, "apply again", me.with(hookTrigger).ok("apply", "-f", "-"), `^trigger/team-a/hook unchanged`)
	call := func(token string) int {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/api/v1/triggers/team-a/hook/webhook", http.NoBody)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Idempotency-Key", "k1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	if code := call(token); code != http.StatusAccepted {
		t.Fatalf("webhook: %d", code)
	}
	matches(t, "the webhook's run", me.ok("get", "rn", "-n", "team-a", "-l", "purser.io/trigger=hook", "-o", "name"), `(?m)^runnable/hook-[0-9a-f]{12}$`)
	rotated := me.ok("trigger", "rotate-token", "hook", "-n", "team-a")
	matches(t, "rotate-token", rotated, `new webhook token \(shown once; keep it\): pwh_`)
	if code := call(token); code != http.StatusUnauthorized {
		t.Fatalf("the old token after rotation: %d", code)
	}

	// runnableEnded, through the controller of purser up.
	me.with(afterCancel).ok("apply", "-f", "-")
	me.with(etlRunnable).ok("apply", "-f", "-")
	me.ok("delete", "runnable", "etl", "-n", "team-a") // cancels it: nowhere to run
	deadline := time.Now().Add(60 * time.Second)
	for {
		out := me.ok("get", "rn", "-n", "team-a", "-l", "purser.io/trigger=after-cancel", "-o", "name")
		if regexp.MustCompile(`(?m)^runnable/after-cancel-[0-9a-f]{12}$`).MatchString(out) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no run of after-cancel 60 s after etl was cancelled:\n%s\n%s", out, me.ok("describe", "trigger", "after-cancel", "-n", "team-a"))
		}
		time.Sleep(time.Second)
	}
	matches(t, "get triggers", me.ok("get", "triggers", "-n", "team-a"),
		`(?m)^NAME\s+SOURCE\s+SUSPEND\s+FIRED\s+LAST\s+AGE$`, `(?m)^after-cancel\s+runnableEnded\s+false\s+1\s+`, `(?m)^hook\s+webhook\s+false\s+1\s+`)
	matches(t, "describe", me.ok("describe", "trigger", "after-cancel", "-n", "team-a"),
		`(?m)^Phases:\s+Cancelled$`, `(?m)^Fired:\s+1$`, `runnable team-a/etl \(uid \S+\) ended Cancelled`)
	if out := me.ok("delete", "trigger", "hook", "-n", "team-a"); !strings.Contains(out, "trigger/team-a/hook") {
		t.Fatalf("delete: %q", out)
	}
}
