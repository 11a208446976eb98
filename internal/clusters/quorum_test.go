package clusters

import (
	"strings"
	"testing"
	"time"
)

func TestJudgeViews(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ago := func(s int) time.Time { return now.Add(-time.Duration(s) * time.Second) }
	ok := func(dc string) View { return View{Observer: dc, Probe: ProbeResult{Outcome: ProbeOK}, At: ago(1)} }
	down := func(dc string, since int) View {
		return View{Observer: dc, Probe: ProbeResult{Outcome: ProbeUnreachable, Detail: "connection refused"}, At: ago(1), FailingSince: ago(since)}
	}
	notReady := func(dc string, since int) View {
		return View{Observer: dc, Probe: ProbeResult{Outcome: ProbeNotReady, Detail: "/readyz answered 500"}, At: ago(1), FailingSince: ago(since)}
	}
	stale := func(v View) View { v.At = ago(60); return v }
	policy := QuorumPolicy{MaxAge: 10 * time.Second, Observers: 3}
	tests := []struct {
		name    string
		views   []View
		policy  QuorumPolicy
		want    ProbeOutcome
		since   time.Time
		detail  string
		unjudge bool
	}{
		{name: "every DC reaches it", views: []View{ok("dc-1"), ok("dc-2"), ok("dc-3")}, policy: policy, want: ProbeOK},
		{
			// The leader's DC is cut off from the others: its view alone
			// says down, the two others say up.
			name: "one DC of three cannot reach it", views: []View{down("dc-1", 5), ok("dc-2"), ok("dc-3")}, policy: policy,
			want: ProbeOK, detail: "failed from dc-1 (1 of 3 DCs): connection refused; the others reach it",
		},
		{
			name: "a quorum cannot reach it", views: []View{down("dc-1", 9), down("dc-2", 4), ok("dc-3")}, policy: policy,
			want: ProbeUnreachable, since: ago(4), detail: "failed from dc-1, dc-2 (2 of 3 DCs): connection refused",
		},
		{
			// The quorum had begun to fail once the second DC did.
			name: "every DC fails; the quorum's start is the second earliest", views: []View{down("dc-1", 9), down("dc-2", 4), down("dc-3", 6)},
			policy: policy, want: ProbeUnreachable, since: ago(6),
		},
		{
			name: "a quorum failed, one got an answer: not ready", views: []View{down("dc-1", 3), notReady("dc-2", 5), ok("dc-3")}, policy: policy,
			want: ProbeNotReady, since: ago(3), detail: "failed from dc-1, dc-2 (2 of 3 DCs)",
		},
		{
			// The cut-off DC stopped recording: its old views do not vote,
			// and the two left make a quorum.
			name: "a stale view does not vote", views: []View{stale(ok("dc-1")), down("dc-2", 5), down("dc-3", 5)}, policy: policy,
			want: ProbeUnreachable, since: ago(5),
		},
		{
			name: "a stale failure does not vote either", views: []View{stale(down("dc-1", 90)), down("dc-2", 5), ok("dc-3")}, policy: policy,
			want: ProbeOK,
		},
		{
			name: "fewer fresh views than a quorum: unjudged", views: []View{down("dc-1", 5), stale(down("dc-2", 50)), stale(ok("dc-3"))},
			policy: policy, want: ProbeOK, unjudge: true, detail: "only 1 of 3 DCs",
		},
		{
			// One controller and no DCs: its own probe decides, in its
			// own words.
			name: "one observer", views: []View{down("", 2)}, policy: QuorumPolicy{MaxAge: 10 * time.Second, Observers: 1},
			want: ProbeUnreachable, since: ago(2), detail: "connection refused",
		},
		{name: "no views at all", policy: policy, want: ProbeOK, unjudge: true},
		{
			name: "a failure without its start counts from its probe", policy: QuorumPolicy{Observers: 1},
			views: []View{{Observer: "dc-1", Probe: ProbeResult{Outcome: ProbeUnreachable}, At: ago(2)}}, want: ProbeUnreachable, since: ago(2),
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
