package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/hub/stream/streamtest"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// TestTrimPod: a Pod keeps its owners, node, containers' names and
// images, and the status kubectl prints; its containers' environment and
// the rest of its spec go.
func TestTrimPod(t *testing.T) {
	var pod map[string]any
	if err := json.Unmarshal([]byte(`{"apiVersion":"v1","kind":"Pod",
		"metadata":{"name":"train-x","namespace":"a","managedFields":[{"manager":"kube-controller-manager"}],
			"ownerReferences":[{"apiVersion":"batch/v1","kind":"Job","name":"train","uid":"job-uid","controller":true}]},
		"spec":{"nodeName":"n1","restartPolicy":"Never","serviceAccountName":"default",
			"volumes":[{"name":"v","emptyDir":{}}],
			"containers":[{"name":"main","image":"busybox:1","env":[{"name":"PASSWORD","value":"hunter2"}],"command":["sh"]}]},
		"status":{"phase":"Running","podIP":"10.0.0.1","qosClass":"BestEffort",
			"conditions":[{"type":"Ready","status":"True"}],
			"containerStatuses":[{"name":"main","ready":true,"restartCount":2,"image":"busybox:1","imageID":"sha256:x",
				"state":{"running":{"startedAt":"2026-12-02T10:00:00Z"}}}]}}`), &pod); err != nil {
		t.Fatal(err)
	}
	out, err := Trim(&unstructured.Unstructured{Object: pod})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(out)
	for _, gone := range []string{"hunter2", "PASSWORD", "managedFields", "volumes", "serviceAccountName", "imageID", "qosClass", `"command"`} {
		if strings.Contains(string(b), gone) {
			t.Errorf("the trimmed Pod keeps %s: %s", gone, b)
		}
	}
	for _, kept := range []string{`"uid":"job-uid"`, `"nodeName":"n1"`, `"image":"busybox:1"`, `"phase":"Running"`, `"restartCount":2`,
		`"ready":true`, `"running":{"startedAt"`, `"type":"Ready"`, `"podIP":"10.0.0.1"`} {
		if !strings.Contains(string(b), kept) {
			t.Errorf("the trimmed Pod lost %s: %s", kept, b)
		}
	}
	again, _ := Trim(out)
	if b2, _ := json.Marshal(again); !bytes.Equal(b2, b) {
		t.Errorf("trimming a trimmed Pod changed it:\n%s\n%s", b, b2)
	}
}

