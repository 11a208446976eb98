package health

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/purser-io/purser/api/v1alpha1"
)

// userErrorReasons are the container states that the Flink operator turns
// into a DeploymentFailedException (its CONTAINER_ERROR_REASONS, plus
// InvalidImageName and CreateContainerError, which come from the same kind
// of mistake). Each comes from the FlinkDeployment's own spec (its image,
// its entry point, its memory, a missing ConfigMap or Secret it names), so
// the next cluster would fail the same way.
var userErrorReasons = []string{
	"ErrImagePull",
	"ImagePullBackOff",
	"InvalidImageName",
	"CrashLoopBackOff",
	"CreateContainerConfigError",
	"CreateContainerError",
	"RunContainerError",
	"OOMKilled",
}

// interpretFlinkDeployment judges a flink.apache.org/v1beta1
// FlinkDeployment by the Flink Kubernetes operator's status: the job's
// state when it has one (application clusters), else the JobManager
// deployment and the resource's lifecycle (session clusters, and
// application clusters before their job exists).
//
// Healthy here means "moving it to another cluster would not help", not
// "it is doing well": a FAILED job has exhausted Flink's own restart
// strategy, and the same job would fail again elsewhere. Unhealthy means
// the Flink cluster is not there to run the job, which a failover fixes.
func interpretFlinkDeployment(obj map[string]any) Result {
	state := str(obj, "status", "jobStatus", "state")
	errMsg := flinkError(str(obj, "status", "error"))
	switch state {
	case "RUNNING":
		return healthy(PhaseRunning, "job running")
	case "FINISHED":
		return healthy(PhaseSucceeded, "job finished")
	case "FAILED":
		return healthy(PhaseFailed, withDetail("job failed", errMsg))
	case "CANCELED":
		// Canceled did not do its work, so it did not succeed; nobody
		// else will run it on, so it is final like Failed.
		return healthy(PhaseFailed, "job canceled")
	case "SUSPENDED":
		// Suspended on purpose (spec.job.state: suspended) and resumed the
		// same way: not final, so Pending, never Succeeded, which would let
		// purser settle the Runnable and remove a job meant to come back.
		return healthy(PhasePending, "job suspended")
	case "CANCELLING", "FAILING", "RESTARTING":
		// Flink moves on from these by itself within its restart strategy.
		return healthy(PhaseRunning, "job "+strings.ToLower(state))
	case "CREATED", "INITIALIZING", "RECONCILING":
		// The job is not running, and RECONCILING is also what the
		// operator writes when it has lost the JobManager.
		if r, ok := flinkUserError(obj); ok {
			return r
		}
		return unhealthy(PhasePending, withDetail("job "+strings.ToLower(state), errMsg))
	case "":
		return flinkCluster(obj, errMsg)
	}
	return unknown(fmt.Sprintf("unknown Flink job state %q", state))
}

// flinkCluster judges a FlinkDeployment with no job state: the Flink
// cluster is healthy only when the operator has found its JobManager READY
// and has marked the resource STABLE (its spec is deployed and has been
// running long enough to be the one to roll back to).
func flinkCluster(obj map[string]any, errMsg string) Result {
	jm, lifecycle := str(obj, "status", "jobManagerDeploymentStatus"), str(obj, "status", "lifecycleState")
	if jm == "READY" && lifecycle == "STABLE" {
		return healthy(PhaseRunning, "job manager ready, lifecycle STABLE")
	}
	if lifecycle == "SUSPENDED" {
		return healthy(PhasePending, "suspended")
	}
	if r, ok := flinkUserError(obj); ok {
		return r
	}
	if jm == "" && lifecycle == "" {
		// Unhealthy rather than Unknown: on a cluster without the Flink
		// operator the status stays empty forever, and that is exactly a
		// case for running the work elsewhere once tolerationSeconds pass.
		return unhealthy(PhasePending, "not yet observed by the Flink operator")
	}
	msg := fmt.Sprintf("job manager %s, lifecycle %s", orNone(jm), orNone(lifecycle))
	return unhealthy(PhasePending, withDetail(msg, errMsg))
}

// flinkUserError recognizes a status.error that the FlinkDeployment's own
// spec caused. Such an object is reported Unknown, not Unhealthy, so that
// the failover controller, which moves only Unhealthy objects, leaves it
// where its owner can see and fix it.
func flinkUserError(obj map[string]any) (Result, bool) {
	raw := str(obj, "status", "error")
	for _, reason := range userErrorReasons {
		if strings.Contains(raw, reason) {
			return Result{
				Health:    v1alpha1.HealthUnknown,
				Phase:     PhasePending,
				Message:   withDetail("user error "+reason+", failover would not help", flinkError(raw)),
				UserError: true,
			}, true
		}
	}
	return Result{}, false
}

// flinkError makes status.error readable. The operator writes it as JSON
// ({"type": "...DeploymentFailedException", "message": "...", ...}), with
// a stack trace in throwableList; the message is what a person needs.
// Anything else is shown as it is.
func flinkError(raw string) string {
	if !strings.HasPrefix(strings.TrimSpace(raw), "{") {
		return raw
	}
	var e struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	if json.Unmarshal([]byte(raw), &e) != nil || e.Message == "" {
		return raw
	}
	if i := strings.LastIndexByte(e.Type, '.'); i >= 0 {
		e.Type = e.Type[i+1:]
	}
	return withDetail(e.Type, e.Message)
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
