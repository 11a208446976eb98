package v1alpha1

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Rollout says how a new generation of a Deployable reaches its clusters:
// wave by wave, each wave waiting for the previous one to be healthy at
// that generation for MinSuccessSeconds. The names follow OCM's Placement
// rolloutStrategy (open-cluster-management-io/api, cluster/v1alpha1
// types_rolloutstrategy.go: minSuccessTime, progressDeadline,
// maxFailures) and KubeFleet's staged update runs (approvals between
// stages).
type Rollout struct {
	Waves []Wave `json:"waves"`
	// MinSuccessSeconds is how long every cluster of a wave must stay
	// healthy at the new generation before the next wave starts.
	MinSuccessSeconds int32 `json:"minSuccessSeconds,omitempty"`
	// ProgressDeadlineSeconds bounds how long a wave may take to become
	// healthy; a cluster still not healthy then counts as failed. 0: no
	// deadline.
	ProgressDeadlineSeconds int32 `json:"progressDeadlineSeconds,omitempty"`
	// MaxFailures is how many clusters may fail before the rollout stops;
	// default 0: the first failure stops it.
	MaxFailures int32 `json:"maxFailures,omitempty"`
	// OnFailure is Halt (default: keep what was applied, go no further)
	// or Rollback (return the clusters already done to the previous
	// generation).
	OnFailure OnFailure `json:"onFailure,omitempty"`
	// ApproveBetweenWaves makes each wave after the first wait for an
	// approver (POST .../approve?generation=G).
	ApproveBetweenWaves bool `json:"approveBetweenWaves,omitempty"`
	// Gates judge the objects that use the deployable on each cluster,
	// beyond its being Synced (gates.go).
	Gates []Gate `json:"gates,omitempty"`
}

// Wave is one step of a rollout: the clusters it names or selects.
// A cluster belongs to the first wave that takes it; clusters that no
// wave takes belong to the last one.
type Wave struct {
	Name            string                `json:"name"`
	ClusterSelector *metav1.LabelSelector `json:"clusterSelector,omitempty"`
	Clusters        []string              `json:"clusters,omitempty"`
	// MaxUnavailable is how many clusters of the wave (a number or a
	// percentage) may be updating, not yet healthy, at once; default all.
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
}

// OnFailure is what a failed rollout does.
type OnFailure string

// OnFailure values.
const (
	OnFailureHalt     OnFailure = "Halt"
	OnFailureRollback OnFailure = "Rollback"
)

// RolloutState is where a rollout stands.
type RolloutState string

// Rollout states.
const (
	RolloutProgressing RolloutState = "Progressing"
	RolloutPaused      RolloutState = "Paused"
	RolloutHalted      RolloutState = "Halted"
	RolloutRolledBack  RolloutState = "RolledBack"
	RolloutComplete    RolloutState = "Complete"
)

// ClusterHealth is how one cluster stands in a rollout.
type ClusterHealth string

// Cluster health values in a rollout.
const (
	// WavePrevious: the cluster is kept on the previous generation.
	WavePrevious ClusterHealth = "Previous"
	// WaveProgressing: given the new generation, not yet healthy at it.
	WaveProgressing ClusterHealth = "Progressing"
	WaveHealthy     ClusterHealth = "Healthy"
	WaveFailed      ClusterHealth = "Failed"
)

// RolloutStatus is where the rollout of one generation stands.
type RolloutStatus struct {
	Generation         int64 `json:"generation"`
	PreviousGeneration int64 `json:"previousGeneration,omitempty"`
	// Wave is the current wave's name, WaveIndex its place (0-based).
	Wave      string       `json:"wave,omitempty"`
	WaveIndex int          `json:"waveIndex"`
	State     RolloutState `json:"state"`
	// Reason is a one-word cause of the state (WaveProgressing,
	// AwaitingApproval, PausedByUser, ClusterFailed, ProgressDeadlineExceeded,
	// RollbackRequested, ...); Message says it in full, naming the cluster
	// and the object.
	Reason        string     `json:"reason,omitempty"`
	Message       string     `json:"message,omitempty"`
	Failures      int        `json:"failures,omitempty"`
	StartedAt     *time.Time `json:"startedAt,omitempty"`
	WaveStartedAt *time.Time `json:"waveStartedAt,omitempty"`
	// AwaitingApproval names the wave that waits for an approver.
	AwaitingApproval string                 `json:"awaitingApproval,omitempty"`
	Clusters         []RolloutClusterStatus `json:"clusters,omitempty"`
	// ObservedResumes is how many resumes (RolloutControl.Resumes) the
	// status took into account: each acts once.
	ObservedResumes int `json:"observedResumes,omitempty"`
	// Control is what people set on this generation's rollout.
	Control *RolloutControl `json:"control,omitempty"`
}

// RolloutControl is what people set on the rollout of one generation
// (POST .../pause, .../resume, .../rollback, .../approve?generation=):
// it applies to that generation only.
type RolloutControl struct {
	Generation int64 `json:"generation"`
	Paused     bool  `json:"paused,omitempty"`
	Rollback   bool  `json:"rollback,omitempty"`
	// Resumes counts the resumes of a halted or rolled back rollout; each
	// retries it from the wave where it stopped (from the first after a
	// rollback).
	Resumes int `json:"resumes,omitempty"`
	// Approved names the waves an approver let start.
	Approved []string `json:"approved,omitempty"`
}

