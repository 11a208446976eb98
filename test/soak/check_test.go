package soak

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/api/server"
	"github.com/purser-io/purser/internal/sandbox"
	"github.com/purser-io/purser/test/soak/farm"
)

// report is what the checks found, and the summary of the run.
type report struct {
	Duration time.Duration
	Seed     int64
	Faults   map[string]int
	Crashes  []farm.Crash

	// Runnables.
	Submitted, Accepted, UnsureStored             int
	Succeeded, Failed, OtherTerminal, Running     int
	Lost, Duplicated, Evictions                   int
	LostDetails, DuplicatedDetails, FailedDetails []string

	// Deployables.
	Deployables, DeployablePuts, DeployableDeletes int
	DeployableProblems                             []string

	// Inventory against the clusters' truth.
	Records, Truth, Zombies, Missing, Stale int
	InventoryProblems                       []string

	// Audit log.
	AuditOK       bool
	AuditEntries  int64
	AuditReason   string
	AuditProblems []string

	// API as the users saw it.
	Calls      int
	Retries    int64
	UserErrors []string

	// SettledIn is how long after the faults the checks first passed;
	// zero when they never did within the settle period. Settled says the
	// same of each part: runnables, deployables, inventory.
	SettledIn time.Duration
	Settled   map[string]time.Duration
	// CheckErrors are reads the checks could not make in the end.
	CheckErrors []string
}

// converged says whether everything that converges has.
func (r *report) converged() bool {
	return r.Lost == 0 && r.Duplicated == 0 && len(r.DeployableProblems) == 0 &&
		r.Zombies == 0 && r.Missing == 0 && r.Stale == 0 && len(r.CheckErrors) == 0
}

// settle checks the farm every few seconds until everything has converged
// or limit has passed, then checks the audit log, and reports.
func settle(ctx context.Context, t *testing.T, clusters []*sandbox.Cluster, w *workload, limit time.Duration) *report {
	start := time.Now()
	kube := map[string]kubernetes.Interface{}
	for _, c := range clusters {
		client, err := c.Client()
		if err != nil {
			t.Fatal(err)
		}
		kube[c.Name()] = client
	}
	var rep *report
	settled := map[string]time.Duration{}
	for {
		rep = &report{Settled: settled}
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		checkRunnables(cctx, kube, w, rep)
		checkDeployables(cctx, kube, w, rep)
		checkInventory(cctx, kube, w, rep)
		cancel()
		for part, ok := range map[string]bool{
			"runnables":   rep.Lost == 0 && rep.Duplicated == 0,
			"deployables": len(rep.DeployableProblems) == 0,
			"inventory":   rep.Zombies == 0 && rep.Missing == 0 && rep.Stale == 0,
		} {
			if _, was := settled[part]; !ok {
				delete(settled, part)
			} else if !was {
				settled[part] = time.Since(start)
			}
		}
		if rep.converged() {
			rep.SettledIn = time.Since(start)
			break
		}
		t.Logf("%s settle: lost %d, duplicated %d, deployable problems %d, inventory zombies %d missing %d stale %d, read errors %d%s",
			stamp(), rep.Lost, rep.Duplicated, len(rep.DeployableProblems), rep.Zombies, rep.Missing, rep.Stale, len(rep.CheckErrors),
			firstLines(3, rep.LostDetails, rep.DuplicatedDetails, rep.DeployableProblems, rep.InventoryProblems, rep.CheckErrors))
		if time.Since(start) > limit {
			break
		}
		time.Sleep(5 * time.Second)
	}
	checkAudit(ctx, w, rep)
	w.mu.Lock()
	rep.Calls, rep.UserErrors = w.calls, slices.Clone(w.userErrors)
	w.mu.Unlock()
	rep.Retries = w.api.Retries()
	return rep
}

// firstLines shows the first n lines of each list, indented.
func firstLines(n int, lists ...[]string) string {
	var b strings.Builder
	for _, l := range lists {
		for _, line := range l[:min(n, len(l))] {
			b.WriteString("\n    " + line)
		}
	}
	return b.String()
}

