package health

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// TestEvaluateFileGolden pins the exact lines of `purser health -f`, which
// people and scripts read column by column.
func TestEvaluateFileGolden(t *testing.T) {
	in, err := New([]Rule{widgetRule})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := EvaluateFile(&out, filepath.Join("testdata", "objects.yaml"), in); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "objects.golden")
	if *update {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != string(want) {
		t.Errorf("output differs from %s (go test -run Golden -update rewrites it):\n--- got\n%s--- want\n%s", golden, out.String(), want)
	}
}

func TestEvaluateBadDocuments(t *testing.T) {
	input := `---
apiVersion: batch/v1
kind: Job
metadata: {name: first}
---
apiVersion: batch/v1
kind: Job
metadata: {name: [unclosed
---
just a string
---
metadata: {name: no-kind}
---
apiVersion: v1
kind: List
items: [3]
---
kind: Job
metadata: {name: no-api-version}
---
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: last}
status: {phase: Running}
`
	var out bytes.Buffer
	err := Evaluate(&out, strings.NewReader(input), nil)
	if err == nil {
		t.Fatal("no error for unreadable documents")
	}
	for _, want := range []string{
		"<stdin>: document 2: not valid YAML",
		"<stdin>: document 3: not an object but a string",
		"<stdin>: document 4: the object has no kind",
		"<stdin>: document 5: items[0]: not an object but a number",
		"<stdin>, document 6: not a Kubernetes object: apiVersion and kind are required",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	// The readable documents are still judged, in order.
	wantOut := "Job/first Healthy Pending waiting for pods\nWorkflow/last Healthy Running workflow running\n"
	if out.String() != wantOut {
		t.Errorf("got output\n%s\nwant\n%s", out.String(), wantOut)
	}
}

func TestEvaluateFileMissing(t *testing.T) {
	err := EvaluateFile(&bytes.Buffer{}, filepath.Join(t.TempDir(), "nope.yaml"), nil)
	if err == nil || !strings.Contains(err.Error(), "nope.yaml") {
		t.Errorf("got %v, want an error naming the file", err)
	}
}

func TestEvaluateEmpty(t *testing.T) {
	var out bytes.Buffer
	if err := Evaluate(&out, strings.NewReader("---\n# nothing\n---\n"), nil); err != nil || out.Len() != 0 {
		t.Errorf("got %q, %v", out.String(), err)
	}
}

// A purser Runnable (as `purser get runnable -o yaml` prints it) is judged
// by its template and the status the runnable last observed, and the line
// says so; without a template it is an error, not a verdict.
func TestEvaluateRunnable(t *testing.T) {
	input := `apiVersion: purser.io/v1alpha1
kind: Runnable
metadata: {name: nightly, namespace: team-a}
spec:
  template:
    apiVersion: batch/v1
    kind: Job
    metadata: {name: report}
status:
  phase: Failed
  result:
    failed: 1
    conditions: [{type: Failed, status: "True", reason: BackoffLimitExceeded, message: "Job has reached the specified backoff limit"}]
---
apiVersion: purser.io/v1alpha1
kind: Deployable
metadata: {name: cfg, namespace: team-a}
spec:
  template: {apiVersion: v1, kind: ConfigMap, metadata: {name: cfg}}
---
apiVersion: purser.io/v1alpha1
kind: Runnable
metadata: {name: empty}
spec: {}
`
	in, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err = Evaluate(&out, strings.NewReader(input), in)
	if err == nil || !strings.Contains(err.Error(), "<stdin>, document 3: Runnable empty has no spec.template") {
		t.Errorf("error %v", err)
	}
	want := "Runnable/nightly Unhealthy Failed judged its template, a batch/v1 Job, with the status it last observed: job failed: BackoffLimitExceeded: Job has reached the specified backoff limit (0 active, 0 succeeded, 1 failed)\n" +
		"Deployable/cfg - - judged its template, a v1 ConfigMap: a ConfigMap has no status to judge\n"
	if out.String() != want {
		t.Errorf("got:\n%swant:\n%s", out.String(), want)
	}
}
