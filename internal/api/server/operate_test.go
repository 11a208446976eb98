package server_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/lifecycle"
	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
)

// TestOperateRunnables drives suspend, resume and rerun through the API on
// every engine: who may, from which phase, what the answer and the audit
// log say, and that a refused request writes nothing.
func TestOperateRunnables(t *testing.T) {
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			h := newHarness(t, eng)
			base := "/api/v1/runnables/team-a/r1"
			h.yaml("alice", "POST", "/api/v1/runnables", runnableYAML("team-a", "r1", "true")).want(t, http.StatusAccepted)

			before := h.counts()
			h.do("alice", "POST", base+"/suspend", "", nil).want(t, http.StatusConflict) // Queued: nothing runs
			h.do("alice", "POST", base+"/rerun", "", nil).want(t, http.StatusConflict)   // not ended
			h.do("alice", "POST", base+"/resume", "", nil).want(t, http.StatusConflict)  // not suspended
			h.do("alice", "POST", "/api/v1/runnables/team-a/nope/suspend", "", nil).want(t, http.StatusNotFound)
			if after := h.counts(); !equalCounts(before, after) {
				t.Fatalf("refused requests wrote: %v -> %v", before, after)
			}

			h.advance(t, "team-a", "r1", v1alpha1.PhaseRunning)
			before = h.counts()
			h.do("bob", "POST", base+"/suspend", "", nil).want(t, http.StatusForbidden) // a viewer
			h.do("mallory", "POST", base+"/suspend", "", nil).want(t, http.StatusForbidden)
			h.do("", "POST", base+"/suspend", "", nil).want(t, http.StatusUnauthorized)
			if after := h.counts(); !equalCounts(before, after) {
				t.Fatalf("refused requests wrote: %v -> %v", before, after)
			}

			got := h.do("alice", "POST", base+"/suspend", "", nil).want(t, http.StatusOK)
			if got.str("status", "phase") != "Suspended" || got.str("status", "suspension", "by") != "alice" {
				t.Fatalf("suspend answered %s", got.raw)
			}
			if s, _ := got.body["status"].(map[string]any)["suspension"].(map[string]any); s["suspend"] != true {
				t.Fatalf("suspension %v, want suspend true", s)
			}
			h.do("alice", "POST", base+"/suspend", "", nil).want(t, http.StatusConflict)
			h.do("alice", "POST", base+"/rerun", "", nil).want(t, http.StatusConflict)

			got = h.do("alice", "POST", base+"/resume", "", nil).want(t, http.StatusOK)
			if got.str("status", "phase") != "Suspended" { // until the submitter cleared the field
				t.Fatalf("resume answered %s", got.raw)
			}
			if s, _ := got.body["status"].(map[string]any)["suspension"].(map[string]any); s["suspend"] != false {
				t.Fatalf("suspension %v, want suspend false", s)
			}
			h.do("alice", "POST", base+"/resume", "", nil).want(t, http.StatusConflict)

			// A suspended runnable can be cancelled; a cancelled one whose
			// copy is still being removed cannot be rerun yet.
			h.do("alice", "DELETE", base, "", nil).want(t, http.StatusOK)
			h.do("alice", "POST", base+"/rerun", "", nil).want(t, http.StatusConflict)

			// A failed runnable reruns as attempt 2; attempt 1 stays.
			h.yaml("alice", "POST", "/api/v1/runnables", runnableYAML("team-a", "r2", "exit 1")).want(t, http.StatusAccepted)
			h.advance(t, "team-a", "r2", v1alpha1.PhaseFailed)
			h.do("bob", "POST", "/api/v1/runnables/team-a/r2/rerun", "", nil).want(t, http.StatusForbidden)
			got = h.do("alice", "POST", "/api/v1/runnables/team-a/r2/rerun", "", nil).want(t, http.StatusOK)
			if got.str("status", "phase") != "Queued" || got.str("status", "submittedBy") != "alice" || got.str("status", "endedAt") != "" {
				t.Fatalf("rerun answered %s", got.raw)
			}
			read := h.get("alice", "/api/v1/runnables/team-a/r2").want(t, http.StatusOK)
			atts, _ := read.body["status"].(map[string]any)["attempts"].([]any)
			if len(atts) != 1 || atts[0].(map[string]any)["result"] != "Failed" {
				t.Fatalf("attempts after the rerun: %v, want attempt 1 Failed kept", atts)
			}
			if !strings.Contains(read.str("status", "message"), "as attempt 2") {
				t.Fatalf("message %q", read.str("status", "message"))
			}

			// A kind purser cannot suspend is refused with its reason.
			h.yaml("alice", "POST", "/api/v1/runnables", deploymentRunnableYAML("team-a", "web")).want(t, http.StatusAccepted)
			h.advance(t, "team-a", "web", v1alpha1.PhaseRunning)
			before = h.counts()
			bad := h.do("alice", "POST", "/api/v1/runnables/team-a/web/suspend", "", nil).want(t, http.StatusUnprocessableEntity)
			if !strings.Contains(string(bad.raw), "cannot be suspended") {
				t.Fatalf("refusal %s", bad.raw)
			}
			if after := h.counts(); !equalCounts(before, after) {
				t.Fatalf("refused suspend wrote: %v -> %v", before, after)
			}

			// A tenant's limits hold for a rerun as for a submit: once
			// Jobs are denied in team-a, a Job cannot be rerun there.
			h.advance(t, "team-a", "r2", v1alpha1.PhaseFailed)
			p := testPolicy()
			ns := p.Namespaces["team-a"]
			ns.Kinds.Deny = append(ns.Kinds.Deny, "Job.batch")
			p.Namespaces["team-a"] = ns
			h.setPolicy(t, p)
			sandboxWait(t, "rerun refused by the new policy", func() error {
				if r := h.do("alice", "POST", "/api/v1/runnables/team-a/r2/rerun", "", nil); r.code != http.StatusForbidden {
					return fmt.Errorf("%d %s", r.code, r.raw)
				}
				return nil
			})

			hist := h.get("admin", "/api/v1/history").want(t, http.StatusOK).items()
			var ops []string
			for _, e := range hist {
				if a := fmt.Sprint(e["action"]); a == "suspend" || a == "resume" || a == "rerun" {
					ops = append(ops, fmt.Sprintf("%v %v %v", e["actor"], a, e["object"]))
				}
			}
			want := []string{"alice suspend Runnable/team-a/r1", "alice resume Runnable/team-a/r1", "alice rerun Runnable/team-a/r2"}
			if !slices.Equal(ops, want) {
				t.Fatalf("history of operations:\n%s\nwant:\n%s", strings.Join(ops, "\n"), strings.Join(want, "\n"))
			}

			// Where runnables need approval, a rerun waits for another
			// approver than the one who asked.
			h.yaml("alice", "POST", "/api/v1/runnables", runnableYAML("team-b", "b1", "true")).want(t, http.StatusAccepted)
			h.decide("carol", "/api/v1/runnables/team-b/b1", "approve").want(t, http.StatusOK)
			h.advance(t, "team-b", "b1", v1alpha1.PhaseSucceeded)
			got = h.do("alice", "POST", "/api/v1/runnables/team-b/b1/rerun", "", nil).want(t, http.StatusOK)
			if got.str("status", "phase") != "PendingApproval" {
				t.Fatalf("rerun in team-b answered %s", got.raw)
			}
			h.decide("alice", "/api/v1/runnables/team-b/b1", "approve").want(t, http.StatusForbidden)
			h.decide("carol", "/api/v1/runnables/team-b/b1", "approve").want(t, http.StatusOK)
		})
	}
}