// list pages through a list endpoint of the API, with ?limit= and
// ?continue=, and hands each page to add.
func list[T any](ctx context.Context, api *farm.Client, path string, query url.Values, add func(T)) error {
	query.Set("limit", "500")
	for {
		var page struct {
			Items    []T    `json:"items"`
			Continue string `json:"continue"`
		}
		if code, err := api.Do(ctx, http.MethodGet, path, query, nil, &page); code != http.StatusOK {
			if err != nil {
				return fmt.Errorf("GET %s?%s: %d: %w", path, query.Encode(), code, err)
			}
			return fmt.Errorf("GET %s?%s: %d", path, query.Encode(), code)
		}
		for _, item := range page.Items {
			add(item)
		}
		if page.Continue == "" {
			return nil
		}
		query.Set("continue", page.Continue)
	}
}

// jobCopy is a Job purser created for a runnable, on one cluster.
type jobCopy struct {
	cluster, name, attempt string
	deleting, suspended    bool
}

func (j jobCopy) String() string {
	s := j.cluster + "/" + j.name + " (attempt " + j.attempt
	if j.deleting {
		s += ", being deleted"
	}
	if j.suspended {
		s += ", suspended"
	}
	return s + ")"
}

// checkRunnables: every accepted runnable is stored, and has reached a
// terminal phase or runs on exactly one cluster (invariant 1); no
// runnable has copies on two clusters (invariants 2 and 3).
func checkRunnables(ctx context.Context, kube map[string]kubernetes.Interface, w *workload, rep *report) {
	stored := map[string]*v1alpha1.Runnable{}
	for _, ns := range w.namespaces {
		err := list(ctx, w.api, "/api/v1/runnables", url.Values{"namespace": {ns}}, func(r *v1alpha1.Runnable) {
			stored[r.Metadata.Namespace+"/"+r.Metadata.Name] = r
		})
		if err != nil {
			rep.CheckErrors = append(rep.CheckErrors, err.Error())
			return
		}
	}
	copies := map[string][]jobCopy{} // by runnable uid
	for cluster, client := range kube {
		for _, ns := range w.namespaces {
			jobs, err := client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelRunnableUID})
			if err != nil {
				rep.CheckErrors = append(rep.CheckErrors, fmt.Sprintf("list Jobs of %s in %s: %v", cluster, ns, err))
				return
			}
			for _, j := range jobs.Items {
				uid := j.Labels[v1alpha1.LabelRunnableUID]
				copies[uid] = append(copies[uid], jobCopy{
					cluster: cluster, name: j.Name, attempt: j.Labels[v1alpha1.LabelAttempt],
					deleting:  j.DeletionTimestamp != nil,
					suspended: j.Spec.Suspend != nil && *j.Spec.Suspend,
				})
			}
		}
	}

	w.mu.Lock()
	subs := make([]submission, 0, len(w.runnables))
	for _, s := range w.runnables {
		subs = append(subs, *s)
	}
	w.mu.Unlock()
	rep.Submitted = len(subs)
	for _, s := range subs {
		key := s.Namespace + "/" + s.Name
		r, ok := stored[key]
		switch {
		case s.Accepted:
			rep.Accepted++
		case s.Unsure && ok:
			rep.UnsureStored++ // the answer was lost, the runnable was not
		default:
			continue
		}
		if !ok {
			rep.Lost++
			rep.LostDetails = append(rep.LostDetails, key+": accepted, but the API does not know it")
			continue
		}
		var live []jobCopy
		on := map[string]bool{}
		for _, c := range copies[r.Metadata.UID] {
			if !c.deleting {
				on[c.cluster] = true
			}
			if !c.deleting && !c.suspended {
				live = append(live, c)
			}
		}
		if len(on) > 1 {
			rep.Duplicated++
			rep.DuplicatedDetails = append(rep.DuplicatedDetails, fmt.Sprintf("%s (%s): copies %v", key, r.Status.Phase, copies[r.Metadata.UID]))
		}
		phase := r.Status.Phase
		switch {
		case phase == v1alpha1.PhaseSucceeded:
			rep.Succeeded++
		case phase == v1alpha1.PhaseFailed:
			rep.Failed++
			rep.FailedDetails = append(rep.FailedDetails, key+": "+r.Status.Message)
		case phase.Terminal():
			rep.OtherTerminal++
		case (phase == v1alpha1.PhaseRunning || phase == v1alpha1.PhaseSubmitted) &&
			len(live) == 1 && len(on) == 1 && live[0].cluster == r.Status.Cluster:
			rep.Running++
		default:
			rep.Lost++
			rep.LostDetails = append(rep.LostDetails, fmt.Sprintf("%s: phase %s on %q, copies %v: %s",
				key, phase, r.Status.Cluster, copies[r.Metadata.UID], r.Status.Message))
		}
	}
}

