package main

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/purser-io/purser/internal/api/server"
	"github.com/purser-io/purser/internal/hub/store"
)

// TestDescribeRunnablePods: `purser describe runnable` lists the pods of
// the current attempt from the inventory, following the owner chain
// (attempt → its Job's uid → the Pods that Job owns, on the attempt's
// cluster), with READY, STATUS and RESTARTS as kubectl prints them; the
// pods of an earlier attempt's Job are not listed; an attempt on a
// cluster that does not track Pods says so. The API is the real one over
// a real database; the inventory is written as the ingester writes it.
func TestDescribeRunnablePods(t *testing.T) {
	ctx := context.Background()
	api := newAdminAPI(t, server.Config{})
	st, srv, token := api.st, api.srv, api.token
	post := func(path, body string) { t.Helper(); api.post(t, path, body) }
	kubeconfig := `
  kubeconfig: |
    apiVersion: v1
    kind: Config
    clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
    users: [{name: u, user: {token: t}}]
    contexts: [{name: c, context: {cluster: c, user: u}}]
    current-context: c
`
	post("/api/v1/clusters", "apiVersion: purser.io/v1alpha1\nkind: Cluster\nmetadata: {name: c1}\nspec:\n  inventory: {kinds: [Pod]}"+kubeconfig)
	post("/api/v1/clusters", "apiVersion: purser.io/v1alpha1\nkind: Cluster\nmetadata: {name: c2}\nspec:"+kubeconfig)
	for _, name := range []string{"train", "elsewhere"} {
		post("/api/v1/runnables", `apiVersion: purser.io/v1alpha1
kind: Runnable
metadata: {name: `+name+`, namespace: team-a}
spec:
  template:
    apiVersion: batch/v1
    kind: Job
    spec:
      template:
        spec:
          restartPolicy: Never
          containers: [{name: main, image: busybox}]
`)
	}
	// train ran on c2 first, then on c1 (its Job job-2); elsewhere runs on
	// c2, which does not track Pods.
	now := time.Now()
	ended := now.Add(-time.Minute)
	if err := st.Tx(ctx, func(tx *store.Tx) error {
		for _, a := range []struct {
			runnable string
			attempts []store.Attempt
		}{
			{"train", []store.Attempt{{Number: 1, Cluster: "c2", ObjectUID: "job-1", StartedAt: now.Add(-time.Hour), EndedAt: &ended, Result: "Evicted"},
				{Number: 2, Cluster: "c1", ObjectUID: "job-2", StartedAt: ended}}},
			{"elsewhere", []store.Attempt{{Number: 1, Cluster: "c2", ObjectUID: "job-9", StartedAt: ended}}},
		} {
			r, err := tx.Runnables().Get(ctx, "team-a", a.runnable)
			if err != nil {
				return err
			}
			for i := range a.attempts {
				a.attempts[i].RunnableUID = r.UID
				if err := tx.Attempts().Put(ctx, &a.attempts[i]); err != nil {
					return err
				}
			}
		}
		var rows []store.InventoryRow
		for i, p := range []struct {
			cluster, name, job, status string
		}{
			{"c1", "train-a", "job-2", `{"phase":"Running","conditions":[{"type":"Ready","status":"True"}],
				"containerStatuses":[{"name":"main","ready":true,"restartCount":3,"state":{"running":{"startedAt":"2026-12-02T10:00:00Z"}}}]}`},
			{"c1", "train-b", "job-2", `{"phase":"Pending","containerStatuses":[{"name":"main","ready":false,"restartCount":0,
				"state":{"waiting":{"reason":"ContainerCreating"}}}]}`},
			// The pod of the first attempt's Job, left on c2; and one of
			// another Job in c1.
			{"c2", "train-old", "job-1", `{"phase":"Failed"}`},
			{"c1", "other-x", "job-7", `{"phase":"Running"}`},
		} {
			obj := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"` + p.name + `","namespace":"team-a","uid":"pod-` + p.name + `",
				"creationTimestamp":"` + now.Add(-10*time.Minute).UTC().Format(time.RFC3339) + `",
				"labels":{"batch.kubernetes.io/controller-uid":"` + p.job + `"},
				"ownerReferences":[{"apiVersion":"batch/v1","kind":"Job","name":"train","uid":"` + p.job + `","controller":true}]},
				"spec":{"nodeName":"node-1","containers":[{"name":"main","image":"busybox"}]},"status":` + p.status + `}`
			var compact bytes.Buffer
			if err := json.Compact(&compact, []byte(obj)); err != nil {
				return err
			}
			rows = append(rows, store.InventoryRow{Cluster: p.cluster, APIVersion: "v1", Kind: "Pod", Namespace: "team-a", Name: p.name,
				UID: "pod-" + p.name, ResourceVersion: "10" + string(rune('0'+i)), Labels: map[string]string{"batch.kubernetes.io/controller-uid": p.job},
				Health: "Unknown", ObservedAt: now, Object: compact.Bytes()})
		}
		_, err := tx.Inventory().Upsert(ctx, rows)
		return err
	}); err != nil {
		t.Fatal(err)
	}

	describe := func(name string) string {
		t.Helper()
		cmd := newDescribeCommand()
		var out, errOut bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&errOut)
		cmd.SetArgs([]string{"runnable", name, "-n", "team-a", "--server", srv.URL, "--token", token})
		if err := cmd.ExecuteContext(ctx); err != nil {
			t.Fatalf("purser describe runnable %s: %v\n%s", name, err, errOut.String())
		}
		return out.String()
	}
	out := describe("train")
	for _, want := range []string{
		`(?m)^Pods \(attempt #2 on c1, from the inventory\):$`,
		`(?m)^  NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE\s+NODE$`,
		`(?m)^  train-a\s+1/1\s+Running\s+3\s+10m\s+node-1$`,
		`(?m)^  train-b\s+0/1\s+ContainerCreating\s+0\s+10m\s+node-1$`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("purser describe runnable train: no line matching %s:\n%s", want, out)
		}
	}
	for _, not := range []string{"train-old", "other-x"} {
		if strings.Contains(out, not) {
			t.Errorf("purser describe runnable train lists %s, not a pod of its current attempt:\n%s", not, out)
		}
	}
	out = describe("elsewhere")
	if !strings.Contains(out, "Pods (attempt #1 on c2, from the inventory):\n  <not tracked: cluster c2's spec.inventory.kinds does not name Pod>") {
		t.Errorf("purser describe runnable elsewhere: no word that c2 does not track Pods:\n%s", out)
	}
}
