package soak

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/platform/reconcile"
	"github.com/purser-io/purser/test/soak/farm"
)

// ackLog is a writer of the farm: it changes one ConfigMap deployable as
// fast as the API lets it, each change a new generation, and remembers
// every generation the API acknowledged and when.
type ackLog struct {
	api  *farm.Client
	ns   string
	name string

	mu    sync.Mutex
	acked []ackedGen
}

type ackedGen struct {
	gen int
	at  time.Time
}

func (l *ackLog) run(ctx context.Context) {
	for gen := 1; ctx.Err() == nil; gen++ {
		body := map[string]any{
			"apiVersion": v1alpha1.GroupVersion, "kind": v1alpha1.KindDeployable,
			"metadata": map[string]any{"namespace": l.ns, "name": l.name},
			"spec": map[string]any{"template": map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": l.name},
				"data": map[string]any{"generation": strconv.Itoa(gen)},
			}},
		}
		r := l.api.Call(ctx, http.MethodPut, "/api/v1/deployables/"+l.ns+"/"+l.name, nil, body, nil)
		if r.OK() {
			l.mu.Lock()
			l.acked = append(l.acked, ackedGen{gen: gen, at: time.Now()})
			l.mu.Unlock()
		}
		reconcile.Sleep(ctx, 50*time.Millisecond)
	}
}

// last is the newest acknowledged generation, and the first one
// acknowledged after t (0 when none).
func (l *ackLog) since(t time.Time) (last ackedGen, first ackedGen) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, a := range l.acked {
		if a.at.Before(t) {
			last = a
		} else if first.gen == 0 {
			first = a
		}
	}
	return last, first
}

// longestGap is the longest time without an acknowledged write since t.
func (l *ackLog) longestGap(t time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var longest time.Duration
	prev := t
	for _, a := range l.acked {
		if a.at.Before(t) {
			continue
		}
		longest = max(longest, a.at.Sub(prev))
		prev = a.at
	}
	return max(longest, time.Since(prev))
}

// stored reads the generation the source of truth holds.
func (l *ackLog) stored(ctx context.Context) (int, error) {
	var d v1alpha1.Deployable
	if code, err := l.api.Do(ctx, http.MethodGet, "/api/v1/deployables/"+l.ns+"/"+l.name, nil, nil, &d); code != http.StatusOK {
		return 0, callError("get deployable", code, err)
	}
	data, _ := d.Spec.Template["data"].(map[string]any)
	gen, _ := data["generation"].(string)
	return strconv.Atoi(gen)
}

// TestDCPrimaryLoss powers off the DC of PostgreSQL's primary under a
// stream of acknowledged writes: a surviving DC accepts writes again
// (Patroni promotes the synchronous standby, the components find it
// through their multi-host DSN), and the newest write acknowledged before
// the loss is still there (RPO 0), as is the database once the DC comes
// back (the old primary rejoins as a standby).
func TestDCPrimaryLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the three-DC farm")
	}
	ctx := t.Context()
	f, _ := startDCFarm(ctx, t, keptDir(t), nil, nil)
	primary, err := f.Primary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := &ackLog{api: f.API, ns: "dc-faults", name: "acked"}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); w.run(wctx) }()
	defer func() { stop(); <-done }()
	waitAcked(t, w, time.Now(), "before the fault")
	primaries := f.WatchPrimaries(ctx, 100*time.Millisecond)
	defer primaries.Stop()
	etcdLeader := "unknown"
	if dc, err := f.EtcdLeader(ctx); err == nil {
		etcdLeader = dc.Name
	}

	fault := time.Now()
	t.Logf("%s power off %s, the primary's DC (the DCS's etcd leader: %s)", stamp(), primary.Name, etcdLeader)
	f.PowerOff(primary)
	first := waitAcked(t, w, fault, "after the primary's DC lost power")
	before, _ := w.since(fault)
	promoted, ok := primaries.PromotedAfter(fault, primary)
	if !ok {
		t.Fatalf("a write was accepted %s after the loss, but no node was seen promoted", first.at.Sub(fault))
	}
	t.Logf("RTO: first write accepted %s after the power loss (by generation %d): %s promoted after %s, the first write %s later",
		first.at.Sub(fault).Round(100*time.Millisecond), first.gen, promoted.DC.Name,
		promoted.At.Sub(fault).Round(100*time.Millisecond), first.at.Sub(promoted.At).Round(100*time.Millisecond))
	next, err := f.Primary(ctx)
	if err != nil || next == primary {
		t.Fatalf("primary after the loss: %v, %v", next, err)
	}
	checkRPO(t, w, before)

	// The lost DC's return: its node rejoins as a standby (rewound or
	// copied again) while the writes go on; a stall then is logged with
	// what the database waited for.
	back := time.Now()
	sctx, stopStalls := context.WithCancel(ctx)
	stalls := watchStalls(sctx, t, f, func() time.Time { last, _ := w.since(time.Now()); return last.at })
	if err := f.PowerOn(ctx, primary, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.EnsureRunning(ctx); err != nil {
		t.Fatal(err)
	}
	reconcile.Sleep(ctx, 20*time.Second)
	stopStalls()
	t.Logf("after %s came back (%s ago), the longest wait between accepted writes: %s",
		primary.Name, time.Since(back).Round(time.Second), w.longestGap(back).Round(100*time.Millisecond))
	for _, st := range stalls.finish() {
		t.Logf("write stall of %.1f s from %s: %v", st.To.Sub(st.From).Seconds(), st.From.UTC().Format("15:04:05"), st.Seen)
	}
	last, _ := w.since(time.Now())
	checkRPO(t, w, last)
	if two := primaries.TwoPrimaries(); len(two) > 0 {
		t.Errorf("two PostgreSQL nodes accepted writes at once (of %d rounds):\n  %s", primaries.Rounds(), strings.Join(two, "\n  "))
	}
}

// waitAcked waits for a write acknowledged after t.
func waitAcked(t *testing.T, w *ackLog, t0 time.Time, what string) ackedGen {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if _, first := w.since(t0); first.gen != 0 {
			return first
		}
		if time.Now().After(deadline) {
			t.Fatalf("no write acknowledged %s within 3 minutes", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkRPO: the source of truth holds a generation at least as new as
// one acknowledged (a later one may have been stored with its answer
// lost).
func checkRPO(t *testing.T, w *ackLog, acked ackedGen) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	gen, err := w.stored(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if gen < acked.gen {
		t.Errorf("acknowledged write lost: generation %d was acknowledged at %s, the database holds %d",
			acked.gen, acked.at.Format("15:04:05.000"), gen)
	}
}
