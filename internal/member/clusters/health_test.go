package clusters

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/member/probe"
)

var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// at is t0 plus s seconds.
func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

// obs is one observation in a scenario: at second T, a probe outcome, the
// agent's heartbeat age in seconds (-1: no agent ever reported), and when
// its failure began if known (Since, a second; 0: not known).
type obs struct {
	T      int
	Probe  probe.Outcome
	Detail string
	HBAge  int
	Since  int
}

func (o obs) observation() Observation {
	r := Observation{Time: at(o.T), Probe: probe.Result{Outcome: o.Probe, Detail: o.Detail}}
	if o.Since != 0 {
		r.FailingSince = at(o.Since)
	}
	if o.HBAge >= 0 {
		hb := at(o.T - o.HBAge)
		r.LastHeartbeat = &hb
	}
	return r
}

// Shorthands: a probe at second t with a fresh agent.
func ok(t int) obs { return obs{T: t, Probe: probe.OK} }
func refused(t int) obs {
	return obs{T: t, Probe: probe.Unreachable, Detail: fmt.Sprintf("dial tcp 127.0.0.1:6443: connect: connection refused (%d)", t)}
}
func notReady(t int) obs {
	return obs{T: t, Probe: probe.NotReady, Detail: "/readyz answered 500: etcd failed: reason withheld"}
}

// every returns f at seconds from, from+step, ... below to.
func every(from, to, step int, f func(int) obs) []obs {
	var out []obs
	for t := from; t < to; t += step {
		out = append(out, f(t))
	}
	return out
}

// flap repeats the pattern of observations, one every 2s, from second
// from until to.
func flap(from, to int, pattern ...func(int) obs) []obs {
	var out []obs
	for t := from; t < to; {
		for _, f := range pattern {
			out = append(out, f(t))
			t += 2
		}
	}
	return out
}

