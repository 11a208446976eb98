package failover

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/purser-io/purser/api/v1alpha1"
)

// The hub's Lease in a member is the agent's second path to the hub: the
// agent does not fence while it sees it renewed, so the controller counts
// an AtMostOne runnable's wait from the later of the agent's last
// heartbeat and the latest moment a recorded renewal can have been seen.
func TestDecideCountsTheHubLease(t *testing.T) {
	tm := timing
	tm.AgentReadPeriod = AgentReadPeriod(tm.AgentLease)
	if tm.AgentReadPeriod != 16*time.Second {
		t.Fatalf("read period for a 30 s lease: %s", tm.AgentReadPeriod)
	}
	atMostOne := &v1alpha1.RunnableSpec{}
	unreachable := func(heartbeat, hubUntil time.Time) Cluster {
		return Cluster{Name: "b", LastHeartbeat: &heartbeat, HubLeaseUntil: &hubUntil,
			Taints: []corev1.Taint{noExecute(v1alpha1.TaintUnreachable, heartbeat.Add(time.Minute))}}
	}

	t.Run("stream out, the member renewed: no move", func(t *testing.T) {
		// The stream has carried no heartbeat for five minutes, but a DC
		// still renews the hub's Lease in the member every few seconds.
		c := unreachable(t0.Add(-5*time.Minute), t0.Add(-time.Second))
		for _, now := range []time.Time{t0, t0.Add(tm.AgentLease + tm.FencingMargin)} {
			c.HubLeaseUntil = new(now.Add(-time.Second))
			v := Decide(atMostOne, &v1alpha1.RunnableStatus{}, c, now, tm)
			if v.Evict || v.Waiting != v1alpha1.WaitingFencing {
				t.Fatalf("at %s: verdict %+v, want a fencing wait", now, v)
			}
			if !strings.Contains(v.Message, "the last renewal of the hub's Lease in the cluster") {
				t.Errorf("message %q does not name the hub's Lease", v.Message)
			}
		}
	})

	t.Run("cut off: moves at the right time, not a second earlier", func(t *testing.T) {
		// The last renewal recorded can land until t0; the stream went
		// silent earlier still.
		c := unreachable(t0.Add(-20*time.Second), t0)
		moves := t0.Add(tm.AgentReadPeriod + tm.AgentLease + tm.FencingMargin)
		v := Decide(atMostOne, &v1alpha1.RunnableStatus{}, c, moves.Add(-time.Second), tm)
		if v.Evict {
			t.Fatalf("moved a second before %s", moves)
		}
		if want := "moves at " + moves.UTC().Format(time.RFC3339); !strings.Contains(v.Message, want) {
			t.Errorf("message %q lacks %q", v.Message, want)
		}
		if v := Decide(atMostOne, &v1alpha1.RunnableStatus{}, c, moves, tm); !v.Evict || !v.TrustsFencing {
			t.Errorf("at %s: verdict %+v, want a move that trusts the fencing", moves, v)
		}
		// A heartbeat later than the hub's last renewal counts instead.
		late := unreachable(t0.Add(30*time.Second), t0)
		if v := Decide(atMostOne, &v1alpha1.RunnableStatus{}, late, moves, tm); v.Evict {
			t.Errorf("moved %s after a heartbeat at %s", tm.AgentLease+tm.FencingMargin-30*time.Second+tm.AgentReadPeriod, t0.Add(30*time.Second))
		}
	})

	t.Run("a renewal recorded but its write lost: counts from the record", func(t *testing.T) {
		// The agent's last heartbeat is a minute old, which alone would
		// let the runnable move now; a renewal recorded to land until
		// two seconds ago may have reached the agent, answer lost or not.
		c := unreachable(t0.Add(-time.Minute), t0.Add(-2*time.Second))
		without := c
		without.HubLeaseUntil = nil
		if v := Decide(atMostOne, &v1alpha1.RunnableStatus{}, without, t0, tm); !v.Evict {
			t.Fatalf("without the record: verdict %+v, want a move", v)
		}
		v := Decide(atMostOne, &v1alpha1.RunnableStatus{}, c, t0, tm)
		if v.Evict {
			t.Fatalf("moved although a renewal recorded to land by %s can have been seen", *c.HubLeaseUntil)
		}
		moves := c.HubLeaseUntil.Add(tm.AgentReadPeriod + tm.AgentLease + tm.FencingMargin)
		if want := "moves at " + moves.UTC().Format(time.RFC3339); !strings.Contains(v.Message, want) {
			t.Errorf("message %q lacks %q", v.Message, want)
		}
	})
}
