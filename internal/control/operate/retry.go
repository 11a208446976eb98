package operate

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/platform/fields"
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

// The Job controller's words for a Job that a podFailurePolicy rule
// failed (kubernetes pkg/controller/job/pod_failure_policy.go,
// matchPodFailurePolicy): the container's exit code, or the pod's
// condition.
var (
	exitCodeMessage  = regexp.MustCompile(`failed with exit code (-?\d+) matching`)
	conditionMessage = regexp.MustCompile(`has condition (\w+) matching`)
)

// ClassifyFailure reads the class of a failure from what the inventory
// keeps of the failed object: its status (the agent's trimmed object).
// Pod-level facts (a pod's DisruptionTarget condition, a container's
// OOMKilled or exit code) are not in the inventory, which records the
// Job, not its pods; they are read from the Job's Failed condition, whose
// reason and message carry them when the Job's podFailurePolicy matched
// the pod (reason PodFailurePolicy) or the Job's deadline passed
// (DeadlineExceeded). A Job that ran out of its backoffLimit
// (BackoffLimitExceeded) failed by its pods' exits: an ExitCode failure
// without a known code. Anything else is FailureOther.
func ClassifyFailure(kind string, status map[string]any) Failure {
	f := classify(kind, status)
	f.Object = map[string]any{"kind": kind, "status": status}
	return f
}

func classify(kind string, status map[string]any) Failure {
	if kind != "Job" {
		return Failure{Class: v1alpha1.FailureOther, Reason: fields.String(status, "message")}
	}
	// The Job controller adds FailureTarget first, with the reason and
	// message the Failed condition gets once the pods are gone
	// (job_controller.go, syncJob): the Job may be judged on either.
	reason, message := "", ""
	conds, _ := status["conditions"].([]any)
	for _, want := range []string{"Failed", "FailureTarget"} {
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == want && m["status"] == "True" && reason == "" {
				reason, _ = m["reason"].(string)
				message, _ = m["message"].(string)
			}
		}
	}
	words := strings.TrimSpace(reason + ": " + message)
	switch {
	case reason == "DeadlineExceeded":
		return Failure{Class: v1alpha1.FailureDeadlineExceeded, Reason: words}
	case strings.Contains(message, "OOMKilled"):
		return Failure{Class: v1alpha1.FailureOOMKilled, Reason: words}
	case strings.Contains(message, "ImagePullBackOff") || strings.Contains(message, "ErrImagePull"):
		return Failure{Class: v1alpha1.FailureImagePull, Reason: words}
	}
	if m := exitCodeMessage.FindStringSubmatch(message); len(m) > 1 {
		if n, err := strconv.ParseInt(m[1], 10, 32); err == nil {
			code := int32(n)
			return Failure{Class: v1alpha1.FailureExitCode, Reason: words, ExitCode: &code}
		}
	}
	if m := conditionMessage.FindStringSubmatch(message); len(m) > 1 && m[1] == v1alpha1.FailureDisruption {
		return Failure{Class: v1alpha1.FailureDisruption, Reason: words}
	}
	if reason == "BackoffLimitExceeded" {
		return Failure{Class: v1alpha1.FailureExitCode, Reason: words}
	}
	return Failure{Class: v1alpha1.FailureOther, Reason: words}
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
