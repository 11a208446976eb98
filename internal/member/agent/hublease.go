package agent

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"

	"github.com/purser-io/purser/internal/hub/stream"
)

// The agent's lease toward the hub travels on two paths: the heartbeats
// it writes to the stream, acknowledged by NATS, and the hub's Lease in
// this cluster (purser-system/purser-hub), which every controller replica
// renews through this cluster's API server while it reaches it
// (internal/member/clusters, hublease.go). The agent reads that Lease
// every heartbeat interval and counts a renewal when its resourceVersion
// changes, at the time of its own read by its monotonic clock: the
// Lease's renewTime is another machine's wall clock and is never
// compared with this one's. The lease holds while either path was alive
// within LeaseDuration (leaseLeft), so a stream outage fences nothing,
// and a cluster truly cut off from the hub, which sees neither, still
// fences. The control plane counts its own wait from the later of the
// last heartbeat and the latest time its last renewal could land, plus
// a margin that covers this read's period.

// Where the hub renews its lease: in the agent's namespace, under this
// name (the hub's clusters.HubLeaseName).
const hubLeaseName = "purser-hub"

// namespace is where the agent's Lease and the hub's live.
func (l LeaderElection) namespace() string {
	if l.Namespace == "" {
		return DefaultLeaderElectionNamespace
	}
	return l.Namespace
}

// hubLeaseClient reads the hub's Lease in namespace, each request bounded
// by timeout so that a read never holds back the heartbeat after it.
func hubLeaseClient(rc *rest.Config, namespace string, timeout time.Duration) (coordinationv1client.LeaseInterface, error) {
	rc = rest.CopyConfig(rc)
	rc.Timeout = timeout
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	return cs.CoordinationV1().Leases(namespace), nil
}

// hubLeaseState is what the agent knows of the hub's Lease in one term.
type hubLeaseState struct {
	// known: a read answered (the Lease, or that there is none); rv is
	// then its resourceVersion ("" when there was none).
	known bool
	rv    string
	// seen is when a read first found the Lease changed, taken before
	// the read was sent (monotonic); zero when none did in this term.
	seen time.Time
	err  string
}

// readHubLease reads the hub's Lease once and, when it changed since the
// last read, counts a renewal from the moment the read was sent: the
// earliest it can have been seen, so never later than the control plane
// counts it. The first answer of a term only sets what to compare with:
// a Lease last renewed before the term proves nothing about the hub now.
func (a *Agent) readHubLease(ctx context.Context) {
	sent := time.Now()
	l, err := a.hubLeases.Get(ctx, hubLeaseName, metav1.GetOptions{})
	rv := ""
	switch {
	case err == nil:
		rv = l.ResourceVersion
	case apierrors.IsNotFound(err):
		// Not renewed yet (or never, by a hub that predates it): its
		// creation counts as the first renewal.
		err = nil
	}
	msg := ""
	switch {
	case err != nil:
		msg = err.Error()
	case rv == "":
		msg = "the Lease " + a.cfg.LeaderElection.namespace() + "/" + hubLeaseName + " does not exist (yet)"
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if msg != a.hubLease.err && msg != "" && err != nil {
		// Once per change: a refusal (RBAC) or an outage; the lease then
		// rests on the stream alone.
		a.log.Warn("reading the hub's Lease failed; the agent's lease rests on its heartbeats alone",
			"lease", a.cfg.LeaderElection.namespace()+"/"+hubLeaseName, "error", msg)
	}
	a.hubLease.err = msg
	if err != nil {
		return
	}
	if a.hubLease.known && rv != a.hubLease.rv && sent.After(a.hubLease.seen) {
		a.hubLease.seen = sent
	}
	a.hubLease.known, a.hubLease.rv = true, rv
}

// hubLeaseReport is what the next heartbeat says of the hub's Lease.
func (a *Agent) hubLeaseReport() *stream.HubLeaseSeen {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.hubLease.known && a.hubLease.err == "" {
		return nil
	}
	r := &stream.HubLeaseSeen{Error: a.hubLease.err}
	if !a.hubLease.seen.IsZero() {
		ago := time.Since(a.hubLease.seen)
		secs := ago.Seconds()
		r.SecondsSinceRenewal = &secs
		r.Renewing = ago < a.cfg.LeaseDuration
	}
	return r
}

// logPaths logs which of the lease's paths are alive when that changes:
// one line when the stream stops acknowledging heartbeats while the hub
// still renews (the stream is out; nothing is fenced), and when paths
// come back.
func (a *Agent) logPaths() {
	// A path is alive when it renewed within two beats.
	recent := 2*a.cfg.HeartbeatInterval + a.heartbeatTimeout()
	a.mu.Lock()
	beats := time.Since(a.lastBeat) < recent
	hub := !a.hubLease.seen.IsZero() && time.Since(a.hubLease.seen) < recent
	a.mu.Unlock()
	paths := "none"
	switch {
	case beats && hub:
		paths = "stream and hub lease"
	case beats:
		paths = "stream"
	case hub:
		paths = "hub lease"
	}
	if paths == a.paths {
		return
	}
	prev := a.paths
	a.paths = paths
	if prev == "" {
		return // the term's first beat: nothing changed yet
	}
	switch paths {
	case "hub lease":
		a.log.Warn("the stream acknowledges no heartbeat, but the hub renews its Lease in this cluster: the lease holds and nothing is fenced",
			"alive", paths, "was", prev)
	case "none":
		a.log.Warn("neither the stream nor the hub's Lease renewals reach this agent: it fences when both are older than the lease",
			"was", prev, "leaseLeft", a.leaseLeft().Round(time.Millisecond))
	default:
		a.log.Info("paths to the hub", "alive", paths, "was", prev)
	}
}
