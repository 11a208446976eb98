package clusters

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/seal"
	"github.com/purser-io/purser/internal/hub/seal/sealtest"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/member/clusters/clusterstest"
	"github.com/purser-io/purser/internal/member/probe"
	"github.com/purser-io/purser/internal/sandbox"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// The health tests stop kube-apiservers, so each uses a dedicated cluster;
// no shared one is ever started.
var env = sandboxtest.New(sandboxtest.Config{})

func TestMain(m *testing.M) { os.Exit(env.Run(m)) }

// wait bounds every wait on the sandbox and the monitor. It is generous
// because it measures nothing: a loaded two-core machine must still pass.
const wait = 2 * time.Minute

// fastPolicy makes a test take seconds: probes every 200ms, thresholds 3
// and 2, NoExecute after 2s.
var fastPolicy = Policy{FailureThreshold: 3, SuccessThreshold: 2, NoExecuteGrace: 2 * time.Second}

const fastInterval = 200 * time.Millisecond

func TestHealthMonitorOnSandbox(t *testing.T) {
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) { testHealthMonitor(t, eng.NewDSN(t)) })
	}
}

// testHealthMonitor follows one cluster, registered three times: "direct"
// to its kube-apiserver, "flappy" through a proxy that a test cuts and
// restores, "with-agent" with an agent's heartbeats.
func testHealthMonitor(t *testing.T, dsn string) {
	ctx := t.Context()
	st, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	sealer, _ := sealtest.New(t)
	c := env.Dedicated(t, false)
	proxy, err := sandbox.NewProxy("127.0.0.1:0", c.APIServerAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })

	register := func(name, server, status string) {
		t.Helper()
		kc, err := c.Kubeconfig(server)
		if err != nil {
			t.Fatal(err)
		}
		row := store.Cluster{Name: name, Spec: []byte(`{"spec":{"taints":[{"key":"maintenance","effect":"NoSchedule"}]}}`)}
		if status != "" {
			row.Status = []byte(status)
		}
		clusterstest.Register(t, st, sealer, row, kc)
	}
	// A status field the monitor does not own must survive its writes.
	register("direct", "", `{"inventory":{"objects":5}}`)
	register("flappy", "https://"+proxy.Addr(), "")
	register("with-agent", "", "")
	stale := time.Now().Add(-time.Minute)
	if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.Agents().Touch(ctx, "with-agent", &stale, nil, nil) }); err != nil {
		t.Fatal(err)
	}

	m1 := startMonitor(t, st, sealer)

	// Reachable: Ready, and no purser taint beside the admin's.
	for _, name := range []string{"direct", "flappy"} {
		waitReady(t, st, name, metav1.ConditionTrue, ReasonReady)
	}
	status := readStatus(t, st, "direct")
	if status.Inventory == nil || status.Inventory.Objects != 5 || len(status.Taints) != 0 {
		t.Fatalf("direct, Ready: %+v", status)
	}
	if c := ReadyCondition(status); c.Message != "kube-apiserver ready; no agent has reported yet" {
		t.Fatalf("direct, Ready: message %q", c.Message)
	}
	if taints, err := EffectiveTaints(readRow(t, st, "direct")); err != nil || len(taints) != 1 || taints[0].Key != "maintenance" {
		t.Fatalf("effective taints of a Ready cluster: %+v, %v", taints, err)
	}

	// A kube-apiserver that answers, but not 200, is not ready; here it
	// refuses a wrong token.
	bad := c.RESTConfig()
	bad.BearerToken = "not-the-token"
	p, err := probe.New(bad, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Probe(ctx); got.Outcome != probe.NotReady || got.Detail != "/readyz answered 401: Unauthorized" {
		t.Fatalf("probe with a wrong token: %+v", got)
	}

	// An agent that reported once and then fell silent: NotReady; once
	// it reports again, Ready.
	waitReady(t, st, "with-agent", metav1.ConditionFalse, ReasonAgentLeaseExpired)
	if got := readStatus(t, st, "with-agent").Taints; len(got) != 1 || got[0].Key != v1alpha1.TaintNotReady {
		t.Fatalf("with-agent, lease expired: taints %+v", got)
	}
	fresh := time.Now()
	if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.Agents().Touch(ctx, "with-agent", &fresh, nil, nil) }); err != nil {
		t.Fatal(err)
	}
	waitReady(t, st, "with-agent", metav1.ConditionTrue, ReasonReady)
	if c := ReadyCondition(readStatus(t, st, "with-agent")); c.Message != "kube-apiserver ready and agent reporting" {
		t.Fatalf("with-agent: message %q", c.Message)
	}

	// Flapping faster than the failure threshold: the proxy is cut, and
	// restored by the monitor's own goroutine as soon as a probe through it
	// failed, before the next pass; it is cut again after a probe
	// succeeded. So probes fail one at a time, five times over. The
	// condition does not move, and nothing is written.
	before := readStatus(t, st, "flappy")
	beforeEntries := auditOf(t, st, "flappy")
	m1.onFailure("flappy", func() {
		if err := proxy.Restore(); err != nil {
			panic(err)
		}
	})
	for range 5 {
		proxy.Cut()
		m1.waitProbe(t, "flappy", probe.Unreachable)
		m1.waitProbe(t, "flappy", probe.OK)
	}
	m1.onFailure("flappy", nil)
	m1.waitPasses(t, 3)
	if after := readStatus(t, st, "flappy"); !bytes.Equal(mustJSON(after), mustJSON(before)) {
		t.Fatalf("flapping changed the status:\nbefore %s\n after %s", mustJSON(before), mustJSON(after))
	}
	if got := auditOf(t, st, "flappy"); len(got) != len(beforeEntries) {
		t.Fatalf("flapping wrote %d audit entries: %v", len(got)-len(beforeEntries), summaries(got[len(beforeEntries):]))
	}

	// The kube-apiserver stops: Unknown with the unreachable NoSchedule
	// taint, then NoExecute once the grace period has passed.
	c.StopAPIServer()
	waitReady(t, st, "direct", metav1.ConditionUnknown, ReasonAPIServerUnreachable)
	sandboxtest.Eventually(t, wait, "direct gets the NoExecute taint", func(ctx context.Context) error {
		return hasTaints(readStatus(t, st, "direct"), v1alpha1.TaintUnreachable+":NoSchedule", v1alpha1.TaintUnreachable+":NoExecute")
	})
	status = readStatus(t, st, "direct")
	if c := ReadyCondition(status); !strings.HasPrefix(c.Message, "kube-apiserver unreachable for 3 probes: ") ||
		!strings.Contains(c.Message, "connection refused") {
		t.Fatalf("direct, unreachable: message %q", c.Message)
	}
	if status.Inventory == nil || status.Inventory.Objects != 5 {
		t.Fatalf("the monitor dropped a field it does not own: %+v", status)
	}

	// A restarted controller resumes: no write, as long as nothing changes.
	m1.stop()
	entries := auditOf(t, st, "direct")
	m2 := startMonitor(t, st, sealer)
	m2.waitPasses(t, 2*fastPolicy.FailureThreshold)
	if got := auditOf(t, st, "direct"); len(got) != len(entries) {
		t.Fatalf("a restarted monitor rewrote the health of an unreachable cluster: %v", summaries(got[len(entries):]))
	}

	// The kube-apiserver is back: Ready, and no purser taint is left.
	if err := c.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	waitReady(t, st, "direct", metav1.ConditionTrue, ReasonReady)
	if got := readStatus(t, st, "direct").Taints; len(got) != 0 {
		t.Fatalf("taints left on a Ready cluster: %+v", got)
	}
	m2.stop()

	checkAuditTrail(t, auditOf(t, st, "direct"))
}

