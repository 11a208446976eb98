// Package sandbox runs real Kubernetes control planes on this machine for
// purser's tests and its demo: per cluster an etcd, a kube-apiserver, a
// kube-controller-manager, a kube-scheduler and kwok (simulated nodes whose
// pods run and complete), and the Argo Workflows controller when asked.
//
// The binaries are built once from the pinned Go modules under tools/, whose
// pins are embedded in purser, into a cache directory with one folder per
// module keyed by its pins (see Ensure). Every process is
// started in its own process group, dies with the process that started it,
// and is stopped dependents first: kwok and the controllers, then the
// kube-apiserver, then etcd.
//
// Faults are real: a kube-apiserver can be stopped and started again with
// its data, a cluster can be wiped and rebuilt empty behind the same
// endpoint, and a Proxy in front of an endpoint can be cut and restored.
package sandbox