// checkDeployables: the source of truth holds the last accepted change of
// every deployable (invariant 1), and every cluster holds exactly it, or
// nothing once it is deleted (invariant 5).
func checkDeployables(ctx context.Context, kube map[string]kubernetes.Interface, w *workload, rep *report) {
	type expected struct {
		ns, name string
		want     []map[string]string // any of these; nil: deleted
	}
	w.mu.Lock()
	var exps []expected
	for _, d := range w.deployables {
		if d.Puts == 0 {
			continue
		}
		exps = append(exps, expected{d.Namespace, d.Name, append([]map[string]string{d.Want}, d.Unsure...)})
		rep.DeployablePuts += d.Puts
		rep.DeployableDeletes += d.Deletes
	}
	w.mu.Unlock()
	rep.Deployables = len(exps)
	for _, e := range exps {
		var d v1alpha1.Deployable
		var truth map[string]string // nil: deleted
		switch code, err := w.api.Do(ctx, http.MethodGet, "/api/v1/deployables/"+e.ns+"/"+e.name, nil, nil, &d); code {
		case http.StatusOK:
			truth = map[string]string{}
			data, _ := d.Spec.Template["data"].(map[string]any)
			for k, v := range data {
				truth[k], _ = v.(string)
			}
		case http.StatusNotFound:
		default:
			rep.CheckErrors = append(rep.CheckErrors, fmt.Sprintf("get deployable %s/%s: %d %v", e.ns, e.name, code, err))
			continue
		}
		if !slices.ContainsFunc(e.want, func(m map[string]string) bool { return (m == nil) == (truth == nil) && maps.Equal(m, truth) }) {
			rep.DeployableProblems = append(rep.DeployableProblems, fmt.Sprintf("%s/%s: the API holds %v, the last accepted change was %v", e.ns, e.name, truth, e.want[0]))
		}
		for cluster, client := range kube {
			cm, err := client.CoreV1().ConfigMaps(e.ns).Get(ctx, e.name, metav1.GetOptions{})
			switch {
			case err != nil && truth == nil && apierrors.IsNotFound(err):
			case err != nil && apierrors.IsNotFound(err):
				rep.DeployableProblems = append(rep.DeployableProblems, fmt.Sprintf("%s/%s: missing on %s", e.ns, e.name, cluster))
			case err != nil:
				rep.CheckErrors = append(rep.CheckErrors, fmt.Sprintf("get ConfigMap %s/%s on %s: %v", e.ns, e.name, cluster, err))
			case cm.DeletionTimestamp != nil && truth == nil:
			case truth == nil:
				rep.DeployableProblems = append(rep.DeployableProblems, fmt.Sprintf("%s/%s: deleted, still on %s", e.ns, e.name, cluster))
			case !maps.Equal(cm.Data, truth):
				rep.DeployableProblems = append(rep.DeployableProblems, fmt.Sprintf("%s/%s: %s holds %v, the source of truth %v", e.ns, e.name, cluster, cm.Data, truth))
			}
		}
	}
}