func seq(parts ...[]obs) []obs {
	var out []obs
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// taint is an expected taint: key, effect, TimeAdded in seconds after t0.
type taint struct {
	Key    string
	Effect corev1.TaintEffect
	Added  int
}

func (t taint) String() string { return fmt.Sprintf("%s:%s@%d", t.Key, t.Effect, t.Added) }

func taintsOf(ts []corev1.Taint) []taint {
	out := []taint{}
	for _, t := range ts {
		added := -999
		if t.TimeAdded != nil {
			added = int(t.TimeAdded.Sub(t0) / time.Second)
		}
		out = append(out, taint{t.Key, t.Effect, added})
	}
	return out
}

var (
	unreachNoSched = func(added int) taint { return taint{v1alpha1.TaintUnreachable, corev1.TaintEffectNoSchedule, added} }
	unreachNoExec  = func(added int) taint { return taint{v1alpha1.TaintUnreachable, corev1.TaintEffectNoExecute, added} }
	notReadyNoSch  = func(added int) taint { return taint{v1alpha1.TaintNotReady, corev1.TaintEffectNoSchedule, added} }
	notReadyNoEx   = func(added int) taint { return taint{v1alpha1.TaintNotReady, corev1.TaintEffectNoExecute, added} }
)

// readyAt is a state that has been Ready since second t.
func readyAt(t int) State {
	return State{Ready: v1alpha1.Condition{
		Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, LastTransitionTime: at(t),
		Reason: ReasonReady, Message: "kube-apiserver ready and agent reporting",
	}}
}

// policy is the defaults, spelled out: thresholds 3 and 2, grace 40s,
// lease 30s.
var policy = Policy{}

func TestStep(t *testing.T) {
	cases := []struct {
		name  string
		start State
		steps []obs
		// The state after the last step.
		status  metav1.ConditionStatus
		reason  string
		since   int    // lastTransitionTime, seconds after t0
		message string // a part of the message
		taints  []taint
	}{
		{
			name: "never probed: Unknown with NoSchedule, not NoExecute", steps: []obs{ok(0)},
			status: metav1.ConditionUnknown, reason: ReasonNotProbedYet, since: 0,
			message: "not judged yet: Ready is decided after 2 successful or 3 failed probes in a row",
			taints:  []taint{notReadyNoSch(0)},
		},
		{
			name: "never probed and never answering: no NoExecute before a verdict", steps: every(0, 100, 50, refused),
			status: metav1.ConditionUnknown, reason: ReasonNotProbedYet, since: 0, taints: []taint{notReadyNoSch(0)},
		},
		{
			name: "new cluster becomes Ready after the success threshold", steps: []obs{ok(0), ok(2)},
			status: metav1.ConditionTrue, reason: ReasonReady, since: 2, message: "kube-apiserver ready and agent reporting",
			taints: []taint{},
		},
		{
			name:   "new cluster never reachable: Unknown after 3 probes, NoExecute after grace from first sight",
			steps:  every(0, 42, 2, refused),
			status: metav1.ConditionUnknown, reason: ReasonAPIServerUnreachable, since: 0,
			message: "kube-apiserver unreachable for 3 probes: dial tcp 127.0.0.1:6443: connect: connection refused (4)",
			taints:  []taint{unreachNoSched(4), unreachNoExec(40)},
		},
		{
			name: "Ready survives failures below the threshold", start: readyAt(-100), steps: []obs{refused(0), refused(2)},
			status: metav1.ConditionTrue, reason: ReasonReady, since: -100, taints: []taint{},
		},
		{
			name: "unreachable for the threshold: Unknown from the first failed probe, NoSchedule at once", start: readyAt(-100),
			steps:  []obs{refused(0), refused(2), refused(4)},
			status: metav1.ConditionUnknown, reason: ReasonAPIServerUnreachable, since: 0,
			message: "kube-apiserver unreachable for 3 probes: dial tcp 127.0.0.1:6443: connect: connection refused (4)",
			taints:  []taint{unreachNoSched(4)},
		},
		{
			name: "no NoExecute before the grace period", start: readyAt(-100), steps: every(0, 40, 2, refused),
			status: metav1.ConditionUnknown, reason: ReasonAPIServerUnreachable, since: 0, taints: []taint{unreachNoSched(4)},
		},
		{
			name: "NoExecute once not Ready for the grace period from the first failed probe; the message stays the first one", start: readyAt(-100),
			steps:  every(0, 46, 2, refused),
			status: metav1.ConditionUnknown, reason: ReasonAPIServerUnreachable, since: 0,
			message: "connection refused (4)",
			taints:  []taint{unreachNoSched(4), unreachNoExec(40)},
		},
		{
			name: "recovery needs the success threshold", start: readyAt(-100),
			steps:  seq(every(0, 60, 2, refused), []obs{ok(60)}),
			status: metav1.ConditionUnknown, reason: ReasonAPIServerUnreachable, since: 0,
			taints: []taint{unreachNoSched(4), unreachNoExec(40)},
		},
		{
			name: "recovery removes the taints", start: readyAt(-100),
			steps:  seq(every(0, 60, 2, refused), []obs{ok(60), ok(62)}),
			status: metav1.ConditionTrue, reason: ReasonReady, since: 62, message: "kube-apiserver ready and agent reporting",
			taints: []taint{},
		},
		{
			name: "flapping faster than the failure threshold never leaves Ready", start: readyAt(-100),
			steps:  flap(0, 300, refused, refused, ok),
			status: metav1.ConditionTrue, reason: ReasonReady, since: -100, taints: []taint{},
		},
		{
			name: "flapping faster than the success threshold never makes an unreachable cluster Ready", start: readyAt(-100),
			steps:  seq([]obs{refused(0), refused(2), refused(4)}, flap(6, 300, ok, refused)),
			status: metav1.ConditionUnknown, reason: ReasonAPIServerUnreachable, since: 0,
			message: "connection refused (4)", taints: []taint{unreachNoSched(4), unreachNoExec(40)},
		},
		{
			name: "kube-apiserver answers not ready: False", start: readyAt(-100),
			steps:  []obs{notReady(0), notReady(2), notReady(4)},
			status: metav1.ConditionFalse, reason: ReasonAPIServerNotReady, since: 0,
			message: "kube-apiserver not ready for 3 probes: /readyz answered 500: etcd failed: reason withheld",
			taints:  []taint{notReadyNoSch(4)},
		},
		{
			name: "not ready then unreachable: reason and taint key change, the grace clock does not", start: readyAt(-100),
			steps:  seq(every(0, 20, 2, notReady), every(20, 46, 2, refused)),
			status: metav1.ConditionUnknown, reason: ReasonAPIServerUnreachable, since: 0,
			message: "kube-apiserver unreachable for 3 probes",
			taints:  []taint{unreachNoSched(24), unreachNoExec(40)},
		},
		{
			name: "unreachable, then answering not ready (a restarted kube-apiserver): the not-ready key gets its own grace", start: readyAt(-100),
			steps:  seq(every(0, 60, 2, refused), every(60, 90, 2, notReady)),
			status: metav1.ConditionFalse, reason: ReasonAPIServerNotReady, since: 0,
			message: "kube-apiserver not ready for 3 probes",
			taints:  []taint{notReadyNoSch(64)},
		},
		{
			name: "not ready after unreachable for the grace: NoExecute again", start: readyAt(-100),
			steps:  seq(every(0, 60, 2, refused), every(60, 106, 2, notReady)),
			status: metav1.ConditionFalse, reason: ReasonAPIServerNotReady, since: 0,
			taints: []taint{notReadyNoSch(64), notReadyNoEx(104)},
		},
		{
			name: "a kind of failure shorter than the threshold keeps the reason", start: readyAt(-100),
			steps:  seq(every(0, 20, 2, notReady), []obs{refused(20), refused(22), notReady(24)}),
			status: metav1.ConditionFalse, reason: ReasonAPIServerNotReady, since: 0, taints: []taint{notReadyNoSch(4)},
		},
		{
			name: "agent lease expired: False after the threshold, from when the lease ran out", start: readyAt(-100),
			steps: []obs{
				{T: 0, Probe: probe.OK, HBAge: 31}, {T: 2, Probe: probe.OK, HBAge: 33}, {T: 4, Probe: probe.OK, HBAge: 35},
			},
			status: metav1.ConditionFalse, reason: ReasonAgentLeaseExpired, since: -1,
			message: "agent lease expired: last heartbeat at 2026-11-29T09:59:29Z, 35s before this probe (lease 30s)",
			taints:  []taint{notReadyNoSch(4)},
		},
		{
			name: "agent within its lease keeps Ready", start: readyAt(-100),
			steps:  []obs{{T: 0, Probe: probe.OK, HBAge: 30}, {T: 2, Probe: probe.OK, HBAge: 29}, {T: 4, Probe: probe.OK, HBAge: 30}},
			status: metav1.ConditionTrue, reason: ReasonReady, since: -100, taints: []taint{},
		},
		{
			name: "agent reports again: Ready after the success threshold", start: readyAt(-100),
			steps: []obs{
				{T: 0, Probe: probe.OK, HBAge: 31}, {T: 2, Probe: probe.OK, HBAge: 33}, {T: 4, Probe: probe.OK, HBAge: 35},
				{T: 6, Probe: probe.OK, HBAge: 1}, {T: 8, Probe: probe.OK, HBAge: 3},
			},
			status: metav1.ConditionTrue, reason: ReasonReady, since: 8, taints: []taint{},
		},
		{
			name:   "no agent ever reported: Ready by the kube-apiserver alone, and the message says so",
			steps:  []obs{{T: 0, Probe: probe.OK, HBAge: -1}, {T: 2, Probe: probe.OK, HBAge: -1}, {T: 400, Probe: probe.OK, HBAge: -1}},
			status: metav1.ConditionTrue, reason: ReasonReady, since: 2, message: "kube-apiserver ready; no agent has reported yet",
			taints: []taint{},
		},
		{
			name:   "an agent reporting for the first time changes the message, not the time",
			steps:  []obs{{T: 0, Probe: probe.OK, HBAge: -1}, {T: 2, Probe: probe.OK, HBAge: -1}, {T: 4, Probe: probe.OK, HBAge: 0}},
			status: metav1.ConditionTrue, reason: ReasonReady, since: 2, message: "kube-apiserver ready and agent reporting",
			taints: []taint{},
		},
		{
			name: "an unreachable kube-apiserver outweighs a silent agent", start: readyAt(-100),
			steps: []obs{
				{T: 0, Probe: probe.Unreachable, Detail: "x", HBAge: 60}, {T: 2, Probe: probe.Unreachable, Detail: "x", HBAge: 62},
				{T: 4, Probe: probe.Unreachable, Detail: "x", HBAge: 64},
			},
			status: metav1.ConditionUnknown, reason: ReasonAPIServerUnreachable, since: 0, taints: []taint{unreachNoSched(4)},
		},
		{
			// The DCs' views say when a quorum of them began to fail,
			// before this monitor's first failed judgement.
			name: "an outage known to have begun earlier is dated from then", start: readyAt(-100),
			steps: []obs{
				{T: 0, Probe: probe.Unreachable, Detail: "x", HBAge: -1, Since: -3}, {T: 2, Probe: probe.Unreachable, Detail: "x", HBAge: -1, Since: -3},
				{T: 4, Probe: probe.Unreachable, Detail: "x", HBAge: -1, Since: -3}, {T: 38, Probe: probe.Unreachable, Detail: "x", HBAge: -1, Since: -3},
			},
			status: metav1.ConditionUnknown, reason: ReasonAPIServerUnreachable, since: -3,
			taints: []taint{unreachNoSched(4), unreachNoExec(38)},
		},
		{
			name: "an outage is never dated before the Ready it ends", start: readyAt(-100),
			steps: []obs{
				{T: 0, Probe: probe.Unreachable, Detail: "x", HBAge: -1, Since: -300}, {T: 2, Probe: probe.Unreachable, Detail: "x", HBAge: -1, Since: -300},
				{T: 4, Probe: probe.Unreachable, Detail: "x", HBAge: -1, Since: -300},
			},
			status: metav1.ConditionUnknown, reason: ReasonAPIServerUnreachable, since: -100,
			taints: []taint{unreachNoSched(4), unreachNoExec(4)},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.start
			for _, o := range tc.steps {
				s = policy.Step(s, o.observation())
			}
			c := s.Ready
			if c.Type != v1alpha1.ConditionReady || c.Status != tc.status || c.Reason != tc.reason {
				t.Fatalf("condition %+v, want %s %s", c, tc.status, tc.reason)
			}
			if !c.LastTransitionTime.Equal(at(tc.since)) {
				t.Errorf("lastTransitionTime %s, want %s", c.LastTransitionTime, at(tc.since))
			}
			if !strings.Contains(c.Message, tc.message) {
				t.Errorf("message %q, want it to contain %q", c.Message, tc.message)
			}
			if got := fmt.Sprint(taintsOf(s.Taints)); got != fmt.Sprint(tc.taints) {
				t.Errorf("taints %s, want %s", got, fmt.Sprint(tc.taints))
			}
		})
	}
}

