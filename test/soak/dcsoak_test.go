package soak

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/api/server"
	"github.com/purser-io/purser/internal/platform/reconcile"
	"github.com/purser-io/purser/test/soak/farm"
)

// The DC soak: the soak's steady load on the three-DC farm
// (test/soak/farm, DCFarm) while faults rotate, among them faults of a
// whole data center: a DC powered off, a DC partitioned, and the DC of
// the database's primary lost. At the end the soak's checks of docs/architecture.md's
// invariants, plus: no AtMostOne runnable ever had two live copies (seen
// by a watcher of every cluster from outside the DCs), no acknowledged
// write lost, and per fault the time until a surviving DC accepted a
// write (RTO) and until the first runnable moved out of the DC.

// The short run of `make test` keeps the whole-DC faults it had; the
// harder ones (one-way cuts, slow and lossy links, clock steps, a full
// NATS disk) run in `make soak-dc` (-soak.dc-faults=all) until what the
// first runs found with them is fixed (docs/soak.md).
var dcSoakFaults = flag.String("soak.dc-faults", faultDCPower+","+faultDCPartition+","+faultPrimaryLoss+",kill-purser,kill-nats,apiserver-stop,agent-cut",
	"the kinds of fault the DC soak injects, comma separated; all: every kind")

// allDCFaults is every kind of fault the DC soak knows.
var allDCFaults = append(slices.Clone(dcLevelFaults), faultNATSDisk, faultKillPurser, faultKillNATS, faultAPIServer, faultAgentCut)

// The DC faults, as the summary counts them.
const (
	faultDCPower     = "dc-power-off"
	faultDCPartition = "dc-partition"
	faultPrimaryLoss = "primary-dc-lost"
	// A DC's links cut one way: what it sends is dropped (the others,
	// the hub's replicas among them, reach it but hear nothing back), or
	// what is sent to it is.
	faultOneWayOut = "dc-oneway-out"
	faultOneWayIn  = "dc-oneway-in"
	// A DC's links slow (hundreds of ms each way, jittered) and lossy (a
	// few percent of packets, both ways).
	faultSlowLinks = "dc-slow-lossy"
	// A NATS node's store filled by a file until its writes fail.
	faultNATSDisk = "nats-disk-full"
	// The wall clock of a DC's PostgreSQL stepped by minutes, forward or
	// back, then put right: the database's time when it is the primary
	// (test/soak/farm/clock.go says what is and is not stepped).
	faultClockStep = "dc-clock-step"
)

// dcLevelFaults are the faults of a whole DC's power or network, the
// ones `make soak-dc` must rotate at least 100 of in 2 hours.
var dcLevelFaults = []string{faultDCPower, faultDCPartition, faultPrimaryLoss, faultOneWayOut, faultOneWayIn, faultSlowLinks, faultClockStep}

// dcLevelShare is the share of the DC-level faults among those drawn
// after the first round. A DC-level fault takes about a minute with the
// pause before it and the farm's return to whole (a power loss 80 s, a
// one-way cut, a slow link or a clock step 45–50 s), one of the others
// about 35 s (the runs of docs/soak.md): 2 hours hold about 125 faults,
// about 110 of them DC-level, which `make soak-dc SOAK_DURATION=2h` needs
// to be 100 or more (the summary counts them).
const dcLevelShare = 0.9

// The namespaces of the DC soak, apart from the other soak's, whose
// objects may still be on the shared clusters.
var dcNamespaces = []string{"dcsoak-a", "dcsoak-b"}

// The schedule the DC soak keeps firing, in a namespace of its own (its
// runs are not the workload's).
const dcScheduleNS, dcSchedule = "dcsoak-schedule", "soak-minute"

func TestDCSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("the DC soak takes minutes")
	}
	seed := *soakSeed
	if seed == 0 {
		seed = time.Now().UnixNano() % 1_000_000
	}
	t.Logf("dc soak: %s of load and faults, seed %d (rerun with -soak.seed=%d)", *soakDuration, seed, seed)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := keptDir(t)
	kinds := strings.Split(*dcSoakFaults, ",")
	if *dcSoakFaults == "all" {
		kinds = allDCFaults
	}
	f, clusters := startDCFarm(ctx, t, dir, withSchedules(dir, controllerArgs), agentArgs, func(cfg *farm.DCConfig) {
		cfg.SteppableClocks = slices.ContainsFunc(kinds, func(k string) bool { return strings.TrimSpace(k) == faultClockStep })
	})
	for _, c := range clusters {
		for _, ns := range append(slices.Clone(dcNamespaces), dcScheduleNS) {
			if err := c.EnsureNamespace(ctx, ns); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A schedule firing each minute through the faults: one run per tick.
	firstTick := putMinuteSchedule(t, f.API, dcScheduleNS, dcSchedule)
	w := newWorkload(f.API, seed, dcNamespaces)
	watch, err := newLiveWatcher(ctx, f, dcNamespaces)
	if err != nil {
		t.Fatal(err)
	}
	inj := newDCInjector(t, f, w, seed, kinds)
	primaries := f.WatchPrimaries(ctx, 250*time.Millisecond)
	loadCtx, loadDone := context.WithTimeout(ctx, *soakDuration)
	defer loadDone()
	stalls := watchStalls(loadCtx, t, f, w.lastAck)

	rep := loadAndSettle(ctx, t, "dc soak", f, clusters, w, inj, seed)
	watch.stop()
	primaries.Stop()
	dr := &dcReport{report: rep, faults: inj.faults(), stalls: stalls.finish()}
	dr.TwoLive, dr.TwoLiveDetails = watch.violations()
	dr.TwoPrimaries, dr.PrimaryRounds = primaries.TwoPrimaries(), primaries.Rounds()
	for i, fl := range dr.faults {
		p, ok := primaries.PromotedAfter(fl.At, fl.DC)
		if ok && fl.Kind == faultPrimaryLoss && (i+1 == len(dr.faults) || p.At.Before(dr.faults[i+1].At)) {
			fl.Promoted = p.At.Sub(fl.At)
		}
	}
	dr.measure(ctx, t, f, w)
	lastTick := nextMinute(time.Now())
	waitTick(t, f, dcScheduleNS, dcSchedule, lastTick, "the schedule's tick after the soak")
	dr.Schedule = countTicks(t, f, dcScheduleNS, dcSchedule, firstTick, lastTick)
	summary := dr.String()
	t.Log("\n" + summary)
	fmt.Println(summary)
	writeArtifactAs(t, "dc-summary.txt", summary)
	for _, v := range dr.Violations() {
		t.Error(v)
	}
}

// dcFault is one fault the DC soak injected.
type dcFault struct {
	Kind    string
	DC      *farm.DC // the DC it hit; for apiserver-stop, the cluster's DC
	At, End time.Time
	// RTO: from At to the first write sent after it that a surviving DC
	// accepted; Moved: from At to the first placement elsewhere of a
	// runnable evicted from DC's cluster before the next fault began (the
	// faults come one at a time, so a later move is another fault's).
	// Zero: none seen.
	RTO, Moved time.Duration
	// Promoted: from At to a node of another DC seen accepting writes,
	// when the fault took the primary's DC: Patroni's part of the RTO.
	Promoted time.Duration
	// Recovered: from End (the fault undone) to the farm whole again:
	// every process up, etcd, PostgreSQL with its synchronous standby,
	// NATS current and every API ready. Zero: not measured.
	Recovered time.Duration
	// Fenced: objects each cluster's agent fenced from At until the farm
	// was whole again, by cluster; Evicted: runnables the controller
	// evicted from each cluster in the same span (measure).
	Fenced, Evicted map[string]int
	// Did says what else happened, for the summary (a NATS node that
	// disabled its JetStream, say).
	Did string
	// agentLogs: where each agent's log stood at At (farm.Process.LogSize).
	agentLogs []int64
}

// fencedWithoutNeed counts the objects fenced on a cluster from which
// nothing was evicted meanwhile: the agent stopped work that the control
// plane never moved (the controller resumes it, but it stopped).
func (fl *dcFault) fencedWithoutNeed() int {
	n := 0
	for cluster, k := range fl.Fenced {
		if fl.Evicted[cluster] == 0 {
			n += k
		}
	}
	return n
}

func (fl *dcFault) fenced() int {
	n := 0
	for _, k := range fl.Fenced {
		n += k
	}
	return n
}

// dcInjector rotates the faults: one loop kills purser components, as
// the other soak does; another takes down, one at a time, a whole DC (by
// power or by partition, or the primary's), a NATS node, a kube-apiserver
// or an agent, and waits until the farm is whole again before the next.
type dcInjector struct {
	t       *testing.T
	f       *farm.DCFarm
	w       *workload
	rng     *rand.Rand
	procRng *rand.Rand
	enabled map[string]bool

	mu  sync.Mutex
	n   map[string]int
	log []*dcFault
}

func newDCInjector(t *testing.T, f *farm.DCFarm, w *workload, seed int64, kinds []string) *dcInjector {
	enabled := map[string]bool{}
	for _, k := range kinds {
		switch k = strings.TrimSpace(k); k {
		case faultDCPower, faultDCPartition, faultPrimaryLoss, faultOneWayOut, faultOneWayIn, faultSlowLinks, faultClockStep, faultNATSDisk,
			faultKillPurser, faultKillNATS, faultAPIServer, faultAgentCut:
			enabled[k] = true
		case "":
		default:
			t.Fatalf("unknown fault %q in -soak.dc-faults", k)
		}
	}
	// The seed decides which packets a lossy link drops and each one's
	// jitter, as it decides the faults.
	f.WAN.Seed(uint64(seed))
	return &dcInjector{t: t, f: f, w: w, enabled: enabled, n: map[string]int{},
		rng: rand.New(rand.NewPCG(uint64(seed), 5)), procRng: rand.New(rand.NewPCG(uint64(seed), 6))}
}

func (in *dcInjector) run(ctx context.Context) {
	var wg sync.WaitGroup
	if in.enabled[faultKillPurser] {
		wg.Go(func() { in.killComponents(ctx) })
	}
	wg.Go(func() { in.breakInfrastructure(ctx) })
	wg.Wait()
}

func (in *dcInjector) begin(kind string, dc *farm.DC, format string, args ...any) *dcFault {
	fl := &dcFault{Kind: kind, DC: dc, At: time.Now()}
	if kind != faultKillPurser {
		for _, d := range in.f.DCs {
			fl.agentLogs = append(fl.agentLogs, d.Agent.LogSize())
		}
	}
	in.mu.Lock()
	in.n[kind]++
	if kind != faultKillPurser {
		in.log = append(in.log, fl)
	}
	in.mu.Unlock()
	in.t.Logf("%s fault %s: %s", stamp(), kind, fmt.Sprintf(format, args...))
	return fl
}

func (in *dcInjector) counts() map[string]int {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := map[string]int{}
	for k, v := range in.n {
		out[k] = v
	}
	return out
}

func (in *dcInjector) faults() []*dcFault {
	in.mu.Lock()
	defer in.mu.Unlock()
	return slices.Clone(in.log)
}

// killComponents kills a random purser component of a powered DC every
// few seconds and starts it again a few seconds later, unless its DC has
// lost power meanwhile (then its power-on starts it).
func (in *dcInjector) killComponents(ctx context.Context) {
	for {
		if !reconcile.Sleep(ctx, between(in.procRng, 5*time.Second, 10*time.Second)) {
			return
		}
		dc := in.f.DCs[in.procRng.IntN(len(in.f.DCs))]
		p := dc.Components[in.procRng.IntN(len(dc.Components))]
		if !dc.Powered() || !p.Running() {
			continue
		}
		down := between(in.procRng, 2*time.Second, 5*time.Second)
		in.begin(faultKillPurser, dc, "kill -9 %s (pid %d), back in %s", p.Name, p.Pid(), down.Round(100*time.Millisecond))
		p.Kill()
		reconcile.Sleep(ctx, down)
		if err := in.f.StartIfPowered(dc, p); err != nil {
			in.t.Errorf("restart %s: %v", p.Name, err)
		}
	}
}

func (in *dcInjector) breakInfrastructure(ctx context.Context) {
	var dcKinds, others []string
	for _, k := range dcLevelFaults {
		if in.enabled[k] {
			dcKinds = append(dcKinds, k)
		}
	}
	for _, k := range []string{faultNATSDisk, faultKillNATS, faultAPIServer, faultAgentCut} {
		if in.enabled[k] {
			others = append(others, k)
		}
	}
	if len(dcKinds)+len(others) == 0 {
		return
	}
	// Every DC kind first, and the full NATS disk (drawn rarely after,
	// among the others), in a random order; then everything at random.
	order := slices.Clone(dcKinds)
	if in.enabled[faultNATSDisk] {
		order = append(order, faultNATSDisk)
	}
	in.rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	for i := 0; ; i++ {
		if !reconcile.Sleep(ctx, between(in.rng, 3*time.Second, 8*time.Second)) {
			return
		}
		var kind string
		switch {
		case i < len(order):
			kind = order[i]
		case len(others) == 0 || len(dcKinds) > 0 && in.rng.Float64() < dcLevelShare:
			kind = dcKinds[in.rng.IntN(len(dcKinds))]
		default:
			kind = others[in.rng.IntN(len(others))]
		}
		fl := in.inject(ctx, kind)
		// Whole again before the next: two DCs down at once is more than
		// three DCs survive.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
		start := time.Now()
		if err := in.f.EnsureRunning(rctx); err != nil {
			in.t.Errorf("the farm after %s: %v", kind, err)
		} else {
			in.t.Logf("%s fault %s: farm whole again %s after the fault ended", stamp(), kind, time.Since(start).Round(100*time.Millisecond))
			if fl != nil && !fl.End.IsZero() {
				fl.Recovered = time.Since(fl.End)
			}
		}
		cancel()
		if fl != nil && fl.agentLogs != nil {
			fl.Fenced = map[string]int{}
			for i, d := range in.f.DCs {
				// The agent's log of each object it fenced ("fenced",
				// internal/member/agent/fence.go).
				if n := d.Agent.CountLogged(fl.agentLogs[i], "msg=fenced "); n > 0 {
					fl.Fenced[d.Cluster.Name()] = n
				}
			}
		}
	}
}

// inject applies one fault and undoes it; it returns once undone, with
// the fault (nil when it could not be injected).
func (in *dcInjector) inject(ctx context.Context, kind string) (fl *dcFault) {
	f := in.f
	undo := context.WithoutCancel(ctx)
	switch kind {
	case faultDCPower, faultPrimaryLoss:
		dc := f.DCs[in.rng.IntN(len(f.DCs))]
		primary, err := f.Primary(undo)
		if err != nil {
			in.t.Errorf("the primary's DC: %v", err)
			return nil
		}
		if kind == faultPrimaryLoss {
			dc = primary
		} else if dc == primary {
			dc = f.DCs[(dc.Index+1)%len(f.DCs)] // a DC without the primary
		}
		down := between(in.rng, 30*time.Second, 40*time.Second)
		fl = in.begin(kind, dc, "power off %s (%s) for %s", dc.Name, in.databaseRoles(undo), down.Round(time.Second))
		f.PowerOff(dc)
		reconcile.Sleep(ctx, down)
		fl.End = time.Now()
		pctx, cancel := context.WithTimeout(undo, 5*time.Minute)
		defer cancel()
		if err := f.PowerOn(pctx, dc, func(ctx context.Context) error { return in.waitFenced(ctx, dc) }); err != nil {
			in.t.Errorf("power on %s: %v", dc.Name, err)
		}
	case faultDCPartition:
		dc := f.DCs[in.rng.IntN(len(f.DCs))]
		down := between(in.rng, 30*time.Second, 40*time.Second)
		fl = in.begin(kind, dc, "partition %s for %s (%s)", dc.Name, down.Round(time.Second), in.databaseRoles(undo))
		f.Partition(dc)
		reconcile.Sleep(ctx, down)
		fl.End = time.Now()
		f.Heal(dc)
	case faultOneWayOut, faultOneWayIn:
		dc := f.DCs[in.rng.IntN(len(f.DCs))]
		down := between(in.rng, 20*time.Second, 35*time.Second)
		way := "what it sends is dropped: the others reach it, it reaches none"
		if kind == faultOneWayIn {
			way = "what is sent to it is dropped: it reaches the others, none reaches it"
		}
		fl = in.begin(kind, dc, "cut %s one way for %s, %s (%s)", dc.Name, down.Round(time.Second), way, in.databaseRoles(undo))
		if kind == faultOneWayOut {
			f.CutOut(dc)
		} else {
			f.CutIn(dc)
		}
		reconcile.Sleep(ctx, down)
		fl.End = time.Now()
		f.Heal(dc)
	case faultSlowLinks:
		dc := f.DCs[in.rng.IntN(len(f.DCs))]
		down := between(in.rng, 20*time.Second, 35*time.Second)
		lf := farm.LinkFault{Delay: between(in.rng, 100*time.Millisecond, 300*time.Millisecond),
			Jitter: between(in.rng, 100*time.Millisecond, 200*time.Millisecond), Loss: 0.01 + 0.04*in.rng.Float64()}
		fl = in.begin(kind, dc, "slow every link of %s, both ways, for %s: %s (%s)", dc.Name, down.Round(time.Second), lf, in.databaseRoles(undo))
		f.SlowLinks(dc, lf)
		reconcile.Sleep(ctx, down)
		fl.End = time.Now()
		f.Heal(dc)
	case faultClockStep:
		// The primary's DC half the time: its clock is the database's.
		dc := f.DCs[in.rng.IntN(len(f.DCs))]
		if in.rng.IntN(2) == 0 {
			if primary, err := f.Primary(undo); err == nil {
				dc = primary
			}
		}
		step := between(in.rng, 2*time.Minute, 5*time.Minute)
		if in.rng.IntN(2) == 0 {
			step = -step
		}
		down := between(in.rng, 20*time.Second, 35*time.Second)
		fl = in.begin(kind, dc, "step the wall clock of %s's PostgreSQL by %+.0f s for %s, then back (%s)", dc.Name, step.Seconds(), down.Round(time.Second), in.databaseRoles(undo))
		if err := f.StepClock(dc, step); err != nil {
			in.t.Errorf("%v", err)
		}
		reconcile.Sleep(ctx, down)
		fl.End = time.Now()
		if err := f.StepClock(dc, 0); err != nil {
			in.t.Errorf("%v", err)
		}
	case faultNATSDisk:
		dc := in.poweredDC()
		down := between(in.rng, 20*time.Second, 30*time.Second)
		fl = in.begin(kind, dc, "fill the store of %s for %s", dc.NATS.Name, down.Round(time.Second))
		n, err := f.FillNATSDisk(dc)
		if err != nil {
			in.t.Errorf("fill the store of %s: %v", dc.NATS.Name, err)
		}
		in.t.Logf("%s fault %s: %s's store full after writing %d MiB", stamp(), kind, dc.NATS.Name, n>>20)
		reconcile.Sleep(ctx, down)
		fl.End = time.Now()
		if err := f.FreeNATSDisk(dc); err != nil {
			in.t.Errorf("free the store of %s: %v", dc.NATS.Name, err)
		}
		// A node whose writes failed for want of space shuts its
		// JetStream down and keeps it down when the space comes back:
		// its operator restarts it, and so does the soak.
		if dc.NATS.LoggedSinceStart("will be DISABLED") {
			fl.Did = "its JetStream disabled itself; the node was restarted once the disk was freed"
			in.t.Logf("%s fault %s: %s disabled its JetStream; restarting it", stamp(), kind, dc.NATS.Name)
			dc.NATS.Stop(5 * time.Second)
			if err := f.StartIfPowered(dc, dc.NATS); err != nil {
				in.t.Errorf("restart %s: %v", dc.NATS.Name, err)
			}
		}
	case faultKillNATS:
		dc := in.poweredDC()
		down := between(in.rng, 5*time.Second, 10*time.Second)
		fl = in.begin(kind, dc, "kill -9 %s for %s", dc.NATS.Name, down.Round(100*time.Millisecond))
		dc.NATS.Kill()
		reconcile.Sleep(ctx, down)
		fl.End = time.Now()
		if err := f.StartIfPowered(dc, dc.NATS); err != nil {
			in.t.Errorf("restart %s: %v", dc.NATS.Name, err)
		}
	case faultAPIServer:
		dc := in.poweredDC()
		down := between(in.rng, 20*time.Second, 30*time.Second)
		fl = in.begin(kind, dc, "stop the kube-apiserver of %s for %s", dc.Cluster.Name(), down.Round(time.Second))
		dc.Cluster.StopAPIServer()
		reconcile.Sleep(ctx, down)
		fl.End = time.Now()
		sctx, cancel := context.WithTimeout(undo, 2*time.Minute)
		defer cancel()
		if err := dc.Cluster.StartAPIServer(sctx); err != nil {
			in.t.Errorf("start the kube-apiserver of %s again: %v", dc.Cluster.Name(), err)
		}
	case faultAgentCut:
		dc := in.poweredDC()
		down := between(in.rng, 20*time.Second, 45*time.Second)
		fl = in.begin(kind, dc, "kill -9 %s for %s", dc.Agent.Name, down.Round(time.Second))
		dc.Agent.Kill()
		reconcile.Sleep(ctx, down)
		fl.End = time.Now()
		if err := f.StartIfPowered(dc, dc.Agent); err != nil {
			in.t.Errorf("restart %s: %v", dc.Agent.Name, err)
		}
	}
	return fl
}

// databaseRoles says where the primary and its synchronous standby are,
// for the log: losing either stalls commits until Patroni acts.
func (in *dcInjector) databaseRoles(ctx context.Context) string {
	primary, err := in.f.Primary(ctx)
	if err != nil {
		return "primary unknown"
	}
	standby, err := in.f.SyncStandby(ctx)
	if err != nil || standby == nil {
		return "primary in " + primary.Name + ", no synchronous standby"
	}
	return "primary in " + primary.Name + ", synchronous standby in " + standby.Name
}

func (in *dcInjector) poweredDC() *farm.DC {
	for {
		dc := in.f.DCs[in.rng.IntN(len(in.f.DCs))]
		if dc.Powered() {
			return dc
		}
	}
}

// waitFenced holds a powered-on DC's kubelets until its agent has fenced
// what it must: it has said whether it was away for longer than its lease
// and, if so, fenced the cluster's AtMostOne work, and every AtMostOne Job
// of its cluster whose runnable the farm has placed elsewhere meanwhile is
// suspended or gone. A machine that starts its agent before its kubelets
// does the same (docs).
func (in *dcInjector) waitFenced(ctx context.Context, dc *farm.DC) error {
	kube, err := dc.Cluster.Client()
	if err != nil {
		return err
	}
	start := time.Now()
	deadline := start.Add(2 * time.Minute)
	for !dc.Agent.LoggedSinceStart("nothing to fence on return", "fenced the AtMostOne work found on return") {
		if time.Now().After(deadline) {
			in.t.Errorf("%s powered on: its agent said nothing of its return within 2 minutes", dc.Name)
			return nil
		}
		if !reconcile.Sleep(ctx, 200*time.Millisecond) {
			return ctx.Err()
		}
	}
	for {
		var pending []string
		placedAt := map[string]string{} // runnable uid -> its cluster now
		err := func() error {
			lctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			for _, ns := range dcNamespaces {
				if err := list(lctx, in.f.API, "/api/v1/runnables", url.Values{"namespace": {ns}}, func(r *v1alpha1.Runnable) {
					placedAt[r.Metadata.UID] = r.Status.Cluster
				}); err != nil {
					return err
				}
				jobs, err := kube.BatchV1().Jobs(ns).List(lctx, atMostOneJobs)
				if err != nil {
					return err
				}
				for _, j := range jobs.Items {
					uid := j.Labels[v1alpha1.LabelRunnableUID]
					live := j.DeletionTimestamp == nil && (j.Spec.Suspend == nil || !*j.Spec.Suspend)
					if live && placedAt[uid] != dc.Cluster.Name() {
						pending = append(pending, ns+"/"+j.Name)
					}
				}
			}
			return nil
		}()
		if err == nil && len(pending) == 0 {
			in.t.Logf("%s %s: the agent fenced what moved away, %s after the control plane came back", stamp(), dc.Name, time.Since(start).Round(100*time.Millisecond))
			return nil
		}
		if time.Now().After(deadline) {
			in.t.Errorf("%s powered on: AtMostOne copies of runnables placed elsewhere still live after 2 minutes: %v (%v)", dc.Name, pending, err)
			return nil // the kubelets start anyway; the watcher counts what runs twice
		}
		if !reconcile.Sleep(ctx, 500*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// dcReport is the soak's report with the DC soak's figures.
type dcReport struct {
	*report
	faults         []*dcFault
	TwoLive        int
	TwoLiveDetails []string
	// TwoPrimaries: the rounds of farm.PrimaryWatch in which two
	// PostgreSQL nodes accepted writes, of PrimaryRounds.
	TwoPrimaries  []string
	PrimaryRounds int
	stalls        []*stall
	// AckedLost: accepted runnables not stored, and deployables whose
	// source of truth lost an accepted change.
	AckedLost int
	// Schedule: the runnables of a schedule firing each minute, per tick.
	Schedule tickCount
}

var (
	evictedFrom = regexp.MustCompile(`evicted from (\S+) \(`)
	// A placement, or a failover's placement (which names its source).
	placedOn = regexp.MustCompile(`placed attempt \d+ on (\S+):|failover of attempt \d+ from \S+ \(\S+\) to (\S+) as attempt`)
)

// measure computes each fault's RTO from the accepted writes and its
// moved-work time from the audit log.
func (d *dcReport) measure(ctx context.Context, t *testing.T, f *farm.DCFarm, w *workload) {
	d.AckedLost = d.Lost
	for _, p := range d.DeployableProblems {
		if strings.Contains(p, "the API holds") {
			d.AckedLost++
		}
	}
	w.mu.Lock()
	acks := slices.Clone(w.acks)
	w.mu.Unlock()
	type entry struct {
		at             time.Time
		object, action string
		cluster        string
	}
	var entries []entry
	for _, ns := range w.namespaces {
		for _, action := range []string{"evict", "place"} {
			q := url.Values{"namespace": {ns}, "kind": {v1alpha1.KindRunnable}, "action": {action}}
			if err := list(ctx, f.API, "/api/v1/history", q, func(e server.HistoryEntry) {
				re := placedOn
				if action == "evict" {
					re = evictedFrom
				}
				if m := re.FindStringSubmatch(e.Summary); m != nil {
					cluster := m[1]
					if cluster == "" && len(m) > 2 {
						cluster = m[2]
					}
					entries = append(entries, entry{at: e.Time, object: e.Object, action: action, cluster: cluster})
				}
			}); err != nil {
				t.Errorf("dc soak: read the history: %v", err)
				return
			}
		}
	}
	slices.SortFunc(entries, func(a, b entry) int { return a.at.Compare(b.at) })
	for i, fl := range d.faults {
		var next time.Time // the next fault's start; zero for the last
		if i+1 < len(d.faults) {
			next = d.faults[i+1].At
		}
		for _, a := range acks {
			if !a.sent.Before(fl.At) && a.replica != fl.DC.Index {
				if rto := a.at.Sub(fl.At); fl.RTO == 0 || rto < fl.RTO {
					fl.RTO = rto
				}
			}
		}
		lost := fl.DC.Cluster.Name()
		evicted := map[string]bool{}
		fl.Evicted = map[string]int{}
		for _, e := range entries {
			switch {
			case e.at.Before(fl.At):
			case !next.IsZero() && !e.at.Before(next):
			case e.action == "evict":
				fl.Evicted[e.cluster]++
				if e.cluster == lost {
					evicted[e.object] = true
				}
			case e.action == "place" && evicted[e.object] && e.cluster != lost:
				if fl.Moved == 0 {
					fl.Moved = e.at.Sub(fl.At)
				}
			}
		}
	}
}

// byKind is the per-kind table of docs/soak.md: how many were injected,
// what purser did (work moved out of the DC, objects its agent fenced),
// objects fenced without need, and the time from the fault's end to the
// farm whole again; the invariants (lost, duplicated, two-live) are the
// run's, on the last line.
func (d *dcReport) byKind(kinds []string, byKind map[string][]*dcFault) string {
	var b strings.Builder
	dcLevel := 0
	for _, k := range dcLevelFaults {
		dcLevel += len(byKind[k])
	}
	fmt.Fprintf(&b, "  by kind (%d DC-level faults): injected; runnables evicted from the DC's cluster (times work moved out); objects fenced (without need); from the fault's end to the farm whole again, median (max)\n", dcLevel)
	for _, kind := range kinds {
		fls := byKind[kind]
		if len(fls) == 0 {
			continue
		}
		var evicted, movedTimes, fenced, unneeded int
		var recovered []time.Duration
		for _, fl := range fls {
			evicted += fl.Evicted[fl.DC.Cluster.Name()]
			if fl.Moved > 0 {
				movedTimes++
			}
			fenced += fl.fenced()
			unneeded += fl.fencedWithoutNeed()
			if fl.Recovered > 0 {
				recovered = append(recovered, fl.Recovered)
			}
		}
		rec := "-"
		if len(recovered) > 0 {
			slices.Sort(recovered)
			rec = fmt.Sprintf("%s (%s)", seconds(recovered[len(recovered)/2]), seconds(recovered[len(recovered)-1]))
		}
		fmt.Fprintf(&b, "    %-16s %3d; evicted %d (moved out %d times); fenced %d (%d without need); whole again %s\n",
			kind, len(fls), evicted, movedTimes, fenced, unneeded, rec)
	}
	return b.String()
}

// Violations adds the DC soak's to the soak's.
func (d *dcReport) Violations() []string {
	v := d.report.Violations()
	if d.TwoLive > 0 {
		v = append(v, fmt.Sprintf("%d times an AtMostOne runnable had two live copies:\n  %s", d.TwoLive, strings.Join(d.TwoLiveDetails, "\n  ")))
	}
	if d.AckedLost > 0 {
		v = append(v, fmt.Sprintf("%d acknowledged writes lost", d.AckedLost))
	}
	if sv := d.Schedule.Violation(); sv != "" {
		v = append(v, sv)
	}
	if len(d.TwoPrimaries) > 0 {
		v = append(v, fmt.Sprintf("two PostgreSQL primaries in %d of %d rounds:\n  %s", len(d.TwoPrimaries), d.PrimaryRounds, strings.Join(d.TwoPrimaries, "\n  ")))
	}
	return v
}

func (d *dcReport) String() string {
	var b strings.Builder
	b.WriteString("dc " + d.report.String() + "\n")
	fmt.Fprintf(&b, "  faults of the DC soak (RTO: fault to the first write accepted in a surviving DC; moved: fault to the first runnable placed out of the DC before the next fault, - for none):\n")
	byKind := map[string][]*dcFault{}
	for _, fl := range d.faults {
		byKind[fl.Kind] = append(byKind[fl.Kind], fl)
	}
	kinds := append(slices.Clone(dcLevelFaults), faultNATSDisk, faultKillNATS, faultAPIServer, faultAgentCut)
	for _, kind := range kinds {
		for _, fl := range byKind[kind] {
			promoted := ""
			if fl.Promoted > 0 {
				promoted = fmt.Sprintf(" (standby promoted after %s)", seconds(fl.Promoted))
			}
			fenced := ""
			if n := fl.fenced(); n > 0 {
				fenced = fmt.Sprintf(", fenced %d (%d without need)", n, fl.fencedWithoutNeed())
			}
			did := ""
			if fl.Did != "" {
				did = "; " + fl.Did
			}
			fmt.Fprintf(&b, "    %-16s %s at %s for %s: RTO %s%s, moved %s, evicted %d%s, whole again %s after%s\n", kind, fl.DC.Name, fl.At.UTC().Format("15:04:05"),
				fl.End.Sub(fl.At).Round(time.Second), seconds(fl.RTO), promoted, seconds(fl.Moved), fl.Evicted[fl.DC.Cluster.Name()], fenced, seconds(fl.Recovered), did)
		}
	}
	b.WriteString(d.byKind(kinds, byKind))
	b.WriteString(describeStalls(d.stalls, d.faults))
	fmt.Fprintf(&b, "  PostgreSQL nodes accepting writes, asked every 250 ms from inside each DC: two at once in %d of %d rounds\n", len(d.TwoPrimaries), d.PrimaryRounds)
	fmt.Fprintf(&b, "  schedule %s firing each minute over %d ticks: %s\n", dcSchedule, d.Schedule.Ticks, d.Schedule)
	chain := "chain intact"
	if !d.AuditOK {
		chain = "chain broken"
	}
	fmt.Fprintf(&b, "dc soak: lost %d, duplicated %d, two-live %d, two-primaries %d, zombies %d, %s",
		d.AckedLost, d.Duplicated, d.TwoLive, len(d.TwoPrimaries), d.Zombies, chain)
	return b.String()
}

func seconds(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

// writeArtifactAs keeps a summary beside the other tests' artifacts.
func writeArtifactAs(t *testing.T, name, summary string) {
	dir := os.Getenv("PURSER_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "purser-test-artifacts")
	}
	dir = filepath.Join(dir, "soak")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("dc soak: cannot keep the summary: %v", err)
		return
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(summary+"\n"), 0o644); err != nil {
		t.Logf("dc soak: cannot keep the summary: %v", err)
	}
}
