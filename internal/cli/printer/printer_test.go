package printer

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// decode reads JSON as the client does, numbers as json.Number.
func decode(t *testing.T, s string) Object {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var o Object
	if err := dec.Decode(&o); err != nil {
		t.Fatal(err)
	}
	return o
}

const cluster = `{"kind": "Cluster", "metadata": {"name": "sandbox-1", "labels": {"dc": "dc-1"}, "creationTimestamp": "2026-01-01T00:00:00Z"},
  "spec": {"taints": [{"key": "purser.io/cordon", "effect": "NoSchedule"}]},
  "status": {"conditions": [{"type": "Ready", "status": "False", "reason": "APIServerUnreachable", "message": "dial tcp: refused", "lastTransitionTime": "2026-01-02T00:00:00Z"}],
    "taints": [{"key": "purser.io/unreachable", "effect": "NoExecute", "timeAdded": "2026-01-02T00:00:05Z"}],
    "agent": {"freshness": {"fresh": false, "reason": "KubeAPIUnreachable", "message": "the agent cannot reach its kube-apiserver"}},
    "inventory": {"objects": 1234567}}}`

// The cluster's table counts the taints set on it and those purser added,
// and -o wide names them with the Ready reason.
func TestClusterTable(t *testing.T) {
	var out bytes.Buffer
	if err := Table(&out, "Cluster", []Object{decode(t, cluster)}, TableOptions{Wide: true}); err != nil {
		t.Fatal(err)
	}
	row := strings.Split(out.String(), "\n")[1]
	if !regexp.MustCompile(`^sandbox-1\s+NotReady\s+dc=dc-1\s+2\s+1234567\s+\S+\s+APIServerUnreachable\s+KubeAPIUnreachable\s+purser.io/cordon:NoSchedule,purser.io/unreachable:NoExecute\s+<none>$`).MatchString(row) {
		t.Fatalf("row %q", row)
	}
}

func TestDescribeCluster(t *testing.T) {
	var out bytes.Buffer
	if err := Describe(&out, "Cluster", decode(t, cluster), []Object{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Ready:         False (APIServerUnreachable) since 2026-01-02T00:00:00Z",
		"Ready message: dial tcp: refused",
		"State:         NotReady",
		"Records:       the agent cannot reach its kube-apiserver",
		"purser.io/cordon:NoSchedule      set on the cluster",
		"purser.io/unreachable:NoExecute  added by purser from its conditions  since 2026-01-02T00:00:05Z",
		"Ready  False  APIServerUnreachable",
		"History:\n  <none>",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("describe lacks %q:\n%s", want, out.String())
		}
	}
}

func runnables(t *testing.T) []Object {
	return []Object{
		decode(t, `{"kind": "Runnable", "metadata": {"name": "b", "namespace": "x"}, "status": {"phase": "Running", "attempts": [{"number": 1}, {"number": 2}]}}`),
		decode(t, `{"kind": "Runnable", "metadata": {"name": "a", "namespace": "x"}, "status": {"phase": "Queued"}}`),
		decode(t, `{"kind": "Runnable", "metadata": {"name": "c", "namespace": "x"}, "status": {"phase": "Failed", "attempts": [{"number": 1}]}}`),
	}
}

func names(items []Object) string {
	var s []string
	for _, it := range items {
		s = append(s, Field(it, "metadata", "name"))
	}
	return strings.Join(s, ",")
}

func TestSortBy(t *testing.T) {
	for _, tc := range []struct{ expr, want, err string }{
		{".metadata.name", "a,b,c", ""},
		{"{.metadata.name}", "a,b,c", ""},
		{"status.phase", "c,a,b", ""},
		// Numbers as numbers; objects without the field first.
		{".status.attempts[-1].number", "a,c,b", ""},
		{".status.nothing", "", "no object has a field {.status.nothing}"},
		{"{.a}{.b}", "", "not a field path"},
	} {
		items := runnables(t)
		err := SortBy(items, tc.expr)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("SortBy(%s) error %v, want %q", tc.expr, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("SortBy(%s): %v", tc.expr, err)
		} else if got := names(items); got != tc.want {
			t.Errorf("SortBy(%s) = %s, want %s", tc.expr, got, tc.want)
		}
	}
}