// TestOptInKinds: Pods and Events are tracked only once the hub asks
// (the cluster's key in stream.AgentSettingsBucket, as the API writes
// it): a Job's Pods are then published trimmed, with their owner and the
// status kubectl prints, and the Job's Events too; when the hub no longer
// asks, the Events are listed empty in the next snapshot, so that the
// ingester removes their records.
func TestOptInKinds(t *testing.T) {
	c := env.Clusters(t)[0]
	srv := streamtest.Start(t, "")
	sc := streamtest.Declared(t, srv.URL)
	const cluster = "optin-test"
	got := consume(t, sc, cluster)
	kc, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	const ns = "optin-test"
	ctx := t.Context()
	if err := c.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	a, _ := start(t, Config{Cluster: cluster, RESTConfig: c.RESTConfig(), Stream: streamtest.Connect(t, srv.URL),
		Kinds:            []schema.GroupVersionKind{{Group: "batch", Version: "v1", Kind: "Job"}},
		SnapshotInterval: time.Second, HeartbeatInterval: 500 * time.Millisecond, DiscoveryInterval: 500 * time.Millisecond})
	job, err := kc.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train"}, Spec: batchv1.JobSpec{
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "main", Image: "busybox:1", Env: []corev1.EnvVar{{Name: "PASSWORD", Value: "hunter2"}}}}}}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kc.BatchV1().Jobs(ns).Delete(context.Background(), "train", metav1.DeleteOptions{PropagationPolicy: new(metav1.DeletePropagationBackground)})
	})
	podOfJob := func(ev stream.Event) bool {
		return ev.Kind == "Pod" && ev.Namespace == ns && strings.HasPrefix(ev.Name, "train-")
	}
	// Not asked: the Job is published, its Pods are not, through several
	// discovery passes and snapshots.
	sandboxtest.Eventually(t, time.Minute, "the Job published", func(context.Context) error {
		if !got.find(func(ev stream.Event) bool { return ev.Kind == "Job" && ev.Name == "train" }) {
			return fmt.Errorf("no event for the Job")
		}
		return nil
	})
	sandboxtest.Eventually(t, time.Minute, "the Job's pod created", func(ctx context.Context) error {
		pods, err := kc.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/controller-uid=" + string(job.UID)})
		if err != nil {
			return err
		}
		if len(pods.Items) == 0 {
			return fmt.Errorf("no pod yet")
		}
		return nil
	})
	time.Sleep(2 * time.Second) // four discovery passes
	if got.find(podOfJob) || got.find(func(ev stream.Event) bool { return ev.Kind == "Event" }) {
		t.Fatalf("Pods or Events published while the hub did not ask for them")
	}

	put := func(kinds ...string) {
		t.Helper()
		kv, err := sc.JetStream().KeyValue(ctx, stream.AgentSettingsBucket)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := json.Marshal(stream.AgentSettings{Cluster: cluster, Kinds: kinds})
		if _, err := kv.Put(ctx, cluster, data); err != nil {
			t.Fatal(err)
		}
	}
	put("Pod", "Event")
	var pod map[string]any
	sandboxtest.Eventually(t, 2*time.Minute, "the Job's pod published, running, with its owner", func(context.Context) error {
		got.mu.Lock()
		defer got.mu.Unlock()
		for _, ev := range slices.Backward(got.events) {
			if !podOfJob(ev) {
				continue
			}
			pod = nil
			_ = json.Unmarshal(ev.Object, &pod)
			if phase := fieldOf(pod, "status", "phase"); phase != "Running" && phase != "Succeeded" {
				return fmt.Errorf("pod %s is %q", ev.Name, phase)
			}
			return nil
		}
		return fmt.Errorf("no Pod event")
	})
	b, _ := json.Marshal(pod)
	if !strings.Contains(string(b), `"uid":"`+string(job.UID)+`"`) || !strings.Contains(string(b), `"containerStatuses"`) ||
		!strings.Contains(string(b), `"restartCount"`) || !strings.Contains(string(b), `"state"`) {
		t.Errorf("the published Pod lacks its owner or its containers' status: %s", b)
	}
	if strings.Contains(string(b), "hunter2") || strings.Contains(string(b), "managedFields") {
		t.Errorf("the published Pod is not trimmed: %s", b)
	}
	sandboxtest.Eventually(t, time.Minute, "the Job's Events published", func(context.Context) error {
		if !got.find(func(ev stream.Event) bool {
			return ev.APIVersion == "v1" && ev.Kind == "Event" && ev.Namespace == ns && strings.HasPrefix(ev.Name, "train.")
		}) {
			return fmt.Errorf("no Event about the Job")
		}
		return nil
	})
	sandboxtest.Eventually(t, time.Minute, "a heartbeat counting the Pods and Events", func(ctx context.Context) error {
		hb, err := heartbeatOf(ctx, sc, cluster)
		if err != nil {
			return err
		}
		if hb.Objects["v1/Pod"] == 0 || hb.Objects["v1/Event"] == 0 {
			return fmt.Errorf("heartbeat objects %v", hb.Objects)
		}
		return nil
	})

	// Asked for Pods only: the Events' watch stops, and a snapshot lists
	// them empty.
	got.mu.Lock()
	got.snapshots = nil
	got.mu.Unlock()
	put("Pod")
	sandboxtest.Eventually(t, time.Minute, "a snapshot listing Events empty and Pods in full", func(context.Context) error {
		got.mu.Lock()
		defer got.mu.Unlock()
		var events, pods bool
		for _, s := range got.snapshots {
			for _, l := range s.Kinds {
				switch {
				case l.Kind == "Event" && len(l.Items) == 0 && l.ListResourceVersion != "":
					events = true
				case l.Kind == "Pod" && len(l.Items) > 0:
					pods = true
				}
			}
		}
		if !events || !pods {
			return fmt.Errorf("%d chunks; Events listed empty %v, Pods listed %v", len(got.snapshots), events, pods)
		}
		return nil
	})
	a.mu.Lock()
	_, watchingEvents := a.watched[schema.GroupVersionKind{Version: "v1", Kind: "Event"}]
	a.mu.Unlock()
	if watchingEvents {
		t.Errorf("Events still watched after the hub stopped asking")
	}
	// A settings key removed asks for nothing beyond the configured kinds.
	kv, err := sc.JetStream().KeyValue(ctx, stream.AgentSettingsBucket)
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(ctx, cluster); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatal(err)
	}
	sandboxtest.Eventually(t, time.Minute, "Pods no longer watched", func(context.Context) error {
		a.mu.Lock()
		defer a.mu.Unlock()
		if _, ok := a.watched[schema.GroupVersionKind{Version: "v1", Kind: "Pod"}]; ok {
			return fmt.Errorf("still watching Pods")
		}
		return nil
	})
}

func fieldOf(obj map[string]any, path ...string) string {
	var cur any = obj
	for _, p := range path {
		m, _ := cur.(map[string]any)
		cur = m[p]
	}
	s, _ := cur.(string)
	return s
}
