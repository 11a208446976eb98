package placement

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// QueueEntry is a runnable waiting for capacity, as the queue's order
// reads it.
type QueueEntry struct {
	UID       string
	Namespace string
	Priority  int32 // spec.priority, a class resolved to its value
	// Share is the namespace's dominant resource share of the farm over
	// its fair-share weight (DominantShare / weight).
	Share float64
	// Since is when the runnable was created: the queue is first come,
	// first served within a priority and a share, and the order does not
	// change when a component restarts.
	Since time.Time
}

// CompareQueue orders the queue: by priority (higher first), then,
// between namespaces, by dominant-resource fairness (the namespace further
// below its share first), then by how long each has waited. Negative when
// a goes before b.
func CompareQueue(a, b QueueEntry) int {
	if a.Priority != b.Priority {
		return cmp.Compare(b.Priority, a.Priority)
	}
	if a.Namespace != b.Namespace {
		if c := cmp.Compare(a.Share, b.Share); c != 0 {
			return c
		}
	}
	return a.Since.Compare(b.Since)
}

// Ahead says why a goes before b in the queue (CompareQueue), or "" when
// it does not.
func Ahead(a, b QueueEntry) string {
	switch {
	case CompareQueue(a, b) >= 0:
		return ""
	case a.Priority > b.Priority:
		return fmt.Sprintf("priority %d over %d", a.Priority, b.Priority)
	case a.Namespace != b.Namespace && a.Share < b.Share:
		return fmt.Sprintf("namespace %s at %.0f%% of its fair share, %s at %.0f%%", a.Namespace, 100*a.Share, b.Namespace, 100*b.Share)
	}
	return "waiting longer"
}

// PriorityValue is spec.priority's value: the integer, or the value of
// the class of that name that classes defines (0 for one it does not, or
// with no classes).
func PriorityValue(p *intstr.IntOrString, classes func(string) (int32, bool)) int32 {
	switch {
	case p == nil:
		return 0
	case p.Type == intstr.Int:
		return p.IntVal
	case classes == nil:
		return 0
	}
	v, _ := classes(p.StrVal)
	return v
}

// QueuePositions numbers the entries in the queue's order, from 1, by UID.
func QueuePositions(entries []QueueEntry) map[string]int {
	sorted := slices.Clone(entries)
	slices.SortStableFunc(sorted, CompareQueue)
	out := make(map[string]int, len(sorted))
	for i, e := range sorted {
		out[e.UID] = i + 1
	}
	return out
}