func TestFormats(t *testing.T) {
	render := func(output string, single bool, items ...Object) string {
		t.Helper()
		f, err := ParseFormat(output, OutputWide, OutputYAML, OutputJSON, OutputName, OutputJSONPath)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := f.Print(&out, []Group{{Kind: "Runnable", Items: items}}, single, TableOptions{}); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	items := runnables(t)
	if got := render("name", false, items...); got != "runnable/b\nrunnable/a\nrunnable/c\n" {
		t.Errorf("-o name: %q", got)
	}
	// jsonpath sees a List of several objects, the object itself when one
	// was named, numbers as written, and filters compare numbers.
	if got := render("jsonpath={.items[*].metadata.name}", false, items...); got != "b a c\n" {
		t.Errorf("-o jsonpath on a list: %q", got)
	}
	if got := render("jsonpath={.status.phase}", true, items[0]); got != "Running\n" {
		t.Errorf("-o jsonpath on one: %q", got)
	}
	if got := render(`jsonpath={.items[?(@.status.attempts[0].number==1)].metadata.name}`, false, items...); got != "b c\n" {
		t.Errorf("-o jsonpath filter: %q", got)
	}
	if got := render("yaml", false, items[1]); !strings.HasPrefix(got, "apiVersion: v1\nitems:\n- kind: Runnable") || !strings.Contains(got, "kind: List") {
		t.Errorf("-o yaml of a list:\n%s", got)
	}
	if got := render("wide", false, items...); !regexp.MustCompile(`(?m)^b\s+Running\s+<none>\s+<none>\s+<unknown>\s+2\s*$`).MatchString(got) {
		t.Errorf("-o wide lacks the attempts:\n%s", got)
	}
	for _, bad := range []string{"xml", "jsonpath", "jsonpath={.a", "yaml=x"} {
		if _, err := ParseFormat(bad, OutputYAML, OutputJSONPath); err == nil {
			t.Errorf("-o %s accepted", bad)
		}
	}
	if _, err := ParseFormat("name", OutputYAML); err == nil || !strings.Contains(err.Error(), "use yaml") {
		t.Errorf("-o name where not offered: %v", err)
	}
}

// A watch prints later rows in the columns of the first table.
func TestWatcher(t *testing.T) {
	var out bytes.Buffer
	w := NewWatcher(&out, Format{}, "Runnable", TableOptions{})
	items := runnables(t)
	if err := w.Print(items[:2]); err != nil {
		t.Fatal(err)
	}
	changed := decode(t, `{"kind": "Runnable", "metadata": {"name": "a-much-longer-name"}, "status": {"phase": "Succeeded"}}`)
	if err := w.Print([]Object{items[0], changed}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[0], "NAME   KIND   PHASE     CLUSTER") || !strings.HasPrefix(lines[3], "b             Running ") ||
		!strings.HasPrefix(lines[4], "a-much-longer-name   ") {
		t.Fatalf("watch output:\n%s", out.String())
	}
	if strings.Index(lines[3], "Running") != strings.Index(lines[0], "PHASE") {
		t.Errorf("a later row is out of its column:\n%s", out.String())
	}
}

// A runnable's describe shows the restore point and, per attempt, what it
// carried in and reported.
func TestDescribeRunnableRestorePoints(t *testing.T) {
	obj := decode(t, `{"kind": "Runnable", "metadata": {"name": "wc"}, "status": {"phase": "Running",
	  "restorePoint": {"path": "s3://cp/chk-7", "kind": "Checkpoint", "attempt": 1, "source": "S3"},
	  "attempts": [{"number": 1, "cluster": "dc1", "reported": {"jobId": "a1"}, "note": "not carried: never Healthy"},
	               {"number": 2, "cluster": "dc2", "carriedIn": {"restorePath": "s3://cp/chk-7"}}]}}`)
	var out bytes.Buffer
	if err := Describe(&out, "Runnable", obj, nil); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Restore point: s3://cp/chk-7 (Checkpoint from attempt 1, S3)", "#1 reported:   jobId=a1",
		"#1 note:       not carried: never Healthy", "#2 carried in: restorePath=s3://cp/chk-7"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("describe lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "History:") {
		t.Error("a history that could not be read is shown")
	}
}

func TestDescribeRunnableRequests(t *testing.T) {
	obj := decode(t, `{"kind": "Runnable", "metadata": {"name": "j"}, "status": {"phase": "Queued",
	  "message": "asks for cpu 40; no cluster has it free now", "requests": {"cpu": "40", "memory": "3Gi"}}}`)
	var out bytes.Buffer
	if err := Describe(&out, "Runnable", obj, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "Requests:      cpu=40,memory=3Gi") {
		t.Errorf("describe lacks the requests:\n%s", out.String())
	}
}

func TestQuotaTableAndDescribe(t *testing.T) {
	obj := decode(t, `{"kind": "Quota", "metadata": {"name": "team-a"},
	  "spec": {"limits": {"cpu": "12", "runnables": "5"}}, "status": {"used": {"cpu": "6500m", "runnables": "2"}}}`)
	var out bytes.Buffer
	if err := Table(&out, "Quota", []Object{obj}, TableOptions{WithNamespace: true}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "team-a   cpu 6500m/12, runnables 2/5") || strings.Contains(out.String(), "NAMESPACE") {
		t.Errorf("table:\n%s", out.String())
	}
	out.Reset()
	if err := Describe(&out, "Quota", obj, nil); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"RESOURCE   USED   LIMIT", "cpu        6500m  12", "runnables  2      5"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("describe lacks %q:\n%s", want, out.String())
		}
	}
	perDC := decode(t, `{"kind": "Quota", "metadata": {"name": "team-a"},
	  "spec": {"limits": {"runnables": "9"}, "perLabel": {"label": "dc", "limits": {"runnables": "3"}}},
	  "status": {"used": {"runnables": "2"}, "usedPerLabel": {"dc-2": {"runnables": "0"}, "dc-1": {"runnables": "2"}}}}`)
	out.Reset()
	if err := Describe(&out, "Quota", perDC, nil); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !regexp.MustCompile(`Limits for dc=dc-1:\n.*\n\s+runnables\s+2\s+3\nLimits for dc=dc-2:\n.*\n\s+runnables\s+0\s+3`).MatchString(s) {
		t.Errorf("describe per dc:\n%s", s)
	}
}