// checkAuditTrail checks the story the audit log tells of "direct": first
// judged, Ready, unreachable with NoSchedule, NoExecute after the grace,
// Ready again without taints; each entry by the controller. The three
// names share one cluster and no zone, so their outage is the whole
// farm's, which the Disrupted condition says (cluster-disruption
// entries). Stopping and
// starting a kube-apiserver may pass through not ready (it answers 500
// while it shuts down or starts), so other entries may come between.
func checkAuditTrail(t *testing.T, entries []*audit.Entry) {
	t.Helper()
	t.Logf("audit trail of direct:\n  %s", strings.Join(summaries(entries), "\n  "))
	for _, e := range entries {
		if e.Actor != Actor || e.Kind != v1alpha1.KindCluster || e.Name != "direct" ||
			e.Action != ActionCondition && e.Action != ActionTaint && e.Action != ActionDisruption {
			t.Fatalf("audit entry %+v", e)
		}
	}
	if e := entries[0]; e.Outcome != ReasonNotProbedYet || !strings.HasPrefix(e.Summary, "Ready none -> Unknown (NotProbedYet)") {
		t.Fatalf("first entry %+v", e)
	}
	if e := entries[1]; e.Action != ActionCondition || e.Summary != "Ready Unknown -> True (ClusterReady): "+
		"kube-apiserver ready; no agent has reported yet; taints removed purser.io/not-ready:NoSchedule" {
		t.Fatalf("second entry %+v", e)
	}
	noSchedule := slices.IndexFunc(entries, func(e *audit.Entry) bool {
		return e.Action == ActionCondition && e.Outcome == ReasonAPIServerUnreachable && added(e, v1alpha1.TaintUnreachable+":NoSchedule")
	})
	noExecute := slices.IndexFunc(entries, func(e *audit.Entry) bool { return added(e, v1alpha1.TaintUnreachable+":NoExecute") })
	if noSchedule < 2 || noExecute < noSchedule {
		t.Fatalf("want the unreachable NoSchedule taint (entry %d), then NoExecute (entry %d)", noSchedule, noExecute)
	}
	// NoExecute came once the grace period had passed since the
	// condition's lastTransitionTime.
	e := entries[noExecute]
	var d struct{ Ready v1alpha1.Condition }
	if err := json.Unmarshal(e.Details, &d); err != nil {
		t.Fatal(err)
	}
	if gap := e.Time.Sub(d.Ready.LastTransitionTime); gap < fastPolicy.NoExecuteGrace {
		t.Errorf("NoExecute %s after the transition, before the %s grace", gap, fastPolicy.NoExecuteGrace)
	}
	if last := entries[len(entries)-1]; last.Outcome != ReasonReady || !strings.Contains(last.Summary, "-> True (ClusterReady)") ||
		!strings.Contains(last.Summary, "; taints removed ") {
		t.Fatalf("last entry %+v: want Ready with the taints removed", last)
	}
}

