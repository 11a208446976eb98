package stream

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// BenchmarkDecodeEvent: the ingester's reading of one event, as the
// design-size farm's agents publish them (test/scale), beside what
// encoding/json did before: the event with its object as raw bytes, then
// the object again for its health. A Job is judged from its object, so
// both read it whole; a ConfigMap is judged by its kind, so its object is
// only scanned.
func BenchmarkDecodeEvent(b *testing.B) {
	labels := map[string]string{"app": "team-7-app-3", "team": "team-7", "env": "prod", "app.kubernetes.io/part-of": "team-7-platform"}
	meta := map[string]any{"name": "team-7-app-3-job-00042", "namespace": "team-7", "uid": "0b4c5d6e-1f2a-4b3c-9d8e-7f6a5b4c3d2e",
		"resourceVersion": "123456", "generation": 1, "creationTimestamp": "2026-12-07T10:00:00Z", "labels": labels}
	job := map[string]any{"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
		"spec": map[string]any{"backoffLimit": 3, "completions": 1, "parallelism": 1, "template": map[string]any{
			"metadata": map[string]any{"labels": labels},
			"spec": map[string]any{"restartPolicy": "Never", "containers": []any{map[string]any{
				"name": "main", "image": "registry.example.com/team-7-app-3:1.2.3", "args": []string{"--config=/etc/app/config.yaml", "--log-format=json"},
				"resources":    map[string]any{"requests": map[string]string{"cpu": "500m", "memory": "1Gi"}, "limits": map[string]string{"cpu": "2", "memory": "2Gi"}},
				"volumeMounts": []map[string]string{{"name": "config", "mountPath": "/etc/app"}}}}}}},
		"status": map[string]any{"startTime": "2026-12-07T10:00:00Z", "succeeded": 1, "completionTime": "2026-12-07T10:05:00Z",
			"conditions": []map[string]string{{"type": "Complete", "status": "True", "lastTransitionTime": "2026-12-07T10:05:00Z"}}}}
	config := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
		"data": map[string]string{"LOG_LEVEL": "info", "config.yaml": strings.Repeat("  - feature-42: enabled\n", 60)}}
	for _, c := range []struct {
		name string
		obj  map[string]any
	}{{"job", job}, {"configmap", config}} {
		raw, _ := json.Marshal(c.obj)
		data, _ := json.Marshal(Event{Cluster: "cluster-07", APIVersion: c.obj["apiVersion"].(string), Kind: c.obj["kind"].(string),
			Namespace: "team-7", Name: "team-7-app-3-job-00042", UID: "0b4c5d6e", ResourceVersion: "123456", Type: EventModified,
			Labels: labels, Time: time.Now(), Object: raw})
		judged := func(_, kind string) bool { return kind == "Job" }
		b.Run(c.name+"/encoding-json", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				var ev Event
				if err := json.Unmarshal(data, &ev); err != nil {
					b.Fatal(err)
				}
				if judged(ev.APIVersion, ev.Kind) {
					var obj map[string]any
					if err := json.Unmarshal(ev.Object, &obj); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
		b.Run(c.name+"/one-pass", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, _, err := DecodeEvent(data, judged); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