// RolloutClusterStatus is one cluster in a rollout.
type RolloutClusterStatus struct {
	Cluster string `json:"cluster"`
	Wave    string `json:"wave"`
	// Generation is what the cluster should hold now (0: nothing);
	// GenerationApplied what it was last seen to hold.
	Generation        int64 `json:"generation"`
	GenerationApplied int64 `json:"generationApplied,omitempty"`
	// FallbackGeneration is what the cluster keeps until the rollout
	// gives it this generation, and returns to on a rollback: the newest
	// generation an earlier decision gave it (0: it was given none). It
	// is per cluster: a generation superseded mid-rollout stays on the
	// clusters it had reached.
	FallbackGeneration int64         `json:"fallbackGeneration,omitempty"`
	Health             ClusterHealth `json:"health"`
	Since              *time.Time    `json:"since,omitempty"`
	Message            string        `json:"message,omitempty"`
}

// Override changes the template on the clusters it selects: Patch is a
// JSON merge patch (an object, RFC 7386) or a JSON patch (a list, RFC
// 6902).
type Override struct {
	ClusterSelector *metav1.LabelSelector `json:"clusterSelector,omitempty"`
	Patch           json.RawMessage       `json:"patch"`
}

// DeployableMode says whether the syncer writes.
type DeployableMode string

// Deployable modes.
const (
	// ModeApply (the default) keeps the clusters identical to the spec.
	ModeApply DeployableMode = "Apply"
	// ModeObserve reports drift and never writes.
	ModeObserve DeployableMode = "Observe"
)

func (v *validator) rollout(path string, r *Rollout) {
	if r == nil {
		return
	}
	if len(r.Waves) == 0 {
		v.add(path+".waves", "needs at least one wave")
	}
	names := map[string]bool{}
	for i, w := range r.Waves {
		p := fmt.Sprintf("%s.waves[%d]", path, i)
		switch {
		case w.Name == "":
			v.add(p+".name", "is required")
		case names[w.Name]:
			v.add(p+".name", "%q names another wave already", w.Name)
		}
		names[w.Name] = true
		if w.ClusterSelector != nil && len(w.Clusters) > 0 {
			v.add(p, "set clusterSelector or clusters, not both")
		}
		if w.ClusterSelector != nil {
			if _, err := metav1.LabelSelectorAsSelector(w.ClusterSelector); err != nil {
				v.add(p+".clusterSelector", "%s", err.Error())
			}
		}
		if w.MaxUnavailable != nil {
			if n, err := intstr.GetScaledValueFromIntOrPercent(w.MaxUnavailable, 100, true); err != nil || n < 0 {
				v.add(p+".maxUnavailable", "must be a non-negative number or a percentage such as \"50%%\"")
			}
		}
	}
	v.gates(path+".gates", r.Gates)
	if r.MinSuccessSeconds < 0 {
		v.add(path+".minSuccessSeconds", "must not be negative")
	}
	if r.ProgressDeadlineSeconds < 0 {
		v.add(path+".progressDeadlineSeconds", "must not be negative")
	}
	if r.MaxFailures < 0 {
		v.add(path+".maxFailures", "must not be negative")
	}
	switch r.OnFailure {
	case "", OnFailureHalt, OnFailureRollback:
	default:
		v.add(path+".onFailure", "must be Halt or Rollback, not %q", r.OnFailure)
	}
}

func (v *validator) overrides(path string, os []Override, tmpl map[string]any) {
	for i, o := range os {
		p := fmt.Sprintf("%s[%d]", path, i)
		if o.ClusterSelector != nil {
			if _, err := metav1.LabelSelectorAsSelector(o.ClusterSelector); err != nil {
				v.add(p+".clusterSelector", "%s", err.Error())
			}
		}
		var patch any
		if err := json.Unmarshal(o.Patch, &patch); err != nil {
			v.add(p+".patch", "is required: a JSON merge patch (an object) or a JSON patch (a list)")
			continue
		}
		switch patch.(type) {
		case map[string]any, []any:
			// Tried on the template, so that a patch that cannot apply
			// (a JSON patch's path missing) is refused here rather than
			// on the clusters it selects.
			_, err := ApplyOverrides(tmpl, os, []int{i})
			switch {
			case errors.Is(err, ErrTooLarge), errors.Is(err, ErrIdentity):
				v.add(p+".patch", "%s", strings.TrimLeft(strings.TrimPrefix(err.Error(), p+".patch"), " :"))
			case err != nil:
				v.add(p+".patch", "does not apply to the template: %s", err.Error())
			}
		default:
			v.add(p+".patch", "must be an object (JSON merge patch) or a list (JSON patch)")
		}
	}
}

func (v *validator) mode(path string, m DeployableMode) {
	switch m {
	case "", ModeApply, ModeObserve:
	default:
		v.add(path, "must be Apply or Observe, not %q", m)
	}
}

// DescribeFallbacks says what a rollback returns clusters to, given the
// fallback generation of each: one generation when they share it, else
// each its own.
func DescribeFallbacks(gens []int64) string {
	var distinct []int64
	for _, g := range gens {
		if !slices.Contains(distinct, g) {
			distinct = append(distinct, g)
		}
	}
	slices.Sort(distinct)
	switch {
	case len(distinct) == 0:
		return "nothing (no earlier generation reached the clusters)"
	case len(distinct) > 1:
		return fmt.Sprintf("the generation each cluster held before (%s)", strings.Trim(fmt.Sprint(distinct), "[]"))
	case distinct[0] == 0:
		return "nothing (no earlier generation reached the clusters)"
	}
	return fmt.Sprintf("generation %d", distinct[0])
}
