package v1alpha1

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

const runnableYAML = `
apiVersion: purser.io/v1alpha1
kind: Runnable
metadata:
  name: nightly-report
  namespace: team-a
spec:
  template:
    apiVersion: batch/v1
    kind: Job
    spec:
      parallelism: 3.0
      completions: 2
      activeDeadlineSeconds: 1.5
      template: {spec: {restartPolicy: Never, containers: [{name: main, image: busybox}]}}
  placement:
    clusterAffinity:
      clusterNames: [dc1-a, dc2-a]
      labelSelector: {matchLabels: {tier: prod}}
      exclude: [dc3-a]
    clusterTolerations:
    - {key: maintenance, operator: Exists, effect: NoSchedule}
  deadline: "2026-12-01T06:00:00Z"
  failover:
    application:
      tolerationSeconds: 120
      purgeMode: Gracefully
      gracePeriodSeconds: 600
      statePreservation:
        rules:
        - aliasLabelName: flink.apache.org/job-id
          jsonPath: "{.jobStatus.jobId}"
    cluster:
      purgeMode: Directly
    consistency: AtMostOne
    mutations:
    - when: "'flink.apache.org/job-id' in preserved"
      path: spec.job.initialSavepointPath
      value: "'s3://checkpoints/' + preserved['flink.apache.org/job-id']"
`

const runnableJSON = `{
  "apiVersion": "purser.io/v1alpha1",
  "kind": "Runnable",
  "metadata": {"generateName": "report-", "namespace": "team-a"},
  "spec": {
    "template": {"apiVersion": "batch/v1", "kind": "Job", "anything": {"goes": [1, "two", null]}},
    "failover": {"mutations": [{"when": "true", "path": "spec.x", "value": "'y'"}]}
  }
}`

const deployableYAML = `
apiVersion: purser.io/v1alpha1
kind: Deployable
metadata: {name: app-config, namespace: team-a}
spec:
  template: {apiVersion: v1, kind: ConfigMap, data: {key: value}}
  placement: {clusterAffinity: {labelSelector: {matchLabels: {tier: prod}}}}
`

const clusterYAML = `
apiVersion: purser.io/v1alpha1
kind: Cluster
metadata: {name: dc1-a, labels: {region: us-east, dc: dc1, tier: prod}}
spec:
  kubeconfig: "apiVersion: v1\nkind: Config\n"
  taints: [{key: maintenance, effect: NoSchedule, timeAdded: "2026-01-01T00:00:00.75Z"}]
status:
  conditions: [{type: Ready, status: "True", lastTransitionTime: "2026-01-01T00:00:00Z", reason: AgentReporting}]
  agent: {lastHeartbeat: "2026-01-01T00:00:05Z"}
  inventory: {objects: 1234}
`

