package v1alpha1

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// The verdicts of a drill's what-if (POST /api/v1/drills).
const (
	// DrillAbsorbed: every runnable of the lost clusters finds a cluster.
	DrillAbsorbed = "Absorbed"
	// DrillPartial: some are left queued, each only for capacity or quota to
	// free; none needs what was lost.
	DrillPartial = "Partial"
	// DrillNotAbsorbed: some runnable has no cluster left that could ever take
	// it (a placement rule, a taint, a dependency, the kind not served,
	// or bigger than any remaining cluster's whole allocatable).
	DrillNotAbsorbed = "NotAbsorbed"
)

// What a drill takes away.
const (
	DrillTargetDC       = "dc"
	DrillTargetCluster  = "cluster"
	DrillTargetSelector = "selector"
)

// DrillTarget is what is taken away.
type DrillTarget struct {
	// Kind is dc, cluster or selector.
	Kind string `json:"kind"`
	// Name is the DC (the value of the zone label) or the cluster; for a
	// selector, the label selector in kubectl's form.
	Name string `json:"name"`
}

func (t DrillTarget) String() string { return t.Kind + " " + t.Name }

// DrillMove is one runnable's move.
type DrillMove struct {
	Runnable string `json:"runnable"`
	From     string `json:"from"`
	To       string `json:"to"`
	// DowntimeSeconds is how long it is expected to be down: until its
	// turn at the eviction rate comes and it is placed.
	DowntimeSeconds float64 `json:"downtimeSeconds"`
	// RestorePoint is what a Flink job restarts from, when one is
	// recorded; nil otherwise.
	RestorePoint *RestorePoint `json:"restorePoint,omitempty"`
	// Reason is the placement's decision in words.
	Reason string `json:"reason,omitempty"`
}

// DrillUnplaceable is a runnable the farm would not take.
type DrillUnplaceable struct {
	Runnable string `json:"runnable"`
	Reason   string `json:"reason"`
	// Never: no cluster left could ever take it (see DrillNotAbsorbed).
	Never bool `json:"never,omitempty"`
}

// DrillFigure is a cluster's load: its active runnables and, when its agent
// reports, what it has free (less what is in flight) and allocatable.
type DrillFigure struct {
	Runnables   int               `json:"runnables"`
	Free        map[string]string `json:"free,omitempty"`
	Allocatable map[string]string `json:"allocatable,omitempty"`
}

// DrillClusterChange is one cluster before and after; After is nil for a
// cluster the target takes away.
type DrillClusterChange struct {
	Name   string       `json:"name"`
	Lost   bool         `json:"lost,omitempty"`
	Before DrillFigure  `json:"before"`
	After  *DrillFigure `json:"after"`
}

// DrillReport is the what-if's answer.
type DrillReport struct {
	Target      DrillTarget          `json:"target"`
	Verdict     string               `json:"verdict"`
	Moves       []DrillMove          `json:"moves"`
	Unplaceable []DrillUnplaceable   `json:"unplaceable"`
	Clusters    []DrillClusterChange `json:"clusters"`
	// DurationSeconds is the time until the last move is placed.
	DurationSeconds float64 `json:"durationSeconds"`
	// Short sums what the unplaceable ask for; nil when none is.
	Short *DrillShort `json:"short,omitempty"`
	// Message says the verdict in one sentence.
	Message string `json:"message"`
}

// DrillShort is what the farm lacks to absorb the target.
type DrillShort struct {
	Runnables int               `json:"runnables"`
	Requests  map[string]string `json:"requests,omitempty"`
}

// KindDrill is a real drill's kind in the API.
const KindDrill = "Drill"

// States of a real drill.
const (
	// DrillRunning: its moves (or, after an end with moveBack, its moves
	// back) are under way.
	DrillRunning = "Running"
	// DrillEnded: every move finished or failed.
	DrillEnded = "Ended"
	// DrillFailed: every move planned failed or was refused; nothing
	// moved.
	DrillFailed = "Failed"
)

// DrillNotMoved is the step of a runnable the drill did not move: the
// what-if left it unplaceable, or its planned move was refused when
// asked (Error says why). It stays where it is, on a cordoned cluster.
const DrillNotMoved = "NotMoved"

// Drill is a real drill (POST /api/v1/drills without dryRun): the
// target's clusters cordoned and their work moved by planned moves, with
// its report of planned against actual. metadata.name is its id.
type Drill struct {
	Kind     string      `json:"kind"`
	Metadata ObjectMeta  `json:"metadata"`
	Spec     DrillSpec   `json:"spec"`
	Status   DrillStatus `json:"status"`
}

// DrillSpec is what was asked.
type DrillSpec struct {
	Target DrillTarget `json:"target"`
	// Force: started although the what-if's verdict was not Absorbed.
	Force bool `json:"force,omitempty"`
}