// TestStepFlappingWritesNothing checks the stronger promise behind
// flapping: not only the end state, but every intermediate one, has the
// same condition and taints, so the monitor writes nothing at all.
func TestStepFlappingWritesNothing(t *testing.T) {
	s := readyAt(-100)
	want := mustJSON([]any{s.Ready, s.Taints})
	for t1 := 0; t1 < 600; t1 += 6 {
		for _, o := range []obs{refused(t1), notReady(t1 + 2), ok(t1 + 4)} {
			s = policy.Step(s, o.observation())
			if got := mustJSON([]any{s.Ready, s.Taints}); !bytes.Equal(got, want) {
				t.Fatalf("at %ds: %s, want %s", o.T, got, want)
			}
		}
	}
}

func TestStepThresholdsAreConfigurable(t *testing.T) {
	p := Policy{FailureThreshold: 1, SuccessThreshold: 1, NoExecuteGrace: 5 * time.Second, AgentLease: 5 * time.Second}
	s := p.Step(readyAt(-100), refused(0).observation())
	if s.Ready.Status != metav1.ConditionUnknown || s.Ready.Message != "kube-apiserver unreachable for 1 probe: dial tcp 127.0.0.1:6443: connect: connection refused (0)" {
		t.Fatalf("after one failure with threshold 1: %+v", s.Ready)
	}
	s = p.Step(s, refused(5).observation())
	if got := fmt.Sprint(taintsOf(s.Taints)); got != fmt.Sprint([]taint{unreachNoSched(0), unreachNoExec(5)}) {
		t.Fatalf("taints after a 5s grace: %s", got)
	}
	s = p.Step(s, ok(6).observation())
	if s.Ready.Status != metav1.ConditionTrue || len(s.Taints) != 0 {
		t.Fatalf("after one success with threshold 1: %+v %v", s.Ready, s.Taints)
	}
}

