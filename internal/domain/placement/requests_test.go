package placement

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/purser-io/purser/api/v1alpha1"
)

func ctr(name string, req, lim map[string]string) map[string]any {
	c := map[string]any{"name": name, "image": "busybox"}
	r := map[string]any{}
	if req != nil {
		r["requests"] = anyMap(req)
	}
	if lim != nil {
		r["limits"] = anyMap(lim)
	}
	if len(r) > 0 {
		c["resources"] = r
	}
	return c
}

func sidecar(name string, req map[string]string) map[string]any {
	c := ctr(name, req, nil)
	c["restartPolicy"] = "Always"
	return c
}

func anyMap(m map[string]string) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

func list(xs ...map[string]any) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}

func podTemplate(spec map[string]any) map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "p"}, "spec": spec}
}

type rl = map[string]string

// TestRequestsPodRule: the cases of Kubernetes' own unit tests of
// resource.PodRequests (k8s.io/component-helpers resource/helpers_test.go:
// TestPodResourceRequests, TestPodRequestsAndLimits, TestPodLevelResourceRequests),
// written again as runnable templates, plus the API server's defaulting
// of a request from a limit (pkg/apis/core/v1 SetDefaults_Pod).
func TestRequestsPodRule(t *testing.T) {
	cases := []struct {
		name string
		spec map[string]any
		want rl
	}{
		{"larger init container", map[string]any{
			"initContainers": list(ctr("i", rl{"cpu": "4"}, nil)),
			"containers":     list(ctr("c", rl{"cpu": "1"}, nil)),
		}, rl{"cpu": "4"}},
		{"larger containers", map[string]any{
			"initContainers": list(ctr("i", rl{"cpu": "2"}, nil)),
			"containers":     list(ctr("a", rl{"cpu": "2"}, nil), ctr("b", rl{"cpu": "3"}, nil)),
		}, rl{"cpu": "5"}},
		{"pod overhead included", map[string]any{
			"overhead":       map[string]any{"cpu": "1", "memory": "1Gi"},
			"initContainers": list(ctr("i", rl{"cpu": "2"}, rl{"cpu": "2"})),
			"containers":     list(ctr("a", rl{"cpu": "2"}, nil), ctr("b", rl{"cpu": "3"}, nil)),
		}, rl{"cpu": "6", "memory": "1Gi"}},
		{"two containers with overhead, massive init", map[string]any{
			"overhead":       map[string]any{"cpu": "1", "memory": "5"},
			"initContainers": list(ctr("i", rl{"cpu": "10", "memory": "100"}, nil)),
			"containers":     list(ctr("a", rl{"cpu": "2", "memory": "5"}, nil), ctr("b", rl{"cpu": "4", "memory": "3"}, nil)),
		}, rl{"cpu": "11", "memory": "105"}},
		{"restartable init container", map[string]any{
			"initContainers": list(sidecar("s", rl{"cpu": "1"})),
			"containers":     list(ctr("c", rl{"cpu": "1"}, nil)),
		}, rl{"cpu": "2"}},
		{"multiple restartable init containers", map[string]any{
			"initContainers": list(ctr("i", rl{"cpu": "5"}, nil), sidecar("s1", rl{"cpu": "1"}), sidecar("s2", rl{"cpu": "2"}), sidecar("s3", rl{"cpu": "3"})),
			"containers":     list(ctr("c", rl{"cpu": "1"}, nil)),
		}, rl{"cpu": "7"}},
		{"multiple restartable and regular init containers", map[string]any{
			"initContainers": list(ctr("i1", rl{"cpu": "5"}, nil), sidecar("s1", rl{"cpu": "1"}), sidecar("s2", rl{"cpu": "2"}),
				ctr("i2", rl{"cpu": "5"}, nil), sidecar("s3", rl{"cpu": "3"})),
			"containers": list(ctr("c", rl{"cpu": "1"}, nil)),
		}, rl{"cpu": "8"}},
		{"restartable init, init and regular", map[string]any{
			"initContainers": list(sidecar("s", rl{"cpu": "10"}), ctr("i", rl{"cpu": "200"}, nil)),
			"containers":     list(ctr("c", rl{"cpu": "100"}, nil)),
		}, rl{"cpu": "210"}},
		{"pod-level memory and container-level cpu", map[string]any{
			"resources":  map[string]any{"requests": map[string]any{"memory": "2Mi"}},
			"containers": list(ctr("c", rl{"cpu": "2m"}, nil)),
		}, rl{"cpu": "2m", "memory": "2Mi"}},
		{"pod-level unsupported resource left to the containers", map[string]any{
			"resources":  map[string]any{"requests": map[string]any{"storage": "2Mi"}},
			"containers": list(ctr("c", rl{"storage": "3Mi"}, nil)),
		}, rl{"storage": "3Mi"}},
		{"pod-level over container-level", map[string]any{
			"resources":  map[string]any{"requests": map[string]any{"memory": "6Mi", "cpu": "8m"}},
			"containers": list(ctr("c", rl{"memory": "3Mi", "cpu": "2m"}, nil)),
		}, rl{"cpu": "8m", "memory": "6Mi"}},
		{"pod-level, containers, init and sidecar", map[string]any{
			"resources":      map[string]any{"requests": map[string]any{"memory": "15Mi", "cpu": "18m"}},
			"initContainers": list(sidecar("s", rl{"memory": "5Mi", "cpu": "4m"}), ctr("i", rl{"memory": "6Mi", "cpu": "8m"}, nil)),
			"containers":     list(ctr("c", rl{"memory": "3Mi", "cpu": "2m"}, nil)),
		}, rl{"cpu": "18m", "memory": "15Mi"}},
		// The API server's defaults, applied first.
		{"a limit stands in for a missing request", map[string]any{
			"containers": list(ctr("c", rl{"memory": "1Gi"}, rl{"cpu": "2", "memory": "2Gi", "nvidia.com/gpu": "1"})),
		}, rl{"cpu": "2", "memory": "1Gi", "nvidia.com/gpu": "1"}},
		{"pod-level limit defaults the pod-level request", map[string]any{
			"resources":  map[string]any{"limits": map[string]any{"cpu": "4", "memory": "1Gi"}},
			"containers": list(ctr("c", rl{"cpu": "1"}, nil)),
		}, rl{"cpu": "1", "memory": "1Gi"}},
		{"no resources", map[string]any{"containers": list(ctr("c", nil, nil))}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Requests(&v1alpha1.RunnableSpec{Template: podTemplate(tc.spec)})
			if err != nil {
				t.Fatal(err)
			}
			same(t, Strings(d.Total), tc.want)
			same(t, Strings(d.Pod), tc.want)
		})
	}
}

