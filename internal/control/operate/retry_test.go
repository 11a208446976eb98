package operate_test

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/operate"
	"github.com/purser-io/purser/internal/domain/kinds"
)

func failedJob(reason, message string) map[string]any {
	return map[string]any{"conditions": []any{
		map[string]any{"type": "FailureTarget", "status": "True", "reason": reason},
		map[string]any{"type": "Failed", "status": "True", "reason": reason, "message": message},
	}}
}

func TestClassifyFailure(t *testing.T) {
	cases := []struct {
		name   string
		kind   schema.GroupKind
		status map[string]any
		class  string
		code   int32
	}{
		{"deadline", kinds.Job, failedJob("DeadlineExceeded", "Job was active longer than specified deadline"), v1alpha1.FailureDeadlineExceeded, 0},
		{"exit code by podFailurePolicy", kinds.Job, failedJob("PodFailurePolicy", "Container main for pod ns/p-1 failed with exit code 3 matching FailJob rule at index 0"), v1alpha1.FailureExitCode, 3},
		{"disruption by podFailurePolicy", kinds.Job, failedJob("PodFailurePolicy", "Pod ns/p-1 has condition DisruptionTarget matching FailJob rule at index 1"), v1alpha1.FailureDisruption, 0},
		{"another pod condition", kinds.Job, failedJob("PodFailurePolicy", "Pod ns/p-1 has condition ConfigIssue matching FailJob rule at index 0"), v1alpha1.FailureOther, 0},
		{"backoff limit", kinds.Job, failedJob("BackoffLimitExceeded", "Job has reached the specified backoff limit"), v1alpha1.FailureExitCode, 0},
		{"oom", kinds.Job, failedJob("PodFailurePolicy", "Container main for pod ns/p was OOMKilled"), v1alpha1.FailureOOMKilled, 0},
		{"a Workflow", kinds.ArgoWorkflow, map[string]any{"message": "child failed"}, v1alpha1.FailureOther, 0},
		{"no condition", kinds.Job, map[string]any{}, v1alpha1.FailureOther, 0},
		{"FailureTarget before Failed", kinds.Job, map[string]any{"conditions": []any{
			map[string]any{"type": "FailureTarget", "status": "True", "reason": "DeadlineExceeded", "message": "Job was active longer than specified deadline"},
		}}, v1alpha1.FailureDeadlineExceeded, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := operate.ClassifyFailure(c.kind, c.status)
			if f.Class != c.class {
				t.Fatalf("class %s (%s), want %s", f.Class, f.Reason, c.class)
			}
			if c.code != 0 && (f.ExitCode == nil || *f.ExitCode != c.code) {
				t.Fatalf("exit code %v, want %d", f.ExitCode, c.code)
			}
		})
	}
}

func TestDecideRetry(t *testing.T) {
	code := func(n int32) *int32 { return &n }
	spec := &v1alpha1.RetrySpec{Limit: 2, Rules: []v1alpha1.RetryRule{
		{When: v1alpha1.FailureExitCode, OnExitCodes: &v1alpha1.RetryExitCodes{Operator: "In", Values: []int32{42}}, Action: v1alpha1.RetryActionRetry},
		{When: v1alpha1.FailureDeadlineExceeded, Action: v1alpha1.RetryActionRetryElsewhere},
		{When: v1alpha1.FailureOOMKilled, Action: v1alpha1.RetryActionIgnore},
	}}
	cases := []struct {
		name   string
		spec   *v1alpha1.RetrySpec
		f      operate.Failure
		so     *v1alpha1.RetryStatus
		action v1alpha1.RetryAction
		spends bool
	}{
		{"default: a disruption is retried free", nil, operate.Failure{Class: v1alpha1.FailureDisruption}, nil, v1alpha1.RetryActionIgnore, false},
		{"default: a lost node is retried free", nil, operate.Failure{Class: v1alpha1.FailureNodeLost}, nil, v1alpha1.RetryActionIgnore, false},
		{"default: exit code 1 fails", nil, operate.Failure{Class: v1alpha1.FailureExitCode, ExitCode: code(1)}, nil, v1alpha1.RetryActionFail, false},
		{"default: a deadline fails", nil, operate.Failure{Class: v1alpha1.FailureDeadlineExceeded}, nil, v1alpha1.RetryActionFail, false},
		{"exit code In the rule", spec, operate.Failure{Class: v1alpha1.FailureExitCode, ExitCode: code(42)}, nil, v1alpha1.RetryActionRetry, true},
		{"exit code not In the rule", spec, operate.Failure{Class: v1alpha1.FailureExitCode, ExitCode: code(1)}, nil, v1alpha1.RetryActionFail, false},
		{"exit code unknown", spec, operate.Failure{Class: v1alpha1.FailureExitCode}, nil, v1alpha1.RetryActionFail, false},
		{"deadline elsewhere", spec, operate.Failure{Class: v1alpha1.FailureDeadlineExceeded}, &v1alpha1.RetryStatus{Used: 1}, v1alpha1.RetryActionRetryElsewhere, true},
		{"budget spent", spec, operate.Failure{Class: v1alpha1.FailureDeadlineExceeded}, &v1alpha1.RetryStatus{Used: 2}, v1alpha1.RetryActionFail, false},
		{"ignore spends nothing even when spent", spec, operate.Failure{Class: v1alpha1.FailureOOMKilled}, &v1alpha1.RetryStatus{Used: 2}, v1alpha1.RetryActionIgnore, false},
		{"free retries bounded", spec, operate.Failure{Class: v1alpha1.FailureOOMKilled}, &v1alpha1.RetryStatus{Free: operate.MaxFreeRetries}, v1alpha1.RetryActionFail, false},
		{"a disruption keeps its default beside rules", spec, operate.Failure{Class: v1alpha1.FailureDisruption}, nil, v1alpha1.RetryActionIgnore, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := operate.DecideRetry(c.spec, c.f, c.so)
			if v.Action != c.action || v.Spends != c.spends || v.Why == "" {
				t.Fatalf("DecideRetry = %+v, want %s (spends %v)", v, c.action, c.spends)
			}
		})
	}
}

