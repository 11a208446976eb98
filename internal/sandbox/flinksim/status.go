package flinksim

import (
	"bytes"
	"encoding/json"
	"strings"
)

// The status types mirror the operator's own classes field for field, for
// the fields purser reads (flink-kubernetes-operator-api, package
// org.apache.flink.kubernetes.operator.api.status): FlinkDeploymentStatus
// and CommonStatus, JobStatus, SavepointInfo and Savepoint, CheckpointInfo
// and Checkpoint, FlinkDeploymentReconciliationStatus.

type deploymentStatus struct {
	JobStatus                  jobStatus         `json:"jobStatus"`
	Error                      string            `json:"error,omitempty"`
	ObservedGeneration         int64             `json:"observedGeneration,omitempty"`
	LifecycleState             string            `json:"lifecycleState,omitempty"`
	ClusterInfo                map[string]string `json:"clusterInfo,omitempty"`
	JobManagerDeploymentStatus string            `json:"jobManagerDeploymentStatus"`
	ReconciliationStatus       reconStatus       `json:"reconciliationStatus"`
}

type jobStatus struct {
	JobName              string          `json:"jobName,omitempty"`
	JobID                string          `json:"jobId,omitempty"`
	State                string          `json:"state,omitempty"`
	StartTime            string          `json:"startTime,omitempty"`
	UpdateTime           string          `json:"updateTime,omitempty"`
	UpgradeSavepointPath string          `json:"upgradeSavepointPath,omitempty"`
	SavepointInfo        *savepointInfo  `json:"savepointInfo,omitempty"`
	CheckpointInfo       *checkpointInfo `json:"checkpointInfo,omitempty"`
}

type savepointInfo struct {
	LastSavepoint                  *savepoint  `json:"lastSavepoint,omitempty"`
	SavepointHistory               []savepoint `json:"savepointHistory,omitempty"`
	LastPeriodicSavepointTimestamp int64       `json:"lastPeriodicSavepointTimestamp"`
}

type savepoint struct {
	TimeStamp   int64  `json:"timeStamp"`
	Location    string `json:"location"`
	TriggerType string `json:"triggerType"`
	FormatType  string `json:"formatType"`
	// TriggerNonce is spec.job.savepointTriggerNonce for a manual one.
	TriggerNonce *int64 `json:"triggerNonce,omitempty"`
}

type checkpointInfo struct {
	LastCheckpoint                  *checkpoint `json:"lastCheckpoint,omitempty"`
	LastPeriodicCheckpointTimestamp int64       `json:"lastPeriodicCheckpointTimestamp"`
}

type checkpoint struct {
	TimeStamp   int64  `json:"timeStamp"`
	TriggerType string `json:"triggerType"`
	FormatType  string `json:"formatType"`
}

type reconStatus struct {
	ReconciliationTimestamp int64  `json:"reconciliationTimestamp"`
	LastReconciledSpec      string `json:"lastReconciledSpec,omitempty"`
	LastStableSpec          string `json:"lastStableSpec,omitempty"`
	State                   string `json:"state"`
}

// specWithMeta is lastReconciledSpec as SpecUtils.writeSpecWithMeta
// writes it.
type specWithMeta struct {
	Spec map[string]any `json:"spec"`
	Meta reconMeta      `json:"resource_metadata"`
}

type reconMeta struct {
	APIVersion      string `json:"apiVersion"`
	FirstDeployment bool   `json:"firstDeployment"`
}

// lastSpec decodes lastReconciledSpec; nil before the first deployment.
func (r *reconStatus) lastSpec() *specWithMeta {
	if r.LastReconciledSpec == "" {
		return nil
	}
	var s specWithMeta
	if json.Unmarshal([]byte(r.LastReconciledSpec), &s) != nil || s.Spec == nil {
		return nil
	}
	return &s
}

// setLastSpec is ReconciliationStatus.serializeAndSetLastReconciledSpec.
func (r *reconStatus) setLastSpec(s *specWithMeta) {
	b, _ := json.Marshal(s)
	r.LastReconciledSpec = string(b)
}

func (r *reconStatus) markStable() { r.LastStableSpec = r.LastReconciledSpec }

func (r *reconStatus) stable() bool {
	return r.LastReconciledSpec != "" && r.LastReconciledSpec == r.LastStableSpec
}

// spec is what the simulator reads of a FlinkDeployment's spec.
type spec struct {
	raw         map[string]any
	application bool
	state       string // spec.job.state, default running
	upgradeMode string // spec.job.upgradeMode, default stateless (JobSpec)
	initialSP   string // spec.job.initialSavepointPath
	spNonce     *int64 // spec.job.savepointTriggerNonce
	conf        map[string]string
}

func readSpec(raw map[string]any) spec {
	s := spec{raw: raw, conf: map[string]string{}}
	if c, ok := raw["flinkConfiguration"].(map[string]any); ok {
		for k, v := range c {
			if str, ok := v.(string); ok {
				s.conf[k] = str
			}
		}
	}
	job, ok := raw["job"].(map[string]any)
	if !ok {
		return s
	}
	s.application = true
	s.state, _ = job["state"].(string)
	if s.state == "" {
		s.state = "running"
	}
	s.upgradeMode, _ = job["upgradeMode"].(string)
	if s.upgradeMode == "" {
		s.upgradeMode = "stateless"
	}
	s.initialSP, _ = job["initialSavepointPath"].(string)
	switch n := job["savepointTriggerNonce"].(type) {
	case int64:
		s.spNonce = &n
	case float64:
		v := int64(n)
		s.spNonce = &v
	}
	return s
}

// ha reports Kubernetes or ZooKeeper HA in the configuration
// (HighAvailabilityMode.isHighAvailabilityModeActivated).
func (s spec) ha() bool {
	for _, k := range []string{"high-availability.type", "high-availability"} {
		if v := strings.ToLower(s.conf[k]); v != "" && v != "none" {
			return true
		}
	}
	return false
}

// withJobState is the spec as the operator records it after a
// reconciliation: job.state set to what the job is after it.
func (s spec) withJobState(state string) map[string]any {
	out := deepCopy(s.raw)
	if job, ok := out["job"].(map[string]any); ok {
		job["state"] = state
		job["upgradeMode"] = s.upgradeMode // the mode used, as reconcileSpecChange records it
	}
	return out
}

// upgradeDiff reports a change of the spec beyond what the operator's
// ReflectiveDiffBuilder ignores (DiffType.IGNORE): the job state, the
// snapshot trigger nonces, the upgrade mode and initialSavepointPath are
// compared on their own or not at all.
func upgradeDiff(current, last map[string]any) bool {
	return !equalJSON(normalize(current), normalize(last))
}

func normalize(spec map[string]any) map[string]any {
	out := deepCopy(spec)
	if job, ok := out["job"].(map[string]any); ok {
		for _, k := range []string{"state", "savepointTriggerNonce", "checkpointTriggerNonce", "upgradeMode", "initialSavepointPath"} {
			delete(job, k)
		}
	}
	return out
}

func deepCopy(m map[string]any) map[string]any {
	b, _ := json.Marshal(m)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	if out == nil {
		out = map[string]any{}
	}
	return out
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}
