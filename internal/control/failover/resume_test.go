package failover_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// An agent cut off from the stream suspends its AtMostOne work. When no
// other cluster may take the work, it stays; once the agent reports again
// and the cluster is Ready, the controller resumes it, so a stream outage
// does not leave work stopped for good.
func TestFencedJobResumesWhenItsAgentReturns(t *testing.T) {
	cs := env.Clusters(t)
	f := newFarm(t, sqliteDSN(t), []cluster{{name: "a", sandbox: cs[0]}})
	natsProxy := f.natsProxy()
	f.register(cluster{name: "b", sandbox: cs[1], natsURL: "nats://" + natsProxy.Addr()}, testPeriods)

	// Only b may run it: nowhere to move it to.
	job := strings.Replace(fmt.Sprintf(jobRunnable, "report", v1alpha1.ConsistencyAtMostOne), "clusterNames: [a, b]", "clusterNames: [b]", 1)
	f.startOn("b", job)

	natsProxy.Cut()
	// The agent cannot tell purser while it is cut off: the cluster
	// itself shows the fencing.
	sandboxtest.Eventually(t, wait, "the Job on b suspended after its agent was cut off", func(context.Context) error {
		if jobs := f.objects("b", jobsGVR); len(jobs) != 1 || !suspended(jobs[0].Object) {
			return fmt.Errorf("Jobs on b: %v", jobs)
		}
		return nil
	})
	f.waitCluster("b", "not Ready", func(c *v1alpha1.Cluster) bool {
		return hasTaint(c, v1alpha1.TaintNotReady, corev1.TaintEffectNoExecute)
	})
	if r := f.runnable("report"); r.Status.Cluster != "b" || len(r.Status.Attempts) != 1 {
		t.Fatalf("the runnable moved although no other cluster may take it: %+v", r.Status)
	}

	if err := natsProxy.Restore(); err != nil {
		t.Fatal(err)
	}
	// The controller's message says so only until the ingester reports the
	// Job running again; the audit log keeps it.
	r := f.waitFor("report", "resumed", func(r *v1alpha1.Runnable) bool {
		return !r.Status.Fenced && slices.Contains(f.history("report"), "resume")
	})
	jobs := f.objects("b", jobsGVR)
	if len(jobs) != 1 || suspended(jobs[0].Object) {
		t.Fatalf("the Job on b was not resumed: %v", jobs)
	}
	if _, ok := jobs[0].GetAnnotations()[v1alpha1.AnnotationFenced]; ok {
		t.Errorf("the Job on b still carries %s", v1alpha1.AnnotationFenced)
	}
	if len(r.Status.Attempts) != 1 || r.Status.Attempts[0].EndedAt != nil {
		t.Errorf("attempts: %+v", r.Status.Attempts)
	}
}

const deploymentRunnable = `
apiVersion: purser.io/v1alpha1
kind: Runnable
metadata: {name: %s}
spec:
  template:
    apiVersion: apps/v1
    kind: Deployment
    spec:
      replicas: 1
      selector: {matchLabels: {app: served}}
      template:
        metadata:
          labels: {app: served}
          annotations:
            pod-create.stage.kwok.x-k8s.io/delay: "100ms"
            pod-ready.stage.kwok.x-k8s.io/delay: "100ms"
        spec:
          containers: [{name: main, image: busybox}]
  placement:
    clusterAffinity: {clusterNames: [b]}
  failover:
    consistency: AtMostOne
`

// A kind its agent fences by deleting it (a Deployment: it has no suspend
// of its own) is created again from its template, through the submitter,
// once its agent reports again and the cluster is Ready, when the
// runnable did not move; its history says so.
func TestFencedDeploymentIsRecreatedWhenItsAgentReturns(t *testing.T) {
	cs := env.Clusters(t)
	f := newFarm(t, sqliteDSN(t), []cluster{{name: "a", sandbox: cs[0]}})
	natsProxy := f.natsProxy()
	f.register(cluster{name: "b", sandbox: cs[1], natsURL: "nats://" + natsProxy.Addr()}, testPeriods)
	f.startOn("b", fmt.Sprintf(deploymentRunnable, "served"))
	deployments := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	first := f.objects("b", deployments)
	if len(first) != 1 {
		t.Fatalf("Deployments on b: %v", first)
	}

	natsProxy.Cut()
	sandboxtest.Eventually(t, wait, "the Deployment on b deleted after its agent was cut off", func(context.Context) error {
		if ds := f.objects("b", deployments); len(ds) != 0 {
			return fmt.Errorf("Deployments on b: %d", len(ds))
		}
		return nil
	})
	if err := natsProxy.Restore(); err != nil {
		t.Fatal(err)
	}
	r := f.waitFor("served", "recreated", func(r *v1alpha1.Runnable) bool {
		return !r.Status.Fenced && slices.Contains(f.history("served"), "recreate")
	})
	sandboxtest.Eventually(t, wait, "the Deployment on b created again", func(context.Context) error {
		ds := f.objects("b", deployments)
		if len(ds) != 1 || ds[0].GetUID() == first[0].GetUID() {
			return fmt.Errorf("Deployments on b: %d", len(ds))
		}
		if _, ok := ds[0].GetAnnotations()[v1alpha1.AnnotationFenced]; ok {
			return fmt.Errorf("the new Deployment carries %s", v1alpha1.AnnotationFenced)
		}
		return nil
	})
	if r.Status.Cluster != "b" || len(r.Status.Attempts) != 1 || r.Status.Attempts[0].EndedAt != nil {
		t.Errorf("the runnable moved or changed attempt: %+v", r.Status)
	}
	if !slices.ContainsFunc(f.historySummaries("served"), func(s string) bool { return strings.Contains(s, "created again from its template") }) {
		t.Errorf("no history line says the Deployment was created again: %v", f.historySummaries("served"))
	}
}