func TestDecodeAccepts(t *testing.T) {
	cases := []struct {
		name        string
		body        string
		contentType string
		check       func(t *testing.T, obj any)
	}{
		{"runnable yaml", runnableYAML, "application/yaml", func(t *testing.T, obj any) {
			r := obj.(*Runnable)
			if r.Metadata.Name != "nightly-report" || r.Spec.Template["kind"] != "Job" {
				t.Errorf("metadata or template lost: %+v", r)
			}
			if got := r.Spec.Placement.ClusterAffinity.LabelSelector.MatchLabels["tier"]; got != "prod" {
				t.Errorf("labelSelector tier = %q", got)
			}
			if got := r.Spec.Failover.Application.StatePreservation.Rules[0].JSONPath; got != "{.jobStatus.jobId}" {
				t.Errorf("jsonPath = %q", got)
			}
			if want := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC); !r.Spec.Deadline.Equal(want) {
				t.Errorf("deadline = %v", r.Spec.Deadline)
			}
		}},
		{"runnable json", runnableJSON, "application/json; charset=utf-8", func(t *testing.T, obj any) {
			r := obj.(*Runnable)
			want := map[string]any{"goes": []any{int64(1), "two", nil}}
			if !reflect.DeepEqual(r.Spec.Template["anything"], want) {
				t.Errorf("free-form template = %#v, want %#v", r.Spec.Template["anything"], want)
			}
		}},
		{"json sniffed without content type", runnableJSON, "", func(t *testing.T, obj any) {
			if obj.(*Runnable).Metadata.GenerateName != "report-" {
				t.Error("generateName lost")
			}
		}},
		{"yaml sniffed without content type", deployableYAML, "", func(t *testing.T, obj any) {
			if obj.(*Deployable).Spec.Template["kind"] != "ConfigMap" {
				t.Error("template lost")
			}
		}},
		{"yaml flow mapping sniffed", "{apiVersion: purser.io/v1alpha1, kind: Deployable, metadata: {name: a}}", "", func(t *testing.T, obj any) {
			if obj.(*Deployable).Metadata.Name != "a" {
				t.Error("name lost")
			}
		}},
		{"json sent as yaml", runnableJSON, "application/yaml", func(t *testing.T, obj any) {
			if obj.(*Runnable).Metadata.Namespace != "team-a" {
				t.Error("namespace lost")
			}
		}},
		{"yaml with leading separator and comment", "# a comment\n---\n" + deployableYAML + "---\n# trailing\n", "text/yaml", func(t *testing.T, obj any) {
			if obj.(*Deployable).Metadata.Name != "app-config" {
				t.Error("name lost")
			}
		}},
		{"yaml with a directive and an end marker", "%YAML 1.1\n---\n" + deployableYAML + "...\n", "application/yaml", func(t *testing.T, obj any) {
			if obj.(*Deployable).Metadata.Namespace != "team-a" {
				t.Error("namespace lost")
			}
		}},
		{"cluster yaml", clusterYAML, "application/yaml", func(t *testing.T, obj any) {
			c := obj.(*Cluster)
			if c.Status.Inventory.Objects != 1234 || c.Status.Conditions[0].Status != "True" {
				t.Errorf("status lost: %+v", c.Status)
			}
			if got := c.Spec.Taints[0].TimeAdded.Time; !got.Equal(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) {
				t.Errorf("timeAdded = %v, want it cut to the second as it is stored", got)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj, err := Decode([]byte(tc.body), tc.contentType)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			tc.check(t, obj)
		})
	}
}

func TestDecodeNumbersInTemplate(t *testing.T) {
	r, err := DecodeRunnable([]byte(runnableYAML), "application/yaml")
	if err != nil {
		t.Fatal(err)
	}
	spec := r.Spec.Template["spec"].(map[string]any)
	for key, want := range map[string]any{
		"parallelism":           int64(3), // written 3.0: the same JSON number as 3
		"completions":           int64(2),
		"activeDeadlineSeconds": 1.5,
	} {
		if got := spec[key]; got != want {
			t.Errorf("%s = %#v (%T), want %#v (%T)", key, got, got, want, want)
		}
	}
}

