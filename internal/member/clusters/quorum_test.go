package clusters

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/member/probe"
)

func TestJudgeViews(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ago := func(s int) time.Time { return now.Add(-time.Duration(s) * time.Second) }
	ok := func(dc string) View { return View{Observer: dc, Probe: probe.Result{Outcome: probe.OK}, At: ago(1)} }
	down := func(dc string, since int) View {
		return View{Observer: dc, Probe: probe.Result{Outcome: probe.Unreachable, Detail: "connection refused"}, At: ago(1), FailingSince: ago(since)}
	}
	notReady := func(dc string, since int) View {
		return View{Observer: dc, Probe: probe.Result{Outcome: probe.NotReady, Detail: "/readyz answered 500"}, At: ago(1), FailingSince: ago(since)}
	}
	stale := func(v View) View { v.At = ago(60); return v }
	policy := QuorumPolicy{MaxAge: 10 * time.Second, Observers: 3}
	tests := []struct {
		name    string
		views   []View
		policy  QuorumPolicy
		want    probe.Outcome
		since   time.Time
		detail  string
		unjudge bool
	}{
		{name: "every DC reaches it", views: []View{ok("dc-1"), ok("dc-2"), ok("dc-3")}, policy: policy, want: probe.OK},
		{
			// The leader's DC is cut off from the others: its view alone
			// says down, the two others say up.
			name: "one DC of three cannot reach it", views: []View{down("dc-1", 5), ok("dc-2"), ok("dc-3")}, policy: policy,
			want: probe.OK, detail: "failed from dc-1 (1 of 3 DCs): connection refused; the others reach it",
		},
		{
			name: "a quorum cannot reach it", views: []View{down("dc-1", 9), down("dc-2", 4), ok("dc-3")}, policy: policy,
			want: probe.Unreachable, since: ago(4), detail: "failed from dc-1, dc-2 (2 of 3 DCs): connection refused",
		},
		{
			// The quorum had begun to fail once the second DC did.
			name: "every DC fails; the quorum's start is the second earliest", views: []View{down("dc-1", 9), down("dc-2", 4), down("dc-3", 6)},
			policy: policy, want: probe.Unreachable, since: ago(6),
		},
		{
			name: "a quorum failed, one got an answer: not ready", views: []View{down("dc-1", 3), notReady("dc-2", 5), ok("dc-3")}, policy: policy,
			want: probe.NotReady, since: ago(3), detail: "failed from dc-1, dc-2 (2 of 3 DCs)",
		},
		{
			// The cut-off DC stopped recording: its old views do not vote,
			// and the two left make a quorum.
			name: "a stale view does not vote", views: []View{stale(ok("dc-1")), down("dc-2", 5), down("dc-3", 5)}, policy: policy,
			want: probe.Unreachable, since: ago(5),
		},
		{
			name: "a stale failure does not vote either", views: []View{stale(down("dc-1", 90)), down("dc-2", 5), ok("dc-3")}, policy: policy,
			want: probe.OK,
		},
		{
			name: "fewer fresh views than a quorum: unjudged", views: []View{down("dc-1", 5), stale(down("dc-2", 50)), stale(ok("dc-3"))},
			policy: policy, want: probe.OK, unjudge: true, detail: "only 1 of 3 DCs",
		},
		{
			// One controller and no DCs: its own probe decides, in its
			// own words.
			name: "one observer", views: []View{down("", 2)}, policy: QuorumPolicy{MaxAge: 10 * time.Second, Observers: 1},
			want: probe.Unreachable, since: ago(2), detail: "connection refused",
		},
		{name: "no views at all", policy: policy, want: probe.OK, unjudge: true},
		{
			name: "a failure without its start counts from its probe", policy: QuorumPolicy{Observers: 1},
			views: []View{{Observer: "dc-1", Probe: probe.Result{Outcome: probe.Unreachable}, At: ago(2)}}, want: probe.Unreachable, since: ago(2),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := JudgeViews(tt.views, now, tt.policy)
			if j.Probe.Outcome != tt.want || !j.FailingSince.Equal(tt.since) || j.Unjudged != tt.unjudge {
				t.Errorf("got outcome %v since %v unjudged %v, want %v since %v unjudged %v", j.Probe.Outcome, j.FailingSince, j.Unjudged, tt.want, tt.since, tt.unjudge)
			}
			if !strings.Contains(j.Probe.Detail, tt.detail) {
				t.Errorf("detail %q, want it to contain %q", j.Probe.Detail, tt.detail)
			}
		})
	}
}

// TestHeartbeatsFarmSilence: when every agent of several falls silent at
// once, the silence is the heartbeats' path's, and no cluster is judged
// by its agent; one agent silent among fresh ones, or a lone agent, is
// judged as before.
func TestHeartbeatsFarmSilence(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(s int) *time.Time { t := now.Add(-time.Duration(s) * time.Second); return &t }
	m := NewHealthMonitor(Config{})
	for _, tt := range []struct {
		name   string
		fresh  map[string]store.AgentFreshness
		judged []string
	}{
		{"all silent", map[string]store.AgentFreshness{"a": {LastHeartbeat: at(40)}, "b": {LastHeartbeat: at(45)}}, nil},
		{"one silent", map[string]store.AgentFreshness{"a": {LastHeartbeat: at(40)}, "b": {LastHeartbeat: at(2)}}, []string{"a", "b"}},
		{"a lone agent silent", map[string]store.AgentFreshness{"a": {LastHeartbeat: at(40)}}, []string{"a"}},
		{"no agent ever", map[string]store.AgentFreshness{"a": {}}, nil},
	} {
		got := m.heartbeats(tt.fresh, now)
		var names []string
		for name := range got {
			names = append(names, name)
		}
		slices.Sort(names)
		if !slices.Equal(names, tt.judged) {
			t.Errorf("%s: judged by their agents: %v, want %v", tt.name, names, tt.judged)
		}
	}
}
