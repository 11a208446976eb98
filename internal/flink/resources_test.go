package flink

import (
	"encoding/json"
	"strings"
	"testing"
)

// A resource's cpu is a number of cores however the object was decoded:
// the submitter decodes templates with UseNumber, so `cpu: 1` of
// examples/runnable-flink.yaml arrives as json.Number.
func TestPodsCPUOfEveryDecoder(t *testing.T) {
	const doc = `{"spec": {"jobManager": {"resource": {"memory": "2048m", "cpu": 1}},
		"taskManager": {"resource": {"memory": "1g", "cpu": 0.5}}, "job": {"parallelism": 2}}}`
	plain := map[string]any{}
	if err := json.Unmarshal([]byte(doc), &plain); err != nil {
		t.Fatal(err)
	}
	numbers := map[string]any{}
	dec := json.NewDecoder(strings.NewReader(doc))
	dec.UseNumber()
	if err := dec.Decode(&numbers); err != nil {
		t.Fatal(err)
	}
	for name, obj := range map[string]map[string]any{"float64": plain, "json.Number": numbers} {
		groups, err := Pods(obj)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		jm, tm := groups[0].Spec.Containers[0].Resources.Requests, groups[1].Spec.Containers[0].Resources.Requests
		if jm.Cpu().String() != "1" || tm.Cpu().String() != "500m" || jm.Memory().String() != "2Gi" || groups[1].Count != 2 {
			t.Fatalf("%s: jobmanager %v, taskmanager %v x%d", name, jm, tm, groups[1].Count)
		}
	}
	bad := map[string]any{"spec": map[string]any{"jobManager": map[string]any{"resource": map[string]any{"cpu": json.Number("x")}}}}
	if _, err := Pods(bad); err == nil || !strings.Contains(err.Error(), "not a number of cores") {
		t.Fatalf("a cpu that is no number: %v", err)
	}
}