// same compares two status.requests maps by quantity value.
func same(t *testing.T, got, want rl) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("requests %v, want %v", got, want)
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Fatalf("requests %v, want %v", got, want)
		}
		gq, wq := resource.MustParse(g), resource.MustParse(w)
		if gq.Cmp(wq) != 0 {
			t.Fatalf("requests %v, want %v", got, want)
		}
	}
}

func jobTemplate(parallelism, completions any) map[string]any {
	spec := map[string]any{"template": map[string]any{"spec": map[string]any{
		"restartPolicy": "Never",
		"containers":    list(ctr("c", rl{"cpu": "500m", "memory": "1Gi"}, nil)),
	}}}
	if parallelism != nil {
		spec["parallelism"] = parallelism
	}
	if completions != nil {
		spec["completions"] = completions
	}
	return map[string]any{"apiVersion": "batch/v1", "kind": "Job", "metadata": map[string]any{"name": "j"}, "spec": spec}
}

// TestRequestsKinds: the pods each kind runs at once.
func TestRequestsKinds(t *testing.T) {
	flinkDep := func(mutate func(spec map[string]any)) map[string]any {
		spec := map[string]any{
			"flinkVersion":       "v1_20",
			"flinkConfiguration": map[string]any{"taskmanager.numberOfTaskSlots": "2"},
			"jobManager":         map[string]any{"resource": map[string]any{"cpu": 1.0, "memory": "2048m"}},
			"taskManager":        map[string]any{"resource": map[string]any{"cpu": 0.5, "memory": "1g"}},
			"job":                map[string]any{"jarURI": "local:///x.jar", "parallelism": int64(5)},
		}
		if mutate != nil {
			mutate(spec)
		}
		return map[string]any{"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment", "metadata": map[string]any{"name": "f"}, "spec": spec}
	}
	cases := []struct {
		name      string
		spec      v1alpha1.RunnableSpec
		total     rl
		pod       rl
		pods      int64
		sourceHas string
	}{
		{"job default parallelism", v1alpha1.RunnableSpec{Template: jobTemplate(nil, nil)}, rl{"cpu": "500m", "memory": "1Gi"}, rl{"cpu": "500m", "memory": "1Gi"}, 1, ""},
		{"job parallelism 5", v1alpha1.RunnableSpec{Template: jobTemplate(int64(5), nil)}, rl{"cpu": "2500m", "memory": "5Gi"}, rl{"cpu": "500m", "memory": "1Gi"}, 5, ""},
		{"job parallelism bounded by completions", v1alpha1.RunnableSpec{Template: jobTemplate(int64(5), int64(3))}, rl{"cpu": "1500m", "memory": "3Gi"}, rl{"cpu": "500m", "memory": "1Gi"}, 3, ""},
		{"deployment replicas", v1alpha1.RunnableSpec{Template: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "spec": map[string]any{
			"replicas": int64(3), "template": map[string]any{"spec": map[string]any{"containers": list(ctr("c", rl{"cpu": "1"}, nil))}}}}},
			rl{"cpu": "3"}, rl{"cpu": "1"}, 3, ""},
		{"argo workflow largest template", v1alpha1.RunnableSpec{Template: map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow", "spec": map[string]any{
			"entrypoint": "main",
			"templates": list(
				map[string]any{"name": "main", "steps": []any{}},
				map[string]any{"name": "small", "container": ctr("main", rl{"cpu": "1", "memory": "1Gi"}, nil)},
				map[string]any{"name": "big", "script": ctr("main", rl{"cpu": "3", "memory": "512Mi"}, nil)},
			)}}},
			rl{"cpu": "3", "memory": "512Mi"}, rl{"cpu": "3", "memory": "512Mi"}, 1, "big"},
		// The controller merges templateDefaults into each template: a
		// default container's requests are the template's.
		{"argo workflow templateDefaults", v1alpha1.RunnableSpec{Template: map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow", "spec": map[string]any{
			"templateDefaults": map[string]any{"container": ctr("", rl{"cpu": "4", "memory": "8Gi"}, nil)},
			"templates":        list(map[string]any{"name": "plain", "container": map[string]any{"image": "busybox"}}),
		}}}, rl{"cpu": "4", "memory": "8Gi"}, rl{"cpu": "4", "memory": "8Gi"}, 1, "plain"},
		// parallelism 5 over 2 slots: ceil = 3 TaskManagers (FlinkUtils.getNumTaskManagers).
		{"flink jobmanager and taskmanagers", v1alpha1.RunnableSpec{Template: flinkDep(nil)},
			rl{"cpu": "2500m", "memory": "5Gi"}, rl{"cpu": "1", "memory": "2Gi"}, 4, "3 taskmanager"},
		{"flink replicas win over parallelism", v1alpha1.RunnableSpec{Template: flinkDep(func(s map[string]any) {
			s["taskManager"].(map[string]any)["replicas"] = int64(2)
		})}, rl{"cpu": "2", "memory": "4Gi"}, rl{"cpu": "1", "memory": "2Gi"}, 3, ""},
		{"flink sidecar in the pod template", v1alpha1.RunnableSpec{Template: flinkDep(func(s map[string]any) {
			s["podTemplate"] = map[string]any{"spec": map[string]any{"containers": list(ctr("log", rl{"cpu": "100m"}, nil))}}
			s["flinkConfiguration"] = map[string]any{}
			s["job"].(map[string]any)["parallelism"] = int64(1)
		})}, rl{"cpu": "1700m", "memory": "3Gi"}, rl{"cpu": "1100m", "memory": "2Gi"}, 2, ""},
		{"declared resources", v1alpha1.RunnableSpec{Template: map[string]any{"apiVersion": "example.com/v1", "kind": "Thing"},
			Resources: rl{"cpu": "64", "nvidia.com/gpu": "8"}}, rl{"cpu": "64", "nvidia.com/gpu": "8"}, rl{"cpu": "64", "nvidia.com/gpu": "8"}, 0, "spec.resources"},
		// Issue 33's finding: a declaration never lowers what the pods
		// request; it adds what they do not show, per resource the larger.
		{"declared down on a job of 10 pods", v1alpha1.RunnableSpec{Template: jobTemplate(int64(10), nil), Resources: rl{"cpu": "1m", "memory": "1Mi"}},
			rl{"cpu": "5", "memory": "10Gi"}, rl{"cpu": "500m", "memory": "1Gi"}, 10, "10 pods"},
		{"declared up and beside a job's pods", v1alpha1.RunnableSpec{Template: jobTemplate(int64(2), nil), Resources: rl{"cpu": "4", "example.com/license": "1"}},
			rl{"cpu": "4", "memory": "2Gi", "example.com/license": "1"}, rl{"cpu": "500m", "memory": "1Gi", "example.com/license": "1"}, 2, "spec.resources (cpu, example.com/license)"},
		{"unknown kind with a pod template", v1alpha1.RunnableSpec{Template: map[string]any{"apiVersion": "example.com/v1", "kind": "Thing", "spec": map[string]any{
			"worker": map[string]any{"template": map[string]any{"spec": map[string]any{"containers": list(ctr("c", rl{"cpu": "2"}, nil))}}}}}},
			rl{"cpu": "2"}, rl{"cpu": "2"}, 1, ""},
		{"unknown kind without one", v1alpha1.RunnableSpec{Template: map[string]any{"apiVersion": "example.com/v1", "kind": "Thing"}}, nil, nil, 0, "declare spec.resources"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// The template as the API stores it: decoded JSON.
			b, _ := json.Marshal(tc.spec.Template)
			tmpl := map[string]any{}
			_ = json.Unmarshal(b, &tmpl)
			spec := tc.spec
			spec.Template = tmpl
			spec.Resources = maps.Clone(tc.spec.Resources)
			d, err := Requests(&spec)
			if err != nil {
				t.Fatal(err)
			}
			same(t, Strings(d.Total), tc.total)
			same(t, Strings(d.Pod), tc.pod)
			if d.Pods != tc.pods {
				t.Errorf("pods %d, want %d", d.Pods, tc.pods)
			}
			if tc.sourceHas != "" && !strings.Contains(d.Source, tc.sourceHas) {
				t.Errorf("source %q does not say %q", d.Source, tc.sourceHas)
			}
		})
	}
}