// A rule's when may be a CEL expression over the failed object: it takes
// the failures it is true for, before the defaults; one that cannot be
// evaluated on this object takes nothing.
func TestDecideRetryByExpression(t *testing.T) {
	spec := &v1alpha1.RetrySpec{Limit: 2, Rules: []v1alpha1.RetryRule{
		{When: `object.status.conditions.exists(c, c.type == "Failed" && c.message.contains("exit code 42"))`, Action: v1alpha1.RetryActionRetryElsewhere},
		{When: `object.status.missing.field == "x"`, Action: v1alpha1.RetryActionIgnore},
	}}
	if errs := retryErrors(spec); len(errs) > 0 {
		t.Fatalf("valid rules refused: %v", errs)
	}
	wanted := operate.ClassifyFailure(kinds.Job, failedJob("PodFailurePolicy", "Container main for pod ns/p-1 failed with exit code 42 matching FailJob rule at index 0"))
	if v := operate.DecideRetry(spec, wanted, nil); v.Action != v1alpha1.RetryActionRetryElsewhere || !v.Spends {
		t.Errorf("exit code 42 by the expression: %+v", v)
	}
	other := operate.ClassifyFailure(kinds.Job, failedJob("PodFailurePolicy", "Container main for pod ns/p-1 failed with exit code 3 matching FailJob rule at index 0"))
	if v := operate.DecideRetry(spec, other, nil); v.Action != v1alpha1.RetryActionFail {
		t.Errorf("exit code 3 matched an expression about 42: %+v", v)
	}
	bad := &v1alpha1.RetrySpec{Rules: []v1alpha1.RetryRule{{When: `object.status.(`, Action: v1alpha1.RetryActionRetry}}}
	if errs := retryErrors(bad); len(errs) != 1 || errs[0].Field != "spec.retry.rules[0].when" {
		t.Errorf("an expression that does not compile: %v", errs)
	}
}

// retryErrors are the API's validation errors of a Job runnable with
// retry, about spec.retry.
func retryErrors(retry *v1alpha1.RetrySpec) []v1alpha1.FieldError {
	r := &v1alpha1.Runnable{Metadata: v1alpha1.ObjectMeta{Name: "r", Namespace: "ns"}, Spec: v1alpha1.RunnableSpec{
		Template: map[string]any{"apiVersion": "batch/v1", "kind": "Job", "spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"restartPolicy": "Never", "containers": []any{map[string]any{"name": "m", "image": "busybox"}}}}}},
		Retry: retry}}
	r.SetDefaults()
	var out []v1alpha1.FieldError
	for _, e := range v1alpha1.ValidateRunnable(r, time.Now()) {
		if strings.HasPrefix(e.Field, "spec.retry") {
			out = append(out, e)
		}
	}
	return out
}