// TestSeedResumes checks that a restarted controller picks up where the
// stored status left off: the condition, its time (the grace clock) and
// the taints' times, with thresholds counted afresh.
func TestSeedResumes(t *testing.T) {
	// Stored: unreachable since second -30, NoSchedule only (the grace is
	// 40s), and fields and taints that are not the monitor's.
	stored := v1alpha1.ClusterStatus{
		Conditions: []v1alpha1.Condition{
			{Type: "Other", Status: metav1.ConditionTrue, LastTransitionTime: at(-500)},
			{Type: v1alpha1.ConditionReady, Status: metav1.ConditionUnknown, LastTransitionTime: at(-30),
				Reason: ReasonAPIServerUnreachable, Message: "kube-apiserver unreachable for 3 probes: x"},
		},
		Taints: []corev1.Taint{
			{Key: v1alpha1.TaintUnreachable, Effect: corev1.TaintEffectNoSchedule, TimeAdded: &metav1.Time{Time: at(-30)}},
			{Key: "someone-else", Effect: corev1.TaintEffectNoSchedule},
		},
		Inventory: &v1alpha1.InventoryStatus{Objects: 7},
	}
	raw := mustJSON(stored)
	// The status as it comes back from the database.
	var decoded v1alpha1.ClusterStatus
	if err := json.Unmarshal(raw, &decoded); err != nil {
		t.Fatal(err)
	}

	s := Seed(decoded)
	if s.Ready.Status != metav1.ConditionUnknown || len(s.Taints) != 1 {
		t.Fatalf("seeded %+v", s)
	}
	// Still unreachable 5s later: nothing to write.
	s = policy.Step(s, refused(5).observation())
	if _, changed := mergeStatus(raw, decoded, s); changed {
		t.Fatalf("a restart with nothing new rewrote the status: %+v", s)
	}
	// The grace is counted from the stored time, not the restart.
	s = policy.Step(s, refused(10).observation())
	if got := fmt.Sprint(taintsOf(s.Taints)); got != fmt.Sprint([]taint{unreachNoSched(-30), unreachNoExec(10)}) {
		t.Fatalf("taints 40s after the stored transition: %s", got)
	}
	out, changed := mergeStatus(raw, decoded, s)
	if !changed {
		t.Fatal("NoExecute added but no change reported")
	}
	var merged v1alpha1.ClusterStatus
	if err := json.Unmarshal(out, &merged); err != nil {
		t.Fatal(err)
	}
	if len(merged.Conditions) != 2 || merged.Conditions[0].Type != "Other" || merged.Inventory == nil || merged.Inventory.Objects != 7 {
		t.Fatalf("merge lost what is not the monitor's: %s", out)
	}
	if got := fmt.Sprint(taintsOf(merged.Taints)); got != fmt.Sprint([]taint{{"someone-else", corev1.TaintEffectNoSchedule, -999}, unreachNoSched(-30), unreachNoExec(10)}) {
		t.Fatalf("merged taints %s", got)
	}
	e := auditEntry("dc1-a", decoded, s)
	if e.Action != ActionTaint || e.Outcome != ReasonAPIServerUnreachable ||
		e.Summary != "taints added purser.io/unreachable:NoExecute; Ready Unknown since 2026-11-29T09:59:30Z" {
		t.Fatalf("audit entry %+v", e)
	}

	// Two good probes make it Ready; one is not enough, even right after
	// a restart.
	s = Seed(decoded)
	s = policy.Step(s, ok(5).observation())
	if s.Ready.Status != metav1.ConditionUnknown {
		t.Fatalf("Ready after one good probe following a restart: %+v", s.Ready)
	}
	s = policy.Step(s, ok(7).observation())
	e = auditEntry("dc1-a", decoded, s)
	if s.Ready.Status != metav1.ConditionTrue || e.Action != ActionCondition ||
		e.Summary != "Ready Unknown -> True (ClusterReady): kube-apiserver ready and agent reporting; taints removed purser.io/unreachable:NoSchedule" {
		t.Fatalf("recovery: %+v, audit %+v", s.Ready, e)
	}

	// A Ready cluster stays Ready across a restart until the threshold.
	s = Seed(v1alpha1.ClusterStatus{Conditions: []v1alpha1.Condition{readyAt(-100).Ready}})
	s = policy.Step(policy.Step(s, refused(0).observation()), refused(2).observation())
	if s.Ready.Status != metav1.ConditionTrue || len(s.Taints) != 0 {
		t.Fatalf("Ready cluster after a restart and two failures: %+v", s)
	}
}