func TestDecodeRefuses(t *testing.T) {
	const head = `{"apiVersion": "purser.io/v1alpha1", "kind": "Runnable", `
	cases := []struct {
		name          string
		body          string
		contentType   string
		wantMalformed bool
		wantField     string
	}{
		{"unknown top-level field", head + `"metadata": {}, "metdata": {}}`, "application/json", false, "metdata"},
		{"unknown spec field", head + `"spec": {"placment": {}}}`, "application/json", false, "spec.placment"},
		{"unknown field in a list", head + `"spec": {"failover": {"mutations": [{"wen": "true"}]}}}`, "application/json", false, "spec.failover.mutations[0].wen"},
		{"unknown field in yaml", "apiVersion: purser.io/v1alpha1\nkind: Deployable\nspec:\n  placement:\n    clusterAfinity: {}\n", "application/yaml", false, "spec.placement.clusterAfinity"},
		{"field in the wrong case", head + `"Metadata": {}}`, "application/json", false, "Metadata"},
		{"wrong type", head + `"metadata": {"name": 5}}`, "application/json", false, "metadata.name"},
		{"not a time", head + `"spec": {"deadline": "tomorrow"}}`, "application/json", false, ""},
		{"wrong apiVersion", `{"apiVersion": "purser.io/v1", "kind": "Runnable"}`, "application/json", false, "apiVersion"},
		{"missing kind", `{"apiVersion": "purser.io/v1alpha1"}`, "application/json", false, "kind"},
		{"unknown kind", `{"apiVersion": "purser.io/v1alpha1", "kind": "Job"}`, "application/json", false, "kind"},
		{"kind as a number", `{"apiVersion": "purser.io/v1alpha1", "kind": 7}`, "application/json", false, "kind"},
		{"bad json", head + `"metadata": {`, "application/json", true, ""},
		{"yaml sent as json", runnableYAML, "application/json", true, ""},
		{"bad yaml", "kind: Runnable\nmetadata: [\n", "application/yaml", true, ""},
		{"empty body", "  \n", "application/json", true, ""},
		{"only comments", "# nothing\n", "application/yaml", true, ""},
		{"top-level list", `[{"kind": "Runnable"}]`, "application/json", true, ""},
		{"top-level string in yaml", "just text\n", "application/yaml", true, ""},
		{"top-level null", "null", "application/json", true, ""},
		{"trailing data", head + `"metadata": {}} {}`, "application/json", true, ""},
		{"duplicate key in json", head + `"metadata": {"name": "a", "name": "b"}}`, "application/json", true, "metadata.name"},
		{"duplicate key in yaml", "apiVersion: purser.io/v1alpha1\nkind: Runnable\nkind: Runnable\n", "application/yaml", true, ""},
		{"two yaml documents", deployableYAML + "---\n" + deployableYAML, "application/yaml", true, ""},
		{"yaml document after an end marker", deployableYAML + "...\n" + deployableYAML, "application/yaml", true, ""},
		{"unsupported content type", runnableJSON, "text/plain", true, ""},
		{"unreadable content type", runnableJSON, "application/", true, ""},
		{"time outside years 0000-9999 in UTC", `{"apiVersion":"purser.io/v1alpha1","kind":"Deployable","metadata":{"creationTimestamp":"0000-01-01T00:00:00+01:00"}}`, "", false, "metadata.creationTimestamp"},
		{"yaml value JSON cannot hold", "apiVersion: purser.io/v1alpha1\nkind: Runnable\nspec: {template: {a: .inf}}\n", "application/yaml", true, ""},
		{"taint time outside years 0000-9999 in UTC", "apiVersion: purser.io/v1alpha1\nkind: Cluster\nspec:\n  taints: [{key: a, effect: NoSchedule, timeAdded: \"0000-01-01T00:00:00+01:00\"}]\n", "application/yaml", false, "spec.taints[0].timeAdded"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj, err := Decode([]byte(tc.body), tc.contentType)
			if err == nil {
				t.Fatalf("Decode accepted it: %#v", obj)
			}
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %T is not a *DecodeError: %v", err, err)
			}
			if de.Malformed != tc.wantMalformed || de.Field != tc.wantField {
				t.Errorf("got Malformed=%v Field=%q (%v), want Malformed=%v Field=%q", de.Malformed, de.Field, err, tc.wantMalformed, tc.wantField)
			}
			if de.Message == "" || len(de.Details) == 0 || de.Details[0].Field != de.Field {
				t.Errorf("incomplete error: %#v", de)
			}
		})
	}
}

func TestDecodeListsEveryUnknownField(t *testing.T) {
	body := `{"apiVersion": "purser.io/v1alpha1", "kind": "Deployable", "a": 1, "spec": {"b": 2}}`
	_, err := Decode([]byte(body), "application/json")
	var de *DecodeError
	if !errors.As(err, &de) {
		t.Fatalf("got %v", err)
	}
	var fields []string
	for _, d := range de.Details {
		fields = append(fields, d.Field)
	}
	if got := strings.Join(fields, ","); got != "a,spec.b" {
		t.Errorf("fields = %s, want a,spec.b", got)
	}
}

func TestTypedDecodersCheckKind(t *testing.T) {
	if _, err := DecodeRunnable([]byte(runnableJSON), "application/json"); err != nil {
		t.Errorf("DecodeRunnable: %v", err)
	}
	if _, err := DecodeDeployable([]byte(deployableYAML), "application/yaml"); err != nil {
		t.Errorf("DecodeDeployable: %v", err)
	}
	if _, err := DecodeCluster([]byte(clusterYAML), "application/yaml"); err != nil {
		t.Errorf("DecodeCluster: %v", err)
	}
	for name, decode := range map[string]func() error{
		"runnable from a cluster": func() error { _, err := DecodeRunnable([]byte(clusterYAML), "application/yaml"); return err },
		"deployable from a runnable": func() error {
			_, err := DecodeDeployable([]byte(runnableJSON), "application/json")
			return err
		},
		"cluster from a deployable": func() error { _, err := DecodeCluster([]byte(deployableYAML), ""); return err },
	} {
		var de *DecodeError
		if err := decode(); !errors.As(err, &de) || de.Malformed || de.Field != "kind" {
			t.Errorf("%s: got %v, want a 422 on kind", name, err)
		}
	}
}