// DrillStatus is the drill's report.
type DrillStatus struct {
	State     string     `json:"state"`
	StartedBy string     `json:"startedBy"`
	StartedAt time.Time  `json:"startedAt"`
	EndedAt   *time.Time `json:"endedAt,omitempty"`
	// Planned is the what-if's report at start.
	Planned *DrillReport `json:"planned"`
	// Runnables is, per runnable of the planned report (moves in their
	// order, then the unplaceable), planned against actual.
	Runnables []DrillOutcome `json:"runnables"`
	Totals    DrillTotals    `json:"totals"`
	// DurationSeconds is from the start to the last move finished (to
	// now while Running); PlannedDurationSeconds is the what-if's.
	DurationSeconds        float64 `json:"durationSeconds"`
	PlannedDurationSeconds float64 `json:"plannedDurationSeconds"`
	// Cordoned is the clusters the drill cordoned (a cluster cordoned
	// before is not listed, and its end leaves it cordoned).
	Cordoned []string `json:"cordoned"`
	// End is set once the drill was ended (POST .../end).
	End     *DrillEnd `json:"end,omitempty"`
	Message string    `json:"message"`
}

// DrillOutcome is one runnable's part in a drill.
type DrillOutcome struct {
	Runnable string `json:"runnable"`
	From     string `json:"from"`
	// PlannedTo is the what-if's target; "" when it was unplaceable
	// (PlannedReason says why).
	PlannedTo              string        `json:"plannedTo,omitempty"`
	PlannedReason          string        `json:"plannedReason,omitempty"`
	PlannedDowntimeSeconds float64       `json:"plannedDowntimeSeconds"`
	PlannedRestorePoint    *RestorePoint `json:"plannedRestorePoint,omitempty"`
	// To is where it went (or goes): its planned move's target.
	To string `json:"to,omitempty"`
	// Step is its planned move's step (Move* steps), or DrillNotMoved.
	Step    string     `json:"step"`
	AskedAt *time.Time `json:"askedAt,omitempty"`
	// DowntimeSeconds is the downtime observed: from the stop on From to
	// the copy first seen running on To.
	DowntimeSeconds *float64 `json:"downtimeSeconds,omitempty"`
	// RestorePoint is the savepoint the copy on To restored from.
	RestorePoint string `json:"restorePoint,omitempty"`
	// Error says why it was not moved, or why its move failed.
	Error string `json:"error,omitempty"`
	// Back is its move back, asked by the drill's end with moveBack.
	Back *DrillMoveBack `json:"back,omitempty"`
}

// Settled reports whether nothing of o is under way any more.
func (o *DrillOutcome) Settled() bool {
	done := func(step string) bool { return step == MoveDone || step == MoveFailed || step == DrillNotMoved }
	return done(o.Step) && (o.Back == nil || done(o.Back.Step))
}

// DrillMoveBack is a runnable's move back to where the drill took it
// from.
type DrillMoveBack struct {
	To              string     `json:"to"`
	Step            string     `json:"step"`
	AskedAt         *time.Time `json:"askedAt,omitempty"`
	DowntimeSeconds *float64   `json:"downtimeSeconds,omitempty"`
	Error           string     `json:"error,omitempty"`
}

// DrillTotals counts the outcomes.
type DrillTotals struct {
	// Planned moves, and the runnables the what-if left unplaceable.
	Planned     int `json:"planned"`
	Unplaceable int `json:"unplaceable"`
	// Moved (Done), Failed (a move failed or was refused), Moving (under
	// way); MovedBack and FailedBack the same of the moves back.
	Moved      int `json:"moved"`
	Failed     int `json:"failed"`
	Moving     int `json:"moving"`
	MovedBack  int `json:"movedBack,omitempty"`
	FailedBack int `json:"failedBack,omitempty"`
	// AsPlanned counts the runnables whose actual target is the planned
	// one (and, for the unplaceable, that stayed).
	AsPlanned int `json:"asPlanned"`
}

// DrillEnd is how the drill was ended.
type DrillEnd struct {
	By         string    `json:"by"`
	At         time.Time `json:"at"`
	MoveBack   bool      `json:"moveBack,omitempty"`
	Uncordoned []string  `json:"uncordoned"`
}

// DrillRequest is the body of POST /api/v1/drills.
type DrillRequest struct {
	Target DrillTarget `json:"target"`
	// DryRun asks for the what-if only; ?dryRun=All says the same.
	DryRun bool `json:"dryRun,omitempty"`
	// Force starts a real drill although the what-if's verdict is not
	// Absorbed: what has no room stays where it is.
	Force bool `json:"force,omitempty"`
}

// DrillEndRequest is the body of POST /api/v1/drills/{id}/end.
type DrillEndRequest struct {
	// MoveBack asks each runnable the drill moved to go back to where it
	// was, by a planned move.
	MoveBack bool `json:"moveBack,omitempty"`
}

// Cordon sets purser's maintenance taint (TaintCordon) in taints to
// effect, or removes it when effect is "", reporting whether that
// changed anything: what purser cordon, uncordon and drain, the console's
// buttons and a drill write.
func Cordon(taints []corev1.Taint, effect corev1.TaintEffect) ([]corev1.Taint, bool) {
	var mine []corev1.Taint
	for _, t := range taints {
		if t.Key == TaintCordon {
			mine = append(mine, t)
		}
	}
	if (effect == "" && len(mine) == 0) || (len(mine) == 1 && mine[0].Effect == effect && mine[0].Value == "") {
		return taints, false
	}
	out := slices.DeleteFunc(slices.Clone(taints), func(t corev1.Taint) bool { return t.Key == TaintCordon })
	if effect != "" {
		out = append(out, corev1.Taint{Key: TaintCordon, Effect: effect})
	}
	return out, true
}
