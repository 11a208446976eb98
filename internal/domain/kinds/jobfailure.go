package kinds

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/purser-io/purser/api/v1alpha1"
)

// The Job controller's words for a Job that a podFailurePolicy rule
// failed (Kubernetes' Job controller, matchPodFailurePolicy): the
// container's exit code, or the pod's condition.
var (
	exitCodeMessage  = regexp.MustCompile(`failed with exit code (-?\d+) matching`)
	conditionMessage = regexp.MustCompile(`has condition (\w+) matching`)
)

// ClassifyFailure reads a failed Job's status. Pod-level facts (a pod's
// DisruptionTarget condition, a container's OOMKilled or exit code) are
// not in the inventory, which records the Job, not its pods; they are read
// from the Job's Failed condition, whose reason and message carry them
// when the Job's podFailurePolicy matched the pod (reason
// PodFailurePolicy) or the Job's deadline passed (DeadlineExceeded). A Job
// that ran out of its backoffLimit (BackoffLimitExceeded) failed by its
// pods' exits: an ExitCode failure without a known code. Anything else is
// FailureOther.
func (jobDriver) ClassifyFailure(status map[string]any) Failure {
	// The Job controller adds FailureTarget first, with the reason and
	// message the Failed condition gets once the pods are gone
	// (its syncJob): the Job may be judged on either.
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

func (jobDriver) ClassifiesBy() string {
	return "the Failed (or FailureTarget) condition's reason and podFailurePolicy message"
}