// checkInventory compares the inventory's ConfigMaps and Jobs in the
// soak's namespaces with direct lists of every cluster (invariant 4). Both
// sides are keyed by cluster, kind, namespace, name and uid, so that an
// object deleted and created again under its name is two objects.
func checkInventory(ctx context.Context, kube map[string]kubernetes.Interface, w *workload, rep *report) {
	records := map[string]string{} // cluster/kind/namespace/name/uid -> resourceVersion
	for _, ns := range w.namespaces {
		for _, kind := range []string{"ConfigMap", "Job"} {
			// system=true: the truth below holds kube-root-ca.crt, which
			// inventory lists leave out unless asked (store.SystemObjects).
			query := url.Values{"namespace": {ns}, "kind": {kind}, "fields": {"meta"}, "system": {"true"}}
			err := list(ctx, w.api, "/api/v1/inventory", query, func(it server.InventoryItem) {
				records[it.Cluster+"/"+it.Kind+"/"+it.Namespace+"/"+it.Name+"/"+it.UID] = it.ResourceVersion
			})
			if err != nil {
				rep.CheckErrors = append(rep.CheckErrors, err.Error())
				return
			}
		}
	}
	truth := map[string]string{}
	for cluster, client := range kube {
		for _, ns := range w.namespaces {
			cms, err := client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				rep.CheckErrors = append(rep.CheckErrors, fmt.Sprintf("list ConfigMaps of %s in %s: %v", cluster, ns, err))
				return
			}
			for _, o := range cms.Items {
				truth[cluster+"/ConfigMap/"+ns+"/"+o.Name+"/"+string(o.UID)] = o.ResourceVersion
			}
			jobs, err := client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				rep.CheckErrors = append(rep.CheckErrors, fmt.Sprintf("list Jobs of %s in %s: %v", cluster, ns, err))
				return
			}
			for _, o := range jobs.Items {
				truth[cluster+"/Job/"+ns+"/"+o.Name+"/"+string(o.UID)] = o.ResourceVersion
			}
		}
	}
	rep.Records, rep.Truth = len(records), len(truth)
	for _, key := range slices.Sorted(maps.Keys(records)) {
		rv, ok := truth[key]
		switch {
		case !ok:
			rep.Zombies++
			rep.InventoryProblems = append(rep.InventoryProblems, "zombie "+key)
		case rv != records[key]:
			rep.Stale++
			rep.InventoryProblems = append(rep.InventoryProblems, fmt.Sprintf("stale %s: resourceVersion %s in the inventory, %s in the cluster", key, records[key], rv))
		}
	}
	for _, key := range slices.Sorted(maps.Keys(truth)) {
		if _, ok := records[key]; !ok {
			rep.Missing++
			rep.InventoryProblems = append(rep.InventoryProblems, "missing "+key)
		}
	}
}