// added reports whether e's summary says taint (key:Effect) was added.
func added(e *audit.Entry, taint string) bool {
	for part := range strings.SplitSeq(e.Summary, "; ") {
		if list, ok := strings.CutPrefix(part, "taints added "); ok && slices.Contains(strings.Split(list, ", "), taint) {
			return true
		}
	}
	return false
}

// monitor is a HealthMonitor running for a test, with what it observed.
type monitor struct {
	cancel context.CancelFunc
	done   chan error

	mu     sync.Mutex
	passes int                        // observations of "direct", one per pass
	probes map[string][]probe.Outcome // by cluster, in order
	wake   chan struct{}
	// react runs on the monitor's goroutine when a probe of the cluster
	// failed, before the next pass.
	react map[string]func()
}

// onFailure sets (nil: clears) what to do when a probe of cluster fails.
func (m *monitor) onFailure(cluster string, f func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.react[cluster] = f
}

func startMonitor(t *testing.T, st *store.Store, sealer *seal.Sealer) *monitor {
	t.Helper()
	m := &monitor{done: make(chan error, 1), probes: map[string][]probe.Outcome{}, wake: make(chan struct{}), react: map[string]func(){}}
	observed := func(cluster string, o Observation, _ State) {
		m.mu.Lock()
		react := m.react[cluster]
		m.mu.Unlock()
		if react != nil && o.Probe.Outcome != probe.OK {
			react()
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		if cluster == "direct" {
			m.passes++
		}
		m.probes[cluster] = append(m.probes[cluster], o.Probe.Outcome)
		close(m.wake)
		m.wake = make(chan struct{})
	}
	hm := NewHealthMonitor(Config{
		Store: st, Sealer: sealer, Policy: fastPolicy, Interval: fastInterval, Observed: observed,
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go func() { m.done <- hm.Run(ctx) }()
	t.Cleanup(m.stop)
	return m
}

// stop stops the monitor and checks that Run returned nil.
func (m *monitor) stop() {
	if m.cancel == nil {
		return
	}
	m.cancel()
	m.cancel = nil
	if err := <-m.done; err != nil {
		panic(fmt.Sprintf("health monitor: %v", err))
	}
}

// waitFor waits until cond, evaluated under the lock on every observation,
// holds.
func (m *monitor) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(wait)
	for {
		m.mu.Lock()
		ok, wake := cond(), m.wake
		m.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-wake:
		case <-deadline:
			t.Fatalf("%s: not seen within %s", what, wait)
		}
	}
}

// waitProbe waits for the next probe of cluster with outcome.
func (m *monitor) waitProbe(t *testing.T, cluster string, outcome probe.Outcome) {
	t.Helper()
	m.mu.Lock()
	from := len(m.probes[cluster])
	m.mu.Unlock()
	m.waitFor(t, fmt.Sprintf("probe %d of %s", outcome, cluster), func() bool {
		return slices.Contains(m.probes[cluster][from:], outcome)
	})
}

// waitPasses waits for n more passes.
func (m *monitor) waitPasses(t *testing.T, n int) {
	t.Helper()
	m.mu.Lock()
	target := m.passes + n
	m.mu.Unlock()
	m.waitFor(t, fmt.Sprintf("%d passes", n), func() bool { return m.passes >= target })
}

func readRow(t *testing.T, st *store.Store, name string) *store.Cluster {
	t.Helper()
	var row *store.Cluster
	if err := st.Read(t.Context(), func(tx *store.Tx) (err error) { row, err = tx.Clusters().Get(t.Context(), name); return }); err != nil {
		t.Fatal(err)
	}
	return row
}

func readStatus(t *testing.T, st *store.Store, name string) v1alpha1.ClusterStatus {
	t.Helper()
	var status v1alpha1.ClusterStatus
	if row := readRow(t, st, name); len(row.Status) > 0 {
		if err := json.Unmarshal(row.Status, &status); err != nil {
			t.Fatal(err)
		}
	}
	return status
}

func waitReady(t *testing.T, st *store.Store, name string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	sandboxtest.Eventually(t, wait, fmt.Sprintf("%s Ready %s (%s)", name, status, reason), func(ctx context.Context) error {
		c := ReadyCondition(readStatus(t, st, name))
		if c == nil || c.Status != status || c.Reason != reason {
			return fmt.Errorf("condition %+v", c)
		}
		return nil
	})
}

// hasTaints reports, as an error, whether status's taints are not exactly
// want (key:Effect, in order).
func hasTaints(status v1alpha1.ClusterStatus, want ...string) error {
	var got []string
	for _, t := range status.Taints {
		if t.TimeAdded == nil {
			return fmt.Errorf("taint %s without timeAdded", t.Key)
		}
		got = append(got, t.Key+":"+string(t.Effect))
	}
	if !slices.Equal(got, want) {
		return errors.New("taints " + strings.Join(got, ", "))
	}
	return nil
}

func auditOf(t *testing.T, st *store.Store, name string) []*audit.Entry {
	t.Helper()
	var out []*audit.Entry
	err := st.Read(t.Context(), func(tx *store.Tx) (err error) {
		out, err = tx.Audit().List(t.Context(), store.AuditFilter{Kind: v1alpha1.KindCluster, Name: name})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func summaries(es []*audit.Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, fmt.Sprintf("%s %s %s: %s", e.Time.Format("15:04:05.000"), e.Action, e.Outcome, e.Summary))
	}
	return out
}
