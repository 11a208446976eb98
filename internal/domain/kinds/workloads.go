package kinds

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/purser-io/purser/internal/platform/fields"
)

// counted says how many pods of its one template a workload runs at once.
type counted struct {
	what  string // for Demand's words
	by    string // for docs/kinds.md
	count func(obj map[string]any) int64
}

// countedDriver is a workload of one pod template whose pods placement
// counts.
type countedDriver struct {
	podDriver
	counted
}

// Demand is count pods of the template's spec. The spec is read as the
// API server reads JSON (unknown fields dropped), so that a template the
// cluster takes is weighed rather than refused.
func (d countedDriver) Demand(obj map[string]any) (Demand, error) {
	path := append(slices.Clone(d.path), "spec")
	v, ok := fields.Get(obj, path...)
	if !ok {
		return Demand{}, nil
	}
	var spec corev1.PodSpec
	b, err := json.Marshal(v)
	if err == nil {
		err = json.Unmarshal(b, &spec)
	}
	if err != nil {
		return Demand{}, fmt.Errorf("spec.template.%s does not decode as a pod spec: %w", strings.Join(path, "."), err)
	}
	return Demand{Groups: []PodGroup{{What: d.what, Count: d.count(obj), Spec: spec}}}, nil
}

func (d countedDriver) DemandBy() string { return d.by }

// jobPods is how many pods a Job runs at once (its JobSpec at path):
// spec.parallelism, 1 by default, at most spec.completions when set.
func jobPods(obj map[string]any, path ...string) int64 {
	n, ok := fields.Int(obj, append(slices.Clone(path), "parallelism")...)
	if !ok {
		n = 1
	}
	if c, ok := fields.Int(obj, append(slices.Clone(path), "completions")...); ok && c < n {
		n = c
	}
	return max(n, 0)
}

// jobDriver is batch/v1 Job's: a workload that suspends by its own field.
type jobDriver struct{ countedDriver }

// SuspendSpec sets spec.suspend: the Job controller deletes the active
// pods and sets the Suspended condition, and creates pods again once it
// is false (Kubernetes' Job controller, syncJob); the Job and its
// history stay.
func (jobDriver) SuspendSpec(_ map[string]any, suspend bool) (map[string]any, error) {
	return map[string]any{"suspend": suspend}, nil
}

func (jobDriver) SuspendsBy() string { return "spec.suspend" }

// Fence suspends the Job (its pods are deleted, the Job and its history
// stay); nothing when it is suspended already.
func (jobDriver) Fence(obj map[string]any) (map[string]any, bool) {
	if fields.Bool(obj, "spec", "suspend") {
		return nil, false
	}
	return map[string]any{"suspend": true}, false
}

// Unfence gives the Job back the suspend of its template, so that a Job
// written suspended stays so.
func (jobDriver) Unfence(template map[string]any) map[string]any {
	return map[string]any{"suspend": fields.Bool(template, "spec", "suspend")}
}

func (jobDriver) FencesBy() string { return "spec.suspend true, the template's spec.suspend on return" }

// InPlace: no. A Job's pod template is immutable once created (the API
// server's validation of a Job update, ValidateJobSpecUpdate, refuses a
// change of spec.template unless the Job is suspended and never started).
func (jobDriver) InPlace(_, _ map[string]any) error {
	return errors.New("a Job's pod template is immutable on its cluster: the change cannot reach the running Job")
}

func (jobDriver) UpgradeMode(map[string]any) string { return "" }

func (jobDriver) InPlaceBy() string { return "no: its pod template is immutable" }

// PodSelector: the Job controller labels each pod it makes with the Job's
// uid (batch.kubernetes.io/controller-uid, Kubernetes' JobControllerUidLabel).
func (jobDriver) PodSelector(uid string) string {
	return "batch.kubernetes.io/controller-uid=" + uid
}
