package v1alpha1

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// RetrySpec is spec.retry: which failures of a runnable's attempt are
// retried as a new attempt, by the failure's class (docs/operating.md).
type RetrySpec struct {
	// Limit is how many retries may spend the budget (actions Retry and
	// RetryElsewhere); 0 spends none, so only Ignore retries.
	Limit int32 `json:"limit,omitempty"`
	// Backoff is the wait before each retry's attempt is placed, a Go
	// duration ("30s"); none by default.
	Backoff string `json:"backoff,omitempty"`
	// Rules are matched in order against the failure; the first that
	// matches decides. None matches: the defaults (a disruption is
	// retried without spending the budget, anything else fails).
	Rules []RetryRule `json:"rules,omitempty"`
}

// RetryRule is one rule of spec.retry.
type RetryRule struct {
	// When is the failure's class (FailureClasses), or a CEL expression
	// over the failed object as the inventory keeps it (`object.kind`,
	// `object.status`) that gives true for the failures the rule takes.
	When string `json:"when"`
	// OnExitCodes narrows When ExitCode to some exit codes, as a Job's
	// podFailurePolicy onExitCodes does.
	OnExitCodes *RetryExitCodes `json:"onExitCodes,omitempty"`
	Action      RetryAction     `json:"action"`
}

// RetryExitCodes matches a non-zero exit code In or NotIn the values.
type RetryExitCodes struct {
	Operator string  `json:"operator"`
	Values   []int32 `json:"values"`
}

// RetryAction is what a rule does with a failure.
type RetryAction string

// Retry actions.
const (
	// RetryActionRetry: a new attempt, on any cluster placement allows
	// (the same one included); spends the budget.
	RetryActionRetry RetryAction = "Retry"
	// RetryActionRetryElsewhere: a new attempt on another cluster;
	// spends the budget.
	RetryActionRetryElsewhere RetryAction = "RetryElsewhere"
	// RetryActionFail: the runnable fails.
	RetryActionFail RetryAction = "Fail"
	// RetryActionIgnore: a new attempt, without spending the budget.
	RetryActionIgnore RetryAction = "Ignore"
)

// Failure classes, named as Kubernetes names the causes.
const (
	// FailureDisruption: a pod with a DisruptionTarget condition
	// (preemption, eviction, taint manager, kubelet shutdown).
	FailureDisruption = "DisruptionTarget"
	// FailureNodeLost: the pod's node went away.
	FailureNodeLost         = "NodeLost"
	FailureOOMKilled        = "OOMKilled"
	FailureDeadlineExceeded = "DeadlineExceeded"
	FailureImagePull        = "ImagePullBackOff"
	// FailureExitCode: a container exited non-zero (a bug, by default).
	FailureExitCode = "ExitCode"
	// FailureOther: any other failure.
	FailureOther = "Failed"
)

// FailureClasses are the classes spec.retry.rules[].when may name.
var FailureClasses = []string{FailureDisruption, FailureNodeLost, FailureOOMKilled, FailureDeadlineExceeded,
	FailureImagePull, FailureExitCode, FailureOther}

// RetryStatus is status.retries: the budget and the last decision.
type RetryStatus struct {
	// Used is how many retries spent the budget; Limit is spec.retry's.
	Used  int32 `json:"used"`
	Limit int32 `json:"limit"`
	// Free is how many retries did not spend it (Ignore).
	Free int32 `json:"free,omitempty"`
	// NotBefore is when the retry's attempt may be placed (spec.retry
	// .backoff).
	NotBefore *time.Time `json:"notBefore,omitempty"`
	// Last is the last failure judged and what was done with it.
	Last *RetryDecision `json:"last,omitempty"`
}

// RetryDecision is one failure and what spec.retry did with it.
type RetryDecision struct {
	Attempt  int         `json:"attempt"`
	Class    string      `json:"class"`
	Reason   string      `json:"reason,omitempty"`
	ExitCode *int32      `json:"exitCode,omitempty"`
	Action   RetryAction `json:"action"`
	// Why says which rule (or default, or the spent budget) decided.
	Why string `json:"why"`
}

func (v *validator) retry(path string, r *RetrySpec) {
	if r == nil {
		return
	}
	if r.Limit < 0 || r.Limit > 100 {
		v.add(path+".limit", "must be between 0 and 100")
	}
	if r.Backoff != "" {
		if d, err := time.ParseDuration(r.Backoff); err != nil || d < 0 || d > 24*time.Hour {
			v.add(path+".backoff", "must be a duration between 0s and 24h, such as 30s")
		}
	}
	actions := []RetryAction{RetryActionRetry, RetryActionRetryElsewhere, RetryActionFail, RetryActionIgnore}
	for i, rule := range r.Rules {
		p := fmt.Sprintf("%s.rules[%d]", path, i)
		switch {
		case rule.When == "":
			v.add(p+".when", "must be one of %s, or a CEL expression over the failed object", strings.Join(FailureClasses, ", "))
		case !slices.Contains(FailureClasses, rule.When):
			if _, err := CompileGate(rule.When); err != nil {
				v.add(p+".when", "is neither one of %s nor a CEL expression over the failed object (object.kind, object.status): %v",
					strings.Join(FailureClasses, ", "), err)
			}
		}
		if !slices.Contains(actions, rule.Action) {
			v.add(p+".action", "must be one of Retry, RetryElsewhere, Fail, Ignore")
		}
		if c := rule.OnExitCodes; c != nil {
			if rule.When != FailureExitCode {
				v.add(p+".onExitCodes", "applies only to when: ExitCode")
			}
			if c.Operator != "In" && c.Operator != "NotIn" {
				v.add(p+".onExitCodes.operator", "must be In or NotIn")
			}
			if len(c.Values) == 0 || slices.Contains(c.Values, 0) {
				v.add(p+".onExitCodes.values", "must list exit codes, none of them 0 (an exit code 0 is not a failure)")
			}
		}
	}
}
