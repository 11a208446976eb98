package agent

import (
	"context"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/member/probe"
)

// An informer's cache outlives its connection: after the kube-apiserver
// dies, HasSynced stays true and the cache keeps its last state, which
// looks current to anyone reading it. So the agent asks its kube-apiserver
// (GET /readyz, as the control plane's health probe does) before every
// heartbeat and every snapshot, and says in the heartbeat whether its
// caches are synced and connected (v1alpha1.AgentKubeAPI). A snapshot is
// not sent while the kube-apiserver does not answer: it would only repeat
// a cache that cannot be refreshed, and the ingester would count it as a
// fresh look at the cluster. The probe needs no permission of its own:
// Kubernetes' default ClusterRole system:public-info-viewer grants GET on
// /readyz, /livez and /healthz to every authenticated user (the RBAC
// reference's table of default roles).

// kubeAPIState is the outcome of the latest probe.
type kubeAPIState struct {
	connected   bool
	lastContact time.Time
	err         string
}

// probeTimeout bounds one probe: within the heartbeat's own bound, so that
// an unanswered probe delays a beat by less than one interval.
func (a *Agent) probeTimeout() time.Duration {
	return min(probe.DefaultTimeout, max(a.cfg.HeartbeatInterval/2, 100*time.Millisecond))
}

// probeKubeAPI asks the kube-apiserver whether it is ready, records the
// outcome for the next heartbeat, and reports whether it was.
func (a *Agent) probeKubeAPI(ctx context.Context) bool {
	res := a.prober.Probe(ctx)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.kubeAPI.connected = res.Outcome == probe.OK
	a.kubeAPI.err = res.Detail
	if a.kubeAPI.connected {
		a.kubeAPI.lastContact = time.Now()
	}
	return a.kubeAPI.connected
}

// kubeAPIReport is what the next heartbeat says of the kube-apiserver and
// the caches.
func (a *Agent) kubeAPIReport() *v1alpha1.AgentKubeAPI {
	ws := a.watches()
	synced := len(ws) > 0
	for _, w := range ws {
		synced = synced && w.synced()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	r := &v1alpha1.AgentKubeAPI{Connected: a.kubeAPI.connected, Synced: synced, Error: a.kubeAPI.err}
	if !a.kubeAPI.lastContact.IsZero() {
		at := a.kubeAPI.lastContact.UTC()
		r.LastContact = &at
	}
	return r
}
