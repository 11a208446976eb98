package operate_test

import (
	"testing"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/operate"
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
		kind   string
		status map[string]any
		class  string
		code   int32
	}{
		{"deadline", "Job", failedJob("DeadlineExceeded", "Job was active longer than specified deadline"), v1alpha1.FailureDeadlineExceeded, 0},
		{"exit code by podFailurePolicy", "Job", failedJob("PodFailurePolicy", "Container main for pod ns/p-1 failed with exit code 3 matching FailJob rule at index 0"), v1alpha1.FailureExitCode, 3},
		{"disruption by podFailurePolicy", "Job", failedJob("PodFailurePolicy", "Pod ns/p-1 has condition DisruptionTarget matching FailJob rule at index 1"), v1alpha1.FailureDisruption, 0},
		{"another pod condition", "Job", failedJob("PodFailurePolicy", "Pod ns/p-1 has condition ConfigIssue matching FailJob rule at index 0"), v1alpha1.FailureOther, 0},
		{"backoff limit", "Job", failedJob("BackoffLimitExceeded", "Job has reached the specified backoff limit"), v1alpha1.FailureExitCode, 0},
		{"oom", "Job", failedJob("PodFailurePolicy", "Container main for pod ns/p was OOMKilled"), v1alpha1.FailureOOMKilled, 0},
		{"a Workflow", "Workflow", map[string]any{"message": "child failed"}, v1alpha1.FailureOther, 0},
		{"no condition", "Job", map[string]any{}, v1alpha1.FailureOther, 0},
		{"FailureTarget before Failed", "Job", map[string]any{"conditions": []any{
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