func equalCounts(a, b map[string]int) bool {
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return len(a) == len(b)
}

func sandboxWait(t *testing.T, what string, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func deploymentRunnableYAML(ns, name string) string {
	return fmt.Sprintf(`apiVersion: purser.io/v1alpha1
kind: Runnable
metadata:
  name: %s
  namespace: %s
spec:
  template:
    apiVersion: apps/v1
    kind: Deployment
    spec:
      selector: {matchLabels: {app: web}}
      template:
        metadata: {labels: {app: web}}
        spec:
          containers:
          - name: main
            image: nginx
`, name, ns)
}

// advance moves runnable ns/name behind the API's back, as the submitter
// and the ingester would, to Running (attempt open on sandbox-1) or to an
// ended phase (its attempt ended with that result). An ended runnable is
// first rerun-Queued by the test's caller, or Queued as submitted.
func (h *harness) advance(t *testing.T, ns, name string, to v1alpha1.Phase) {
	t.Helper()
	ctx := context.Background()
	step := func(to v1alpha1.Phase, by lifecycle.Cause, edit func(tx *store.Tx, r *lifecycle.Runnable, tr *lifecycle.Transition) error) {
		t.Helper()
		err := h.store.Tx(ctx, func(tx *store.Tx) error {
			rec, err := tx.Runnables().Get(ctx, ns, name)
			if err != nil {
				return err
			}
			r, err := lifecycle.Decode(rec)
			if err != nil {
				return err
			}
			tr := lifecycle.Transition{To: to, By: by, Audit: &audit.Entry{Action: "test", Summary: "moved by the test to " + string(to)}}
			if err := edit(tx, r, &tr); err != nil {
				return err
			}
			_, err = lifecycle.Apply(ctx, tx, r, tr)
			return err
		})
		if err != nil {
			t.Fatalf("move %s/%s to %s: %v", ns, name, to, err)
		}
	}
	last := func(tx *store.Tx, r *lifecycle.Runnable) (*store.Attempt, int, error) {
		atts, err := tx.Attempts().List(ctx, r.Rec.UID)
		if err != nil || len(atts) == 0 {
			return nil, 0, err
		}
		return atts[len(atts)-1], len(atts), nil
	}
	var phase v1alpha1.Phase
	_ = h.store.Read(ctx, func(tx *store.Tx) error {
		rec, err := tx.Runnables().Get(ctx, ns, name)
		if err == nil {
			phase = v1alpha1.Phase(rec.Phase)
		}
		return err
	})
	if phase.Terminal() { // start again, as a rerun does
		step(v1alpha1.PhaseQueued, lifecycle.ByAPI, func(*store.Tx, *lifecycle.Runnable, *lifecycle.Transition) error { return nil })
	}
	cluster := "sandbox-1"
	if phase == v1alpha1.PhaseRunning {
		goto running
	}
	step(v1alpha1.PhaseScheduled, lifecycle.BySubmitter, func(tx *store.Tx, r *lifecycle.Runnable, tr *lifecycle.Transition) error {
		_, n, err := last(tx, r)
		tr.Cluster = &cluster
		tr.Attempt = &store.Attempt{RunnableUID: r.Rec.UID, Number: n + 1, Cluster: cluster, StartedAt: time.Now()}
		return err
	})
	step(v1alpha1.PhaseSubmitted, lifecycle.BySubmitter, func(tx *store.Tx, r *lifecycle.Runnable, tr *lifecycle.Transition) error {
		a, _, err := last(tx, r)
		if err == nil {
			c := *a
			c.ObjectUID = "obj-" + r.Rec.UID
			tr.Attempt = &c
		}
		return err
	})
	step(v1alpha1.PhaseRunning, lifecycle.ByIngester, func(*store.Tx, *lifecycle.Runnable, *lifecycle.Transition) error { return nil })
running:
	if to == v1alpha1.PhaseRunning {
		return
	}
	step(to, lifecycle.ByIngester, func(tx *store.Tx, r *lifecycle.Runnable, tr *lifecycle.Transition) error {
		a, _, err := last(tx, r)
		if err == nil {
			c := *a
			now := time.Now()
			c.EndedAt, c.Result = &now, string(to)
			tr.Attempt = &c
		}
		return err
	})
}

// spec.retry is checked on submit: each wrong field is named, and nothing
// is stored.
func TestRetrySpecValidated(t *testing.T) {
	h := newHarness(t, storetest.Engines()[0])
	before := h.counts()
	body := strings.Replace(runnableYAML("team-a", "r", "true"), "spec:\n  template:", `spec:
  retry:
    limit: -1
    backoff: soon
    rules:
    - {when: Sometimes, action: Retry}
    - {when: DeadlineExceeded, action: Again}
    - {when: OOMKilled, onExitCodes: {operator: Maybe, values: [0]}, action: Ignore}
  template:`, 1)
	got := h.yaml("alice", "POST", "/api/v1/runnables", body).want(t, http.StatusUnprocessableEntity)
	for _, field := range []string{"spec.retry.limit", "spec.retry.backoff", "spec.retry.rules[0].when", "spec.retry.rules[1].action",
		"spec.retry.rules[2].onExitCodes", "spec.retry.rules[2].onExitCodes.operator", "spec.retry.rules[2].onExitCodes.values"} {
		if !strings.Contains(string(got.raw), `"`+field+`"`) {
			t.Errorf("the answer does not name %s: %s", field, got.raw)
		}
	}
	if after := h.counts(); !equalCounts(before, after) {
		t.Fatalf("a refused submit wrote: %v -> %v", before, after)
	}
	ok := strings.Replace(runnableYAML("team-a", "r", "true"), "spec:\n  template:", `spec:
  retry:
    limit: 2
    backoff: 10s
    rules:
    - {when: ExitCode, onExitCodes: {operator: In, values: [42]}, action: Retry}
    - {when: DeadlineExceeded, action: RetryElsewhere}
  template:`, 1)
	h.yaml("alice", "POST", "/api/v1/runnables", ok).want(t, http.StatusAccepted)
}

// PUT changes a runnable's spec against the resourceVersion read: stale is
// 409 and changes nothing; a running Job is refused with the offer of a
// rerun; an ended one takes the spec, and its rerun runs it.
func TestUpdateRunnable(t *testing.T) {
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			h := newHarness(t, eng)
			path := "/api/v1/runnables/team-a/r1"
			created := h.yaml("alice", "POST", "/api/v1/runnables", runnableYAML("team-a", "r1", "echo one")).want(t, http.StatusAccepted)
			rv := created.str("metadata", "resourceVersion")
			withRV := func(body, rv string) string {
				return strings.Replace(body, "  namespace: team-a\n", "  namespace: team-a\n  resourceVersion: \""+rv+"\"\n", 1)
			}
			two := runnableYAML("team-a", "r1", "echo two")

			before := h.counts()
			h.yaml("alice", "PUT", path, two).want(t, http.StatusPreconditionRequired)
			h.yaml("alice", "PUT", path, withRV(two, "999")).want(t, http.StatusConflict)
			h.yaml("bob", "PUT", path, withRV(two, rv)).want(t, http.StatusForbidden)
			h.yaml("alice", "PUT", "/api/v1/runnables/team-a/other", withRV(two, rv)).want(t, http.StatusUnprocessableEntity)
			h.yaml("alice", "PUT", "/api/v1/runnables/team-a/nope", withRV(runnableYAML("team-a", "nope", "x"), "1")).want(t, http.StatusNotFound)
			if after := h.counts(); !equalCounts(before, after) {
				t.Fatalf("refused updates wrote: %v -> %v", before, after)
			}

			// Queued: the spec changes, and the generation with it.
			got := h.yaml("alice", "PUT", path, withRV(two, rv)).want(t, http.StatusOK)
			if !strings.Contains(string(got.raw), "echo two") || fmt.Sprint(got.body["metadata"].(map[string]any)["generation"]) != "2" {
				t.Fatalf("update answered %s", got.raw)
			}
			h.yaml("alice", "PUT", path, withRV(two, rv)).want(t, http.StatusConflict) // the read is stale now
			rv = got.str("metadata", "resourceVersion")
			h.yaml("alice", "PUT", path, withRV(two, rv)).want(t, http.StatusOK) // the same again changes nothing
			if now := h.get("alice", path).str("metadata", "resourceVersion"); now != rv {
				t.Fatalf("the same spec again moved the runnable from %s to %s", rv, now)
			}

			// Running: a Job's pod template cannot change on its cluster.
			h.advance(t, "team-a", "r1", v1alpha1.PhaseRunning)
			rv = h.get("alice", path).str("metadata", "resourceVersion")
			before = h.counts()
			refused := h.yaml("alice", "PUT", path, withRV(runnableYAML("team-a", "r1", "echo three"), rv)).want(t, http.StatusConflict)
			if !strings.Contains(string(refused.raw), "immutable") || !strings.Contains(string(refused.raw), "rerun") {
				t.Fatalf("refusal %s", refused.raw)
			}
			if after := h.counts(); !equalCounts(before, after) {
				t.Fatalf("a refused update wrote: %v -> %v", before, after)
			}

			// Ended: the spec changes, and a rerun runs it.
			h.advance(t, "team-a", "r1", v1alpha1.PhaseFailed)
			rv = h.get("alice", path).str("metadata", "resourceVersion")
			h.yaml("alice", "PUT", path, withRV(runnableYAML("team-a", "r1", "echo three"), rv)).want(t, http.StatusOK)
			rerun := h.do("alice", "POST", path+"/rerun", "", nil).want(t, http.StatusOK)
			if !strings.Contains(string(rerun.raw), "echo three") {
				t.Fatalf("the rerun does not carry the new spec: %s", rerun.raw)
			}
			var updates []string
			for _, e := range h.get("admin", "/api/v1/history").want(t, http.StatusOK).items() {
				if e["action"] == "update" {
					updates = append(updates, fmt.Sprint(e["actor"]))
				}
			}
			if fmt.Sprint(updates) != "[alice alice]" {
				t.Fatalf("update entries by %v, want two by alice", updates)
			}
		})
	}
}

