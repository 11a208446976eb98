package operate

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/kinds"
)

// Failure is what purser can tell of why an attempt's object failed.
type Failure struct {
	Class  string // one of v1alpha1.FailureClasses
	Reason string // the object's own words
	// ExitCode is the container's exit code, when the object names it.
	ExitCode *int32
	// Object is the failed object as the inventory keeps it (its kind
	// and status), what a rule's CEL `when` reads as `object`.
	Object map[string]any
}

// ClassifyFailure reads the class of a failure of an object of kind gk
// from what the inventory keeps of it: its status (the agent's trimmed
// object), as the kind's driver reads it (kinds.FailureClassifier: a
// Job's Failed condition); anything else is FailureOther.
func ClassifyFailure(gk schema.GroupKind, status map[string]any) Failure {
	c := kinds.Default().ClassifyFailure(gk, status)
	return Failure{Class: c.Class, Reason: c.Reason, ExitCode: c.ExitCode,
		Object: map[string]any{"kind": gk.Kind, "status": status}}
}

// RetryVerdict is what spec.retry does with a failure.
type RetryVerdict struct {
	Action v1alpha1.RetryAction
	// Spends: the retry counts against spec.retry.limit.
	Spends bool
	Why    string
}

// Retries reports whether the verdict makes a new attempt.
func (v RetryVerdict) Retries() bool { return v.Action != v1alpha1.RetryActionFail }

// MaxFreeRetries bounds the retries that spend no budget, so that a
// failure misjudged as a disruption cannot retry forever.
const MaxFreeRetries = 20

// DecideRetry applies spec (nil: the defaults only) to failure f, given
// the retries so far: the first rule that matches decides; without one, a
// disruption or a lost node is retried without spending the budget, and
// anything else fails (a non-zero exit is a bug, which a retry repeats).
// A retry that would spend a spent budget fails instead.
func DecideRetry(spec *v1alpha1.RetrySpec, f Failure, so *v1alpha1.RetryStatus) RetryVerdict {
	var used, free, limit int32
	if so != nil {
		used, free = so.Used, so.Free
	}
	v := RetryVerdict{Action: v1alpha1.RetryActionFail, Why: "default: a " + f.Class + " failure is not retried"}
	if f.Class == v1alpha1.FailureDisruption || f.Class == v1alpha1.FailureNodeLost {
		v = RetryVerdict{Action: v1alpha1.RetryActionIgnore, Why: "default: a disruption is retried without spending the budget"}
	}
	if spec != nil {
		limit = spec.Limit
		for i, r := range spec.Rules {
			if ruleMatches(r, f) {
				v = RetryVerdict{Action: r.Action, Why: fmt.Sprintf("spec.retry.rules[%d] (when %s): %s", i, r.When, r.Action)}
				break
			}
		}
	}
	switch v.Action {
	case v1alpha1.RetryActionRetry, v1alpha1.RetryActionRetryElsewhere:
		v.Spends = true
		if used >= limit {
			return RetryVerdict{Action: v1alpha1.RetryActionFail, Why: fmt.Sprintf("%s, but the retry budget is spent (%d of %d)", v.Why, used, limit)}
		}
	case v1alpha1.RetryActionIgnore:
		if free >= MaxFreeRetries {
			return RetryVerdict{Action: v1alpha1.RetryActionFail, Why: fmt.Sprintf("%s, but it was retried %d times without spending the budget already", v.Why, free)}
		}
	}
	return v
}

// ruleMatches says whether a rule takes failure f: its class (and exit
// codes), or its CEL expression true over the failed object. An
// expression that does not compile or fails to evaluate (a field it needs
// is missing) takes nothing.
func ruleMatches(r v1alpha1.RetryRule, f Failure) bool {
	if slices.Contains(v1alpha1.FailureClasses, r.When) {
		return r.When == f.Class && exitCodesMatch(r.OnExitCodes, f.ExitCode)
	}
	prg, err := v1alpha1.CompileGate(r.When)
	if err != nil {
		return false
	}
	obj := f.Object
	if obj == nil {
		obj = map[string]any{}
	}
	val, _, err := prg.Eval(map[string]any{v1alpha1.GateVariable: obj})
	if err != nil {
		return false
	}
	b, ok := val.Value().(bool)
	return ok && b
}

// exitCodesMatch follows a Job's podFailurePolicy onExitCodes (kubernetes
// pkg/controller/job/pod_failure_policy.go, getMatchingContainerFromList
// and isOnExitCodesOperatorMatching): no requirement matches any failure
// of the class; a requirement needs a known, non-zero exit code, In or
// NotIn the values.
func exitCodesMatch(req *v1alpha1.RetryExitCodes, code *int32) bool {
	if req == nil {
		return true
	}
	if code == nil || *code == 0 {
		return false
	}
	in := false
	for _, v := range req.Values {
		if v == *code {
			in = true
		}
	}
	switch req.Operator {
	case "In":
		return in
	case "NotIn":
		return !in
	}
	return false
}