// Queued runnables listed with their positions get a POSITION column and
// the MESSAGE that says what they wait for.
func TestTableOfTheQueue(t *testing.T) {
	var out bytes.Buffer
	items := []Object{
		decode(t, `{"kind": "Runnable", "metadata": {"name": "second"}, "spec": {"template": {"kind": "Job"}}, "status": {"phase": "Queued", "queuePosition": 2, "message": "fits no cluster: cpu 4 asked"}}`),
		decode(t, `{"kind": "Runnable", "metadata": {"name": "first"}, "spec": {"template": {"kind": "Job"}}, "status": {"phase": "Queued", "queuePosition": 1, "message": "quota team-a: cpu 8 of 8 used"}}`),
	}
	if err := Table(&out, "Runnable", items, TableOptions{}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "NAME     KIND   PHASE    POSITION   CLUSTER") || !strings.HasSuffix(lines[0], "MESSAGE") ||
		!strings.Contains(lines[1], "Queued   2 ") || !strings.HasSuffix(lines[2], "quota team-a: cpu 8 of 8 used") {
		t.Fatalf("queue table:\n%s", out.String())
	}
}

// A runnable's describe shows its planned move: from, to, who, how far,
// the savepoint handed over and the downtime, or why it failed.
func TestDescribeRunnableMove(t *testing.T) {
	for doc, want := range map[string]string{
		`{"from": "a", "to": "b", "by": "alice", "step": "Done", "savepoint": "s3://sp/savepoint-abcdef-1", "downtimeSeconds": 1.8}`: "a to b by alice, Done, savepoint s3://sp/savepoint-abcdef-1, downtime 1.8 s",
		`{"from": "a", "to": "b", "by": "alice", "step": "Failed", "error": "the operator failed to stop the job with a savepoint"}`: "a to b by alice, Failed: the operator failed to stop the job with a savepoint",
	} {
		obj := decode(t, `{"kind": "Runnable", "metadata": {"name": "wc"}, "status": {"phase": "Running", "move": `+doc+`}}`)
		var out bytes.Buffer
		if err := Describe(&out, "Runnable", obj, nil); err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(`(?m)^Move:\s+` + regexp.QuoteMeta(want) + `$`).MatchString(out.String()) {
			t.Errorf("describe lacks the move %q:\n%s", want, out.String())
		}
	}
}