func TestMergeStatusOfNewCluster(t *testing.T) {
	s := policy.Step(State{}, ok(0).observation())
	out, changed := mergeStatus(nil, v1alpha1.ClusterStatus{}, s)
	if !changed {
		t.Fatal("first judgement of a cluster reported as no change")
	}
	want := `{"conditions":[{"type":"Ready","status":"Unknown","lastTransitionTime":"2026-11-29T10:00:00Z","reason":"NotProbedYet",` +
		`"message":"not judged yet: Ready is decided after 2 successful or 3 failed probes in a row"}],` +
		`"taints":[{"key":"purser.io/not-ready","effect":"NoSchedule","timeAdded":"2026-11-29T10:00:00Z"}]}`
	if string(out) != want {
		t.Fatalf("status\n got %s\nwant %s", out, want)
	}
	e := auditEntry("dc1-a", v1alpha1.ClusterStatus{}, s)
	if e.Actor != "controller" || e.Action != ActionCondition || e.Kind != v1alpha1.KindCluster || e.Name != "dc1-a" ||
		!strings.HasPrefix(e.Summary, "Ready none -> Unknown (NotProbedYet): not judged yet") ||
		!strings.HasSuffix(e.Summary, "; taints added purser.io/not-ready:NoSchedule") {
		t.Fatalf("audit entry %+v", e)
	}
}

func TestEffectiveTaints(t *testing.T) {
	c := &store.Cluster{
		Name:   "dc1-a",
		Spec:   []byte(`{"spec":{"taints":[{"key":"maintenance","effect":"NoSchedule"}]}}`),
		Status: []byte(`{"taints":[{"key":"purser.io/unreachable","effect":"NoExecute"}]}`),
	}
	got, err := EffectiveTaints(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Key != "maintenance" || got[1].Key != v1alpha1.TaintUnreachable || got[1].Effect != corev1.TaintEffectNoExecute {
		t.Fatalf("effective taints %+v", got)
	}
	c.Status = nil
	if got, err := EffectiveTaints(c); err != nil || len(got) != 1 {
		t.Fatalf("without status: %+v, %v", got, err)
	}
}
