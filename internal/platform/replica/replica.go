// Package replica names the process among the replicas of a component: in
// the database lease of `purser controller` (internal/control/lease), in the
// syncer's stream leases, and in the agent's Kubernetes Lease and
// heartbeats. It depends on nothing of purser, so that the agent can name
// itself without linking the database code that internal/control/lease needs.
package replica

import (
	"fmt"
	"os"
)

// Identity is the default name of this process among replicas: the host
// name (the pod's name under Kubernetes) and the process id, so that two
// processes on one machine differ and an operator reading a lease can tell
// which one holds it.
func Identity() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}
