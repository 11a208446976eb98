package failover_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// finishingJob completes a second or so after it starts.
const finishingJob = `
apiVersion: purser.io/v1alpha1
kind: Runnable
metadata: {name: %s}
spec:
  %s
  template:
    apiVersion: batch/v1
    kind: Job
    spec:
      backoffLimit: 0
      template:
        metadata:
          annotations:
            pod-complete.stage.kwok.x-k8s.io/delay: "1s"
            pod-complete.stage.kwok.x-k8s.io/jitter-delay: "1s"
        spec:
          restartPolicy: Never
          containers: [{name: main, image: busybox}]
  placement:
    clusterAffinity: {clusterNames: [a]}
`

// An ended runnable goes when a user deletes it, or when its retention
// has passed; either way its Job leaves the cluster too, and the audit
// log keeps its history.
func TestEndedRunnablesAreRemoved(t *testing.T) {
	cs := env.Clusters(t)
	f := newFarm(t, sqliteDSN(t), []cluster{{name: "a", sandbox: cs[0]}})
	deleted := f.submit(fmt.Sprintf(finishingJob, "deleted", ""))
	expiring := f.submit(fmt.Sprintf(finishingJob, "expiring", "ttlSecondsAfterFinished: 2"))

	done := f.waitFor(deleted, "Succeeded", func(r *v1alpha1.Runnable) bool { return r.Status.Phase == v1alpha1.PhaseSucceeded })
	if done.Status.EndedAt == nil || done.Status.RemoveAfter != nil {
		t.Errorf("ended without retention: endedAt %v, removeAfter %v", done.Status.EndedAt, done.Status.RemoveAfter)
	}
	if jobs := f.jobNames("a"); !slices.Contains(jobs, deleted) {
		t.Fatalf("the Job of %s is not on a before the delete: %v", deleted, jobs)
	}
	f.do(http.MethodDelete, "/api/v1/runnables/"+f.ns+"/"+deleted, nil, nil)
	if code := f.status("/api/v1/runnables/" + f.ns + "/" + deleted); code != http.StatusNotFound {
		t.Errorf("GET after the delete of an ended runnable: %d, want 404", code)
	}

	for _, name := range []string{deleted, expiring} {
		sandboxtest.Eventually(t, wait, "the Job of "+name+" leaves a", func(context.Context) error {
			if code := f.status("/api/v1/runnables/" + f.ns + "/" + name); code != http.StatusNotFound {
				return fmt.Errorf("runnable still there (%d)", code)
			}
			if jobs := f.jobNames("a"); slices.Contains(jobs, name) {
				return fmt.Errorf("Job %s still on a", name)
			}
			return nil
		})
	}
	// The audit log tells what happened, the copy's removal included.
	sandboxtest.Eventually(t, wait, "the removals audited", func(context.Context) error {
		for name, removal := range map[string]string{deleted: "delete", expiring: "expire"} {
			h := f.history(name)
			if !slices.Contains(h, removal) || h[len(h)-1] != "purge" || !slices.Contains(h, "observe") {
				return fmt.Errorf("history of %s: %v, want observe, then %s, then purge", name, h, removal)
			}
		}
		return nil
	})
}

// jobNames lists the Jobs in the farm's namespace on one cluster.
func (f *farm) jobNames(cluster string) []string {
	var names []string
	for _, j := range f.objects(cluster, jobsGVR) {
		names = append(names, j.GetName())
	}
	return names
}

// status is the HTTP status of a GET.
func (f *farm) status(path string) int {
	f.t.Helper()
	code, err := f.api.Do(f.ctx, http.MethodGet, path, nil, nil, "", nil)
	if code == 0 {
		f.t.Fatalf("GET %s: %v", path, err)
	}
	return code
}
