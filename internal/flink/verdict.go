package flink

import "github.com/purser-io/purser/api/v1alpha1"

// Phases of a FlinkDeployment on its cluster, the same words the health
// package gives every kind: Unobserved until the operator has written any
// status, then Pending, Running, Succeeded or Failed.
const (
	PhaseUnobserved = v1alpha1.ObjectUnobserved
	PhasePending    = "Pending"
	PhaseRunning    = string(v1alpha1.PhaseRunning)
	PhaseSucceeded  = string(v1alpha1.PhaseSucceeded)
	PhaseFailed     = string(v1alpha1.PhaseFailed)
)

// Verdict is the judgement of one FlinkDeployment, with the fields and
// meaning of the health package's Result, which converts from it.
type Verdict struct {
	// Health is Unhealthy only when moving the job to another cluster
	// would help (see JudgeDeployment).
	Health  v1alpha1.Health
	Phase   string
	Message string
	// UserError says that the FlinkDeployment's own spec is at fault (a
	// wrong image, a crashing entry point): Health is then Unknown, so
	// that nothing that fails over on Unhealthy moves it.
	UserError bool
}

func unknown(msg string) Verdict {
	return Verdict{Health: v1alpha1.HealthUnknown, Phase: PhasePending, Message: msg}
}

func healthy(phase, msg string) Verdict {
	return Verdict{Health: v1alpha1.HealthHealthy, Phase: phase, Message: msg}
}

func unhealthy(phase, msg string) Verdict {
	return Verdict{Health: v1alpha1.HealthUnhealthy, Phase: phase, Message: msg}
}

// withDetail joins a message and what explains it.
func withDetail(msg, detail string) string {
	if detail == "" {
		return msg
	}
	if msg == "" {
		return detail
	}
	return msg + ": " + detail
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
