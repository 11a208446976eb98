package v1alpha1

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
