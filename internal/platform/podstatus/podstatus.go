// Package podstatus says what kubectl prints of a Pod, for the farm's
// Kubernetes API (its Table) and the command line (describe) alike.
package podstatus

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// Summary follows kubectl's printPod (k8s.io/kubernetes,
// pkg/printers/internalversion) for the regular containers: READY counts
// the ready running containers, STATUS is the pod's reason or phase
// overridden by a container's waiting or terminated reason, RESTARTS sums
// the restart counts.
func Summary(p *corev1.Pod) (ready, status string, restarts int64) {
	reason := string(p.Status.Phase)
	if p.Status.Reason != "" {
		reason = p.Status.Reason
	}
	readyN := 0
	hasRunning := false
	for i := len(p.Status.ContainerStatuses) - 1; i >= 0; i-- {
		c := p.Status.ContainerStatuses[i]
		restarts += int64(c.RestartCount)
		switch {
		case c.State.Waiting != nil && c.State.Waiting.Reason != "":
			reason = c.State.Waiting.Reason
		case c.State.Terminated != nil && c.State.Terminated.Reason != "":
			reason = c.State.Terminated.Reason
		case c.State.Terminated != nil && c.State.Terminated.Signal != 0:
			reason = fmt.Sprintf("Signal:%d", c.State.Terminated.Signal)
		case c.State.Terminated != nil:
			reason = fmt.Sprintf("ExitCode:%d", c.State.Terminated.ExitCode)
		case c.Ready && c.State.Running != nil:
			hasRunning = true
			readyN++
		}
	}
	if reason == "Completed" && hasRunning {
		reason = "Running"
	}
	if p.DeletionTimestamp != nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
		reason = "Terminating"
	}
	return fmt.Sprintf("%d/%d", readyN, len(p.Spec.Containers)), reason, restarts
}
