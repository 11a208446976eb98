// Package resourceversion orders Kubernetes resourceVersions, the rule
// both the agent's snapshots and the inventory's writes and zombie
// reconciliation follow: the hub's store keeps the newest state of an
// object, and the ingester collapses a batch of events to it.
//
// Kubernetes documents the resourceVersions of etcd-backed objects as
// comparable positive decimal integers ("0" is the special value of lists
// and watches, never an object's), and apimachinery's resourceversion
// package is that rule; this package adds only what the inventory needs
// beside it: two versions that are the same string are the same version,
// whatever they look like.
package resourceversion

import (
	kuberv "k8s.io/apimachinery/pkg/util/resourceversion"
)

// Compare orders two resourceVersions: -1, 0 or 1 as a is older than,
// the same as, or newer than b. ok is false when either is not a
// well-formed version (a non-etcd apiserver's) and the strings differ:
// then nothing is known about their order.
func Compare(a, b string) (cmp int, ok bool) {
	c, err := kuberv.CompareResourceVersion(a, b)
	if err != nil {
		return 0, a == b
	}
	return c, true
}