// checkAudit: the hash chain is intact, and every accepted runnable's
// submission and every placement is in it (invariant 6).
func checkAudit(ctx context.Context, w *workload, rep *report) {
	var chain server.ChainStatus
	if code, err := w.api.Do(ctx, http.MethodGet, "/api/v1/history/verify", nil, nil, &chain); code != http.StatusOK {
		rep.AuditReason = fmt.Sprintf("verify: %d %v", code, err)
		return
	}
	rep.AuditOK, rep.AuditEntries, rep.AuditReason = chain.OK, chain.Entries, chain.Reason
	if !chain.OK {
		rep.AuditReason = fmt.Sprintf("broken at entry %d: %s", chain.BrokenSeq, chain.Reason)
	}
	entries := map[string]map[string]int{} // action -> namespace/name -> count
	for _, action := range []string{"create", "place", "evict"} {
		entries[action] = map[string]int{}
		for _, ns := range w.namespaces {
			err := list(ctx, w.api, "/api/v1/history", url.Values{"namespace": {ns}, "kind": {v1alpha1.KindRunnable}, "action": {action}}, func(e server.HistoryEntry) {
				entries[action][strings.TrimPrefix(e.Object, v1alpha1.KindRunnable+"/")]++
			})
			if err != nil {
				rep.AuditProblems = append(rep.AuditProblems, err.Error())
				return
			}
		}
	}
	for _, n := range entries["evict"] {
		rep.Evictions += n
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.runnables {
		key := s.Namespace + "/" + s.Name
		if s.Accepted && entries["create"][key] == 0 {
			rep.AuditProblems = append(rep.AuditProblems, key+": accepted, no create entry")
		}
		if (s.Accepted || s.Unsure) && entries["create"][key] > 1 {
			rep.AuditProblems = append(rep.AuditProblems, fmt.Sprintf("%s: %d create entries", key, entries["create"][key]))
		}
	}
	// A runnable that was placed (it has copies or a terminal phase from
	// a cluster) must have its place entries: at least one more than its
	// evictions.
	for key, n := range entries["evict"] {
		if entries["place"][key] < n {
			rep.AuditProblems = append(rep.AuditProblems, fmt.Sprintf("%s: %d evictions, %d placements", key, n, entries["place"][key]))
		}
	}
}

// Violations lists what breaks an invariant, or what a user saw fail.
func (r *report) Violations() []string {
	var v []string
	add := func(cond bool, msg string, details []string) {
		if !cond {
			return
		}
		if len(details) > 10 {
			details = append(details[:10:10], fmt.Sprintf("... and %d more", len(details)-10))
		}
		if len(details) > 0 {
			msg += ":\n  " + strings.Join(details, "\n  ")
		}
		v = append(v, msg)
	}
	add(r.Lost > 0, fmt.Sprintf("%d accepted runnables lost (invariant 1)", r.Lost), r.LostDetails)
	add(r.Duplicated > 0, fmt.Sprintf("%d runnables with copies on two clusters (invariants 2, 3)", r.Duplicated), r.DuplicatedDetails)
	add(r.Failed > 0, fmt.Sprintf("%d runnables Failed, although every Job of the soak succeeds", r.Failed), r.FailedDetails)
	add(len(r.DeployableProblems) > 0, "deployables not converged (invariants 1, 5)", r.DeployableProblems)
	add(r.Zombies+r.Missing+r.Stale > 0, fmt.Sprintf("inventory not converged: %d zombies, %d missing, %d stale (invariant 4)", r.Zombies, r.Missing, r.Stale), r.InventoryProblems)
	add(!r.AuditOK, "audit chain not intact (invariant 6): "+r.AuditReason, nil)
	add(len(r.AuditProblems) > 0, "audit log incomplete (invariant 6)", r.AuditProblems)
	add(len(r.UserErrors) > 0, fmt.Sprintf("%d API calls failed for their user (neither 2xx nor retryable, or retried in vain)", len(r.UserErrors)), r.UserErrors)
	add(len(r.CheckErrors) > 0, "the checks could not read everything", r.CheckErrors)
	return v
}

func (r *report) String() string {
	var b strings.Builder
	yes := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "NO"
	}
	fmt.Fprintf(&b, "soak summary (%s, seed %d)\n", r.Duration, r.Seed)
	fmt.Fprintf(&b, "  runnables accepted %d, completed %d, running %d, lost %d, duplicated %d\n",
		r.Accepted+r.UnsureStored, r.Succeeded+r.Failed+r.OtherTerminal, r.Running, r.Lost, r.Duplicated)
	fmt.Fprintf(&b, "    submitted %d, answer lost but stored %d; succeeded %d, failed %d; evictions %d\n",
		r.Submitted, r.UnsureStored, r.Succeeded, r.Failed, r.Evictions)
	fmt.Fprintf(&b, "  deployables %d, in sync on every cluster: %s (%d changes, %d deletes)\n",
		r.Deployables, yes(len(r.DeployableProblems) == 0), r.DeployablePuts, r.DeployableDeletes)
	fmt.Fprintf(&b, "  inventory: records %d, truth %d, zombies %d, missing %d, stale %d\n", r.Records, r.Truth, r.Zombies, r.Missing, r.Stale)
	chain := "intact"
	if !r.AuditOK {
		chain = "NOT intact: " + r.AuditReason
	}
	fmt.Fprintf(&b, "  audit chain: %s (%d entries); creations and placements recorded: %s\n", chain, r.AuditEntries, yes(len(r.AuditProblems) == 0))
	var faults []string
	for _, k := range append(slices.Clone(allDCFaults), faultPostgres) {
		if n, ok := r.Faults[k]; ok {
			faults = append(faults, k+" "+strconv.Itoa(n))
		}
	}
	fmt.Fprintf(&b, "  faults: %s\n", strings.Join(faults, ", "))
	fmt.Fprintf(&b, "  api calls %d, retried requests %d, user-visible errors %d\n", r.Calls, r.Retries, len(r.UserErrors))
	crashed := map[string]int{}
	for _, c := range r.Crashes {
		crashed[c.Process]++
	}
	var cs []string
	for _, name := range slices.Sorted(maps.Keys(crashed)) {
		cs = append(cs, fmt.Sprintf("%s %d", name, crashed[name]))
	}
	fmt.Fprintf(&b, "  processes that exited by themselves: %d %v\n", len(r.Crashes), cs)
	var parts []string
	for _, part := range []string{"runnables", "deployables", "inventory"} {
		if d, ok := r.Settled[part]; ok {
			parts = append(parts, fmt.Sprintf("%s %s", part, d.Round(time.Second)))
		} else {
			parts = append(parts, part+" never")
		}
	}
	if r.SettledIn > 0 {
		fmt.Fprintf(&b, "  converged %s after the faults stopped (%s)", r.SettledIn.Round(time.Second), strings.Join(parts, ", "))
	} else {
		fmt.Fprintf(&b, "  NOT converged after the settle period (%s)", strings.Join(parts, ", "))
	}
	return b.String()
}