// roundTripEdges are bodies whose values have more than one spelling.
var roundTripEdges = []string{
	// Numbers: -0, past int64, int64's bounds, whole floats, subnormals.
	`{"apiVersion":"purser.io/v1alpha1","kind":"Runnable","spec":{"template":{"a":[-0.0,1e19,-9223372036854775809,9223372036854775807,1.0e2,0.1,1e-320]}}}`,
	// Times: offsets that UTC must absorb, including +24:00, which Go
	// parses but cannot write.
	`{"apiVersion":"purser.io/v1alpha1","kind":"Runnable","spec":{"deadline":"2026-01-01T00:00:00+24:00"},"status":{"attempts":[{"number":1,"startedAt":"9999-12-31T23:59:59.999999999+23:59","endedAt":"2026-01-01T00:00:00+00:00"}]}}`,
	// metav1.Time: written to the second, zero written as null.
	`{"apiVersion":"purser.io/v1alpha1","kind":"Cluster","spec":{"taints":[{"key":"a","timeAdded":"0001-01-01T00:00:00.5Z"},{"key":"b","timeAdded":"2026-01-01T00:00:00.5+05:00"}]}}`,
	// YAML 1.1 spellings.
	"apiVersion: purser.io/v1alpha1\nkind: Runnable\nspec:\n  template: {a: 0x10, b: 0o17, c: 1e3, d: yes, e: ~, 5: x, f: 2001-12-14, g: 1_000}\n",
}

func TestErrorText(t *testing.T) {
	_, err := Decode([]byte(`{"apiVersion": "v1", "kind": "Pod"}`), "application/json")
	if got, want := err.Error(), "apiVersion: must be purser.io/v1alpha1 (and 1 more)"; got != want {
		t.Errorf("DecodeError: got %q, want %q", got, want)
	}
	_, err = Decode([]byte("[]"), "application/json")
	if got, want := err.Error(), "the body must be one object with apiVersion and kind"; got != want {
		t.Errorf("DecodeError without a field: got %q, want %q", got, want)
	}
	st := &Status{Code: 422, Reason: ReasonInvalid, Message: "Runnable team-a/x is invalid", Details: []FieldError{
		{Field: "spec.template.kind", Message: "is required"},
		{Field: "metadata.name", Message: "is too long"},
	}}
	if got, want := st.Error(), "422 Invalid: Runnable team-a/x is invalid (spec.template.kind: is required; metadata.name: is too long)"; got != want {
		t.Errorf("Status: got %q, want %q", got, want)
	}
}

func TestDecodeRoundTrip(t *testing.T) {
	for _, body := range append([]string{runnableYAML, runnableJSON, deployableYAML, clusterYAML}, roundTripEdges...) {
		obj, err := Decode([]byte(body), "")
		if err != nil {
			t.Fatalf("%v\n%s", err, body)
		}
		assertRoundTrip(t, obj)
	}
}

func TestDecodeTimesAreUTC(t *testing.T) {
	r, err := DecodeRunnable([]byte(roundTripEdges[1]), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tm := range []*time.Time{r.Spec.Deadline, r.Status.Attempts[0].StartedAt, r.Status.Attempts[0].EndedAt} {
		if tm.Location() != time.UTC {
			t.Errorf("%v is not in UTC", tm)
		}
	}
	if want := time.Date(2025, 12, 31, 0, 0, 0, 0, time.UTC); !r.Spec.Deadline.Equal(want) {
		t.Errorf("deadline = %v, want %v", r.Spec.Deadline, want)
	}
}

// assertRoundTrip checks that obj survives being stored as JSON and read
// back: equal as an object, identical as JSON, same spec hash.
func assertRoundTrip(t *testing.T, obj any) {
	t.Helper()
	first, err := json.Marshal(obj)
	if err != nil {
		t.Fatalf("encode %T: %v", obj, err)
	}
	again, err := Decode(first, "application/json")
	if err != nil {
		t.Fatalf("decode of own encoding failed: %v\n%s", err, first)
	}
	if !roundTripEqual.DeepEqual(obj, again) {
		t.Fatalf("round trip changed the object:\nbefore %#v\nafter  %#v\njson %s", obj, again, first)
	}
	second, err := json.Marshal(again)
	if err != nil {
		t.Fatalf("encode again: %v", err)
	}
	if !bytes.Equal(first, second) {
		t.Fatalf("encoding is not stable:\n%s\n%s", first, second)
	}
	if SpecHash(specOf(obj)) != SpecHash(specOf(again)) {
		t.Fatalf("spec hash changed in a round trip")
	}
}

func specOf(obj any) any {
	switch o := obj.(type) {
	case *Runnable:
		return o.Spec
	case *Deployable:
		return o.Spec
	case *Cluster:
		return o.Spec
	}
	return nil
}
