package health

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// fuzzSeeds are objects of every built-in kind in shapes a cluster would
// never send: fields of the wrong type, lists where maps belong, numbers
// out of range. The fuzzer starts from them to reach every branch.
var fuzzSeeds = []string{
	`{}`,
	`{"apiVersion":"batch/v1","kind":"Job","status":{"active":1,"ready":0}}`,
	`{"apiVersion":"batch/v1","kind":"Job","status":{"conditions":[{"type":"Failed","status":"True","reason":"BackoffLimitExceeded"}]}}`,
	`{"apiVersion":"batch/v1","kind":"Job","status":{"conditions":"Failed"}}`,
	`{"apiVersion":"batch/v1","kind":"Job","status":{"conditions":[null,3,{"type":7}]},"spec":{"suspend":"yes"}}`,
	`{"apiVersion":"batch/v1","kind":"Job","status":[1,2],"metadata":"x"}`,
	`{"apiVersion":"argoproj.io/v1alpha1","kind":"Workflow","status":{"phase":"Failed","message":"boom","progress":"1/2"}}`,
	`{"apiVersion":"argoproj.io/v1alpha1","kind":"Workflow","status":{"phase":{"a":1}}}`,
	`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"generation":1e300},"spec":{"replicas":-5},"status":{"observedGeneration":1.5}}`,
	`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"generation":2},"spec":{"replicas":3,"paused":true},"status":{"observedGeneration":2,"replicas":9223372036854775807,"updatedReplicas":-9223372036854775808,"conditions":[{"type":"Progressing","status":"False","reason":"ProgressDeadlineExceeded"}]}}`,
	`{"apiVersion":"apps/v1","kind":"StatefulSet","metadata":{"generation":1},"spec":{"replicas":3,"updateStrategy":{"type":"RollingUpdate","rollingUpdate":{"partition":99}}},"status":{"observedGeneration":1,"readyReplicas":3,"currentRevision":"a","updateRevision":"b"}}`,
	`{"apiVersion":"apps/v1","kind":"StatefulSet","spec":{"updateStrategy":"OnDelete"},"status":{"observedGeneration":"1"}}`,
	`{"apiVersion":"flink.apache.org/v1beta1","kind":"FlinkDeployment","status":{"jobStatus":{"state":"RECONCILING"},"error":"{\"type\":\"a.b.C\",\"message\":\"ErrImagePull\"}"}}`,
	`{"apiVersion":"flink.apache.org/v1beta1","kind":"FlinkDeployment","status":{"jobStatus":{"state":"CREATED"},"error":"{not json"}}`,
	`{"apiVersion":"flink.apache.org/v1beta1","kind":"FlinkDeployment","status":{"jobStatus":"RUNNING","jobManagerDeploymentStatus":"READY","lifecycleState":"STABLE"}}`,
	`{"apiVersion":"flink.apache.org/v1beta1","kind":"FlinkDeployment","metadata":{"deletionTimestamp":"2026-11-29T10:00:00Z"},"status":{"jobStatus":{"state":"RUNNING"}}}`,
	`{"apiVersion":"example.com/v1","kind":"Widget","status":{"ready":"true","message":3}}`,
	`{"apiVersion":"example.com/v1","kind":"Widget","status":{"ready":true,"message":"\u0000\n\t\u00ff"}}`,
	`{"apiVersion":"v1","kind":"ConfigMap","data":{"k":"v"}}`,
}

// fuzzRules exercises the CEL path with rules that read the fuzzed
// object's fields without guarding them.
var fuzzRules = []Rule{
	widgetRule,
	{APIVersion: "batch/v1", Kind: "CronJob", Health: `object.status.health`, Phase: `object.status.phase`, Message: `string(object.status)`},
}

func FuzzInterpret(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	custom, err := New(fuzzRules)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v any
		if utiljson.Unmarshal(data, &v) != nil {
			return
		}
		obj, _ := v.(map[string]any)
		for _, in := range []*Interpreter{nil, custom} {
			checkResult(t, in.Interpret(obj))
		}
	})
}

// FuzzEvaluate feeds `purser health -f` arbitrary files; it may refuse
// them but must not panic, and every line it writes must be one verdict.
func FuzzEvaluate(f *testing.F) {
	objects, err := os.ReadFile(filepath.Join("testdata", "objects.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(objects)
	f.Add([]byte("---\n---\n"))
	f.Add([]byte("kind: List\napiVersion: v1\nitems: [{}, 3, null]\n"))
	f.Add([]byte("kind: JobList\napiVersion: batch/v1\nitems: [{metadata: {name: a}}]\n"))
	f.Add([]byte("a: &a [*a]\n"))
	custom, err := New(fuzzRules)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var out bytes.Buffer
		_ = Evaluate(&out, bytes.NewReader(data), custom)
		for l := range strings.Lines(out.String()) {
			fields := strings.SplitN(strings.TrimSuffix(l, "\n"), " ", 4)
			if len(fields) < 3 || !strings.Contains(fields[0], "/") ||
				!slices.Contains(append(healthValues, "-"), fields[1]) || !slices.Contains(append(phaseValues, "-"), fields[2]) {
				t.Fatalf("line %q is not <kind>/<name> <health> <phase> <message>", l)
			}
		}
		_ = Evaluate(io.Discard, bytes.NewReader(data), nil)
	})
}

func checkResult(t *testing.T, r Result) {
	t.Helper()
	// Empty is allowed: an object may have no health (a ConfigMap) or
	// no phase (a Node).
	if r.Health != "" && !slices.Contains(healthValues, string(r.Health)) {
		t.Fatalf("health %q is not one of %v", r.Health, healthValues)
	}
	if r.Phase != "" && !slices.Contains(phaseValues, r.Phase) {
		t.Fatalf("phase %q is not one of %v", r.Phase, phaseValues)
	}
	if len(r.Message) > maxMessage || strings.ContainsAny(r.Message, "\n\r\t") {
		t.Fatalf("message is not one short line: %q", r.Message)
	}
	if !utf8.ValidString(r.Message) {
		t.Fatalf("message is not valid UTF-8: %q", r.Message)
	}
	if r.UserError && r.Health != X {
		t.Fatalf("a user error must be Unknown, got %s", r.Health)
	}
}