func flinkRunnableYAML(name string, parallelism int, objectName string) string {
	md := ""
	if objectName != "" {
		md = "\n    metadata: {name: " + objectName + "}"
	}
	return fmt.Sprintf(`apiVersion: purser.io/v1alpha1
kind: Runnable
metadata:
  name: %s
  namespace: team-a
spec:
  template:
    apiVersion: flink.apache.org/v1beta1
    kind: FlinkDeployment%s
    spec:
      image: flink:1.20
      job: {jarURI: "local:///opt/flink/examples/streaming/WordCount.jar", parallelism: %d, upgradeMode: savepoint}
`, name, md, parallelism)
}

// PUT of a running FlinkDeployment is taken in place: the spec and its
// generation change, the runnable keeps its phase and attempt,
// status.update names who asked and for which attempt, the audit log has
// the update, and each update is its own message to the submitters (the
// generation in its id). A changed object name and a running Argo
// Workflow are refused and change nothing.
func TestUpdateRunningInPlace(t *testing.T) {
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			h := newHarness(t, eng)
			path := "/api/v1/runnables/team-a/wc"
			withRV := func(body, rv string) string {
				return strings.Replace(body, "  namespace: team-a\n", "  namespace: team-a\n  resourceVersion: \""+rv+"\"\n", 1)
			}
			created := h.yaml("alice", "POST", "/api/v1/runnables", flinkRunnableYAML("wc", 2, "")).want(t, http.StatusAccepted)
			uid := created.str("metadata", "uid")

			h.advance(t, "team-a", "wc", v1alpha1.PhaseRunning)
			rv := h.get("alice", path).str("metadata", "resourceVersion")
			before := h.counts()
			renamed := h.yaml("alice", "PUT", path, withRV(flinkRunnableYAML("wc", 3, "other"), rv)).want(t, http.StatusConflict)
			if !strings.Contains(string(renamed.raw), `metadata.name changes from \"wc\" to \"other\"`) {
				t.Fatalf("renamed: %s", renamed.raw)
			}
			if after := h.counts(); !equalCounts(before, after) {
				t.Fatalf("a refused update wrote: %v -> %v", before, after)
			}

			got := h.yaml("alice", "PUT", path, withRV(flinkRunnableYAML("wc", 3, ""), rv)).want(t, http.StatusOK)
			if g := fmt.Sprint(got.body["metadata"].(map[string]any)["generation"]); g != "2" || got.str("status", "phase") != "Running" {
				t.Fatalf("update answered generation %s, phase %s: %s", g, got.str("status", "phase"), got.raw)
			}
			if by, att := got.str("status", "update", "by"), fmt.Sprint(got.body["status"].(map[string]any)["update"].(map[string]any)["attempt"]); by != "alice" || att != "1" {
				t.Fatalf("status.update by %q for attempt %s", by, att)
			}
			if !strings.Contains(got.str("status", "message"), "to be applied in place to attempt 1 on sandbox-1") {
				t.Fatalf("message %q", got.str("status", "message"))
			}
			after := h.counts()
			if after["attempts"] != before["attempts"] || after["audit_log"] != before["audit_log"]+1 {
				t.Fatalf("the update wrote %v -> %v: want one audit entry and no attempt", before, after)
			}
			rv = got.str("metadata", "resourceVersion")
			h.yaml("alice", "PUT", path, withRV(flinkRunnableYAML("wc", 4, ""), rv)).want(t, http.StatusOK)
			ids := h.submissions(3)
			for _, want := range []string{uid + "/update/1/2", uid + "/update/1/3"} {
				if !slices.Contains(ids, want) {
					t.Fatalf("submissions %v: no %s", ids, want)
				}
			}
			var updates []string
			for _, e := range h.get("admin", "/api/v1/history").want(t, http.StatusOK).items() {
				if e["action"] == "update" && e["object"] == "Runnable/team-a/wc" {
					updates = append(updates, fmt.Sprint(e["actor"], " ", e["outcome"]))
				}
			}
			if fmt.Sprint(updates) != "[alice Running alice Running]" {
				t.Fatalf("update entries %v, want two by alice, Running", updates)
			}

			wf := func(image string) string {
				return fmt.Sprintf(`apiVersion: purser.io/v1alpha1
kind: Runnable
metadata:
  name: wf
  namespace: team-a
spec:
  template:
    apiVersion: argoproj.io/v1alpha1
    kind: Workflow
    spec:
      entrypoint: main
      templates:
      - name: main
        container: {image: %s}
`, image)
			}
			h.yaml("alice", "POST", "/api/v1/runnables", wf("busybox")).want(t, http.StatusAccepted)
			h.advance(t, "team-a", "wf", v1alpha1.PhaseRunning)
			rv = h.get("alice", "/api/v1/runnables/team-a/wf").str("metadata", "resourceVersion")
			before = h.counts()
			refused := h.yaml("alice", "PUT", "/api/v1/runnables/team-a/wf", withRV(wf("busybox:1.37"), rv)).want(t, http.StatusConflict)
			if !strings.Contains(string(refused.raw), "storedWorkflowTemplateSpec") || !strings.Contains(string(refused.raw), "rerun") {
				t.Fatalf("refusal of a running Workflow's change: %s", refused.raw)
			}
			if after := h.counts(); !equalCounts(before, after) {
				t.Fatalf("a refused update wrote: %v -> %v", before, after)
			}
		})
	}
}
