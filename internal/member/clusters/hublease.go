package clusters

import (
	"context"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1ac "k8s.io/client-go/applyconfigurations/coordination/v1"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"

	"github.com/purser-io/purser/internal/member/probe"
	"github.com/purser-io/purser/internal/platform/tcpconn"
)

// The hub's lease in each member cluster is the second path by which an
// agent learns that the hub still reaches it, beside the heartbeats it
// writes to the stream: every observer (one per controller replica, so
// one per DC) renews a coordination.k8s.io/v1 Lease in the agent's
// namespace of each cluster whose probe it just saw succeed, and the
// agent, which reads it every heartbeat interval, does not fence while
// its resourceVersion keeps changing (internal/member/agent). A stream
// outage then stops no work. The renewal goes through the member's own
// API, so a cluster truly cut off from the hub sees neither path and
// fences as before.
//
// Safety is write-ahead: before a pass sends any renewal, it records in
// the database (store.Clusters.RecordHubLeases, on the database's clock)
// that a renewal sent now can land until hubLeaseLandsWithin later; a
// renewal whose record could not be written is not sent. The failover
// controller counts an AtMostOne runnable's wait from the later of that
// time and the agent's last heartbeat, so no renewal the agent may have
// seen is ever missed, even one whose answer was lost. Only clusters
// whose probe succeeded in the same pass are renewed: the record of a
// cluster that does not answer would hold its work back for nothing.

// Where the hub's lease lives in a member cluster.
const (
	HubLeaseNamespace = "purser-system"
	HubLeaseName      = "purser-hub"
	// hubLeaseManager owns the Lease's fields (server-side apply).
	hubLeaseManager = "purser-hub"
)

// hubLeaseLandsWithin is how long after the write-ahead record a renewal
// can take effect with this request timeout: the request is given
// timeout, counted from before the record, and what it wrote to the
// connection by then is acknowledged or dropped by the kernel within
// timeout more (tcpconn), as LandsWithin says of every write.
func hubLeaseLandsWithin(timeout time.Duration) time.Duration { return 2 * timeout }

// leaseClient is a cluster's Lease client for the renewals, built with
// the renewal's timeout on every request (which client-go also passes to
// the API server as its timeout parameter).
func leaseClient(cfg *rest.Config, timeout time.Duration) (coordinationv1client.LeaseInterface, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = timeout
	cfg.Dial = tcpconn.DialContext(timeout, timeout)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("lease client: %w", err)
	}
	return cs.CoordinationV1().Leases(HubLeaseNamespace), nil
}

// renewHubLeases sends a renewal to each of the clusters named, whose
// write-ahead record was committed after start; each must be over by
// start plus the timeout, so that it lands within the recorded bound. A
// cluster whose renewal fails is logged when that changes; its agent
// still has its heartbeats.
func (o *Observer) renewHubLeases(ctx context.Context, start time.Time, names []string) {
	ctx, cancel := context.WithDeadline(ctx, start.Add(o.cfg.ProbeTimeout))
	defer cancel()
	holder := "purser-hub/" + observerName(o.cfg.DC)
	errs := make([]error, len(names))
	sem := make(chan struct{}, o.cfg.Workers)
	var wg sync.WaitGroup
	for i, name := range names {
		cp := o.probers[name]
		if cp == nil || cp.lease == nil {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			// renewTime is for people reading the Lease: the agent never
			// compares it with a clock, only notices that it changed.
			lease := coordinationv1ac.Lease(HubLeaseName, HubLeaseNamespace).WithSpec(
				coordinationv1ac.LeaseSpec().WithHolderIdentity(holder).WithRenewTime(metav1.NewMicroTime(time.Now())))
			_, errs[i] = cp.lease.Apply(ctx, lease, metav1.ApplyOptions{FieldManager: hubLeaseManager, Force: true})
		})
	}
	wg.Wait()
	for i, name := range names {
		cp := o.probers[name]
		if cp == nil {
			continue
		}
		switch msg := errorText(errs[i]); {
		case msg != "" && msg != cp.renewErr:
			o.log.Warn("renewing the hub's lease in a member cluster failed; its agent still has its heartbeats through the stream",
				"cluster", name, "lease", HubLeaseNamespace+"/"+HubLeaseName, "error", msg)
		case msg == "" && cp.renewErr != "":
			o.log.Info("renewing the hub's lease in a member cluster works again", "cluster", name)
		}
		cp.renewErr = errorText(errs[i])
	}
}

func errorText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// okNames are the clusters of rows whose result is OK: those whose lease
// is renewed.
func okNames(names []string, results []probe.Result) []string {
	var out []string
	for i, r := range results {
		if r.Outcome == probe.OK {
			out = append(out, names[i])
		}
	}
	return out
}
