package printer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/platform/podstatus"
)

// Describe prints one object in detail, as `kubectl describe` does, and
// its recent history the way kubectl shows events. history nil means it
// could not be read (the user may read the object but not its history),
// and the section is left out.
func Describe(w io.Writer, kind string, obj Object, history []Object) error {
	return DescribeWithPods(w, kind, obj, history, nil)
}

// AttemptPods are the Pods of a runnable's current attempt, as the
// inventory holds them: the records of kind Pod on the attempt's cluster
// whose owner is the attempt's object (a Job's, a Workflow's pods).
type AttemptPods struct {
	Attempt string // its number
	Cluster string
	// Tracked says whether the cluster's agent is asked to track Pods
	// (the Cluster's spec.inventory.kinds); an empty list means little
	// where it is not.
	Tracked bool
	Pods    []Object // inventory records, with their objects
}

// DescribeWithPods is Describe with the pods of a runnable's current
// attempt, listed after its attempts; nil leaves the section out.
func DescribeWithPods(w io.Writer, kind string, obj Object, history []Object, pods *AttemptPods) error {
	d := describer{w: w}
	d.line("Name", Field(obj, "metadata", "name"))
	d.line("Namespace", Field(obj, "metadata", "namespace"))
	d.line("UID", Field(obj, "metadata", "uid"))
	if labels, _ := Lookup(obj, "metadata", "labels").(map[string]any); len(labels) > 0 {
		d.line("Labels", JoinLabels(labels))
	}
	d.line("Created", Field(obj, "metadata", "creationTimestamp"))
	switch kind {
	case v1alpha1.KindRunnable:
		d.runnable(obj)
		if pods != nil {
			d.pods(pods)
		}
	case v1alpha1.KindDeployable:
		d.deployable(obj)
	case v1alpha1.KindCluster:
		d.cluster(obj)
	case v1alpha1.KindSchedule:
		d.schedule(obj)
	case v1alpha1.KindTrigger:
		d.trigger(obj)
	case v1alpha1.KindQuota:
		rows := [][]string{{"RESOURCE", "USED", "LIMIT"}}
		d.section("Limits", append(rows, QuotaRows(obj)...))
		if label := Field(obj, "spec", "perLabel", "label"); label != "" {
			limits, _ := Lookup(obj, "spec", "perLabel", "limits").(map[string]any)
			per, _ := Lookup(obj, "status", "usedPerLabel").(map[string]any)
			values := make([]string, 0, len(per))
			for v := range per {
				values = append(values, v)
			}
			sort.Strings(values)
			for _, v := range values {
				used, _ := per[v].(map[string]any)
				rows := [][]string{{"RESOURCE", "USED", "LIMIT"}}
				for _, n := range sortedKeys(limits) {
					rows = append(rows, []string{n, fmt.Sprint(used[n]), fmt.Sprint(limits[n])})
				}
				d.section("Limits for "+label+"="+v, rows)
			}
		}
	}
	if history != nil {
		fmt.Fprintln(w, "History:")
		if len(history) == 0 {
			fmt.Fprintln(w, "  <none>")
		}
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		for _, e := range history {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", Field(e, "time"), Field(e, "actor"), Field(e, "action"), Field(e, "summary"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

type describer struct{ w io.Writer }

// line prints "Label:  value", leaving out empty values.
func (d describer) line(label, value string) {
	if strings.TrimSpace(value) != "" {
		fmt.Fprintf(d.w, "%-14s %s\n", label+":", value)
	}
}

// section prints a heading and indented rows, or <none>.
func (d describer) section(title string, rows [][]string) {
	fmt.Fprintln(d.w, title+":")
	if len(rows) == 0 {
		fmt.Fprintln(d.w, "  <none>")
		return
	}
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 8, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintln(tw, "  "+strings.Join(r, "\t"))
	}
	tw.Flush()
	// Empty last cells leave padding behind; a line ends at its text.
	for line := range strings.Lines(buf.String()) {
		fmt.Fprintln(d.w, strings.TrimRight(line, " \n"))
	}
}

func (d describer) runnable(obj Object) {
	d.line("Template", Field(obj, "spec", "template", "apiVersion")+" "+Field(obj, "spec", "template", "kind"))
	d.line("Phase", Field(obj, "status", "phase"))
	d.line("Position", Field(obj, "status", "queuePosition")) // in the queue, while Queued
	d.line("Cluster", Field(obj, "status", "cluster"))
	d.line("Health", Field(obj, "status", "health"))
	d.line("Message", Field(obj, "status", "message"))
	if r, _ := Lookup(obj, "status", "requests").(map[string]any); len(r) > 0 {
		d.line("Requests", JoinLabels(r))
	}
	if r, _ := Lookup(obj, "spec", "resources").(map[string]any); len(r) > 0 {
		d.line("Declared", JoinLabels(r))
	}
	d.line("Waiting", Field(obj, "status", "waiting"))
	d.line("Submitted by", Field(obj, "status", "submittedBy"))
	if by, g := Field(obj, "status", "approvedBy"), Field(obj, "status", "approvedGeneration"); by != "" && g != "" {
		d.line("Approved by", by+" (generation "+g+")")
	} else {
		d.line("Approved by", by)
	}
	d.line("Deadline", Field(obj, "spec", "deadline"))
	if p, _ := Lookup(obj, "status", "preserved").(map[string]any); len(p) > 0 {
		d.line("Preserved", JoinLabels(p))
	}
	if rp := Field(obj, "status", "restorePoint", "path"); rp != "" {
		d.line("Restore point", fmt.Sprintf("%s (%s from attempt %s, %s)", rp, Field(obj, "status", "restorePoint", "kind"),
			Field(obj, "status", "restorePoint", "attempt"), Field(obj, "status", "restorePoint", "source")))
	}
	if to := Field(obj, "status", "move", "to"); to != "" {
		// The planned move, under way or the last one.
		mv := fmt.Sprintf("%s to %s by %s, %s", Field(obj, "status", "move", "from"), to, Field(obj, "status", "move", "by"),
			Field(obj, "status", "move", "step"))
		if sp := Field(obj, "status", "move", "savepoint"); sp != "" {
			mv += ", savepoint " + sp
		}
		if dt := Field(obj, "status", "move", "downtimeSeconds"); dt != "" {
			mv += ", downtime " + dt + " s"
		}
		if e := Field(obj, "status", "move", "error"); e != "" {
			mv += ": " + e
		}
		d.line("Move", mv)
	}
	attempts := list(obj, "status", "attempts")
	var rows [][]string
	for _, a := range attempts {
		m, _ := a.(map[string]any)
		rows = append(rows, []string{"#" + Field(m, "number"), Field(m, "cluster"),
			Field(m, "startedAt"), orNone(Field(m, "endedAt")), Field(m, "result"), Field(m, "reason")})
	}
	d.section("Attempts", rows)
	// The chain of restore points across failovers: what each attempt
	// started from, what it reported, and why that was not carried on.
	for _, a := range attempts {
		m, _ := a.(map[string]any)
		if c, _ := m["carriedIn"].(map[string]any); len(c) > 0 {
			fmt.Fprintf(d.w, "  #%s carried in: %s\n", Field(m, "number"), JoinLabels(c))
		}
		if r, _ := m["reported"].(map[string]any); len(r) > 0 {
			fmt.Fprintf(d.w, "  #%s reported:   %s\n", Field(m, "number"), JoinLabels(r))
		}
		if n := Field(m, "note"); n != "" {
			fmt.Fprintf(d.w, "  #%s note:       %s\n", Field(m, "number"), n)
		}
	}
}

// pods prints the attempt's pods as `kubectl get pods` does: READY,
// STATUS and RESTARTS by kubectl's rules (podstatus.Summary).
func (d describer) pods(p *AttemptPods) {
	title := fmt.Sprintf("Pods (attempt #%s on %s, from the inventory)", p.Attempt, p.Cluster)
	if len(p.Pods) == 0 && !p.Tracked {
		fmt.Fprintln(d.w, title+":")
		fmt.Fprintf(d.w, "  <not tracked: cluster %s's spec.inventory.kinds does not name Pod>\n", p.Cluster)
		return
	}
	var rows [][]string
	if len(p.Pods) > 0 {
		rows = append(rows, []string{"NAME", "READY", "STATUS", "RESTARTS", "AGE", "NODE"})
	}
	for _, rec := range p.Pods {
		obj, _ := rec["object"].(map[string]any)
		var pod corev1.Pod
		if b, err := json.Marshal(obj); err == nil {
			_ = json.Unmarshal(b, &pod)
		}
		ready, status, restarts := podstatus.Summary(&pod)
		rows = append(rows, []string{Field(rec, "name"), ready, status, fmt.Sprint(restarts),
			Age(Field(obj, "metadata", "creationTimestamp")), orNone(pod.Spec.NodeName)})
	}
	d.section(title, rows)
}

func (d describer) schedule(obj Object) {
	d.line("Schedule", Field(obj, "spec", "schedule")+" ("+orNone(Field(obj, "spec", "timeZone"))+")")
	d.line("Template", Field(obj, "spec", "template", "template", "apiVersion")+" "+Field(obj, "spec", "template", "template", "kind"))
	d.line("Concurrency", Field(obj, "spec", "concurrencyPolicy"))
	d.line("Deadline", Field(obj, "spec", "startingDeadlineSeconds"))
	if p := Field(obj, "spec", "catchUp", "policy"); p != "" {
		if w := Field(obj, "spec", "catchUp", "windowSeconds"); w != "" {
			p += " within " + w + " s"
		}
		d.line("Catch-up", p)
	}
	d.line("Suspend", Field(obj, "spec", "suspend"))
	d.line("History", "keep "+Field(obj, "spec", "successfulRunsHistoryLimit")+" succeeded, "+Field(obj, "spec", "failedRunsHistoryLimit")+" failed")
	d.line("Last tick", Field(obj, "status", "lastScheduleTime"))
	d.line("Next tick", Field(obj, "status", "nextScheduleTime"))
	d.line("Missed", Field(obj, "status", "missed"))
	d.line("Message", Field(obj, "status", "message"))
	var active []string
	for _, a := range list(obj, "status", "active") {
		m, _ := a.(map[string]any)
		active = append(active, Field(m, "name"))
	}
	d.line("Active", orNone(strings.Join(active, ", ")))
	rows := [][]string{}
	for _, r := range list(obj, "status", "lastRuns") {
		m, _ := r.(map[string]any)
		rows = append(rows, []string{Field(m, "name"), Field(m, "tick"), Field(m, "phase")})
	}
	if len(rows) > 0 {
		rows = append([][]string{{"NAME", "TICK", "PHASE"}}, rows...)
	}
	d.section("Last runs", rows)
}

func (d describer) trigger(obj Object) {
	d.line("Source", TriggerSource(obj))
	var phases []string
	for _, p := range list(obj, "spec", "source", "runnableEnded", "phases") {
		phases = append(phases, fmt.Sprint(p))
	}
	d.line("Phases", strings.Join(phases, ", "))
	d.line("Webhook", Field(obj, "status", "webhookPath"))
	d.line("Template", Field(obj, "spec", "template", "template", "apiVersion")+" "+Field(obj, "spec", "template", "template", "kind"))
	d.line("Suspend", Field(obj, "spec", "suspend"))
	d.line("Fired", Field(obj, "status", "fired"))
	d.line("Last fired", Field(obj, "status", "lastFired"))
	d.line("Message", Field(obj, "status", "message"))
	rows := [][]string{}
	for _, r := range list(obj, "status", "lastRuns") {
		m, _ := r.(map[string]any)
		rows = append(rows, []string{Field(m, "name"), Field(m, "phase"), Field(m, "event")})
	}
	if len(rows) > 0 {
		rows = append([][]string{{"NAME", "PHASE", "EVENT"}}, rows...)
	}
	d.section("Last runs", rows)
}

func (d describer) deployable(obj Object) {
	d.line("Template", Field(obj, "spec", "template", "apiVersion")+" "+Field(obj, "spec", "template", "kind"))
	d.line("Generation", Field(obj, "status", "generation"))
	d.line("Phase", Field(obj, "status", "phase"))
	var rows [][]string
	for _, c := range list(obj, "status", "clusters") {
		m, _ := c.(map[string]any)
		state := Field(m, "state")
		if reason := Field(m, "reason"); reason != "" {
			state += " (" + reason + ")" // AdmissionDenied: what a script greps for
		}
		rows = append(rows, []string{Field(m, "cluster"), state, "generation " + Field(m, "syncedGeneration"),
			Field(m, "lastSyncedAt"), Field(m, "message")})
	}
	d.section("Clusters", rows)
}

func (d describer) cluster(obj Object) {
	ready := ReadyCondition(obj)
	value := orUnknown(Field(ready, "status"))
	if r := Field(ready, "reason"); r != "" {
		value += " (" + r + ")"
	}
	if since := Field(ready, "lastTransitionTime"); since != "" {
		value += " since " + since
	}
	d.line("State", ClusterState(obj))
	d.line("Ready", value)
	d.line("Ready message", Field(ready, "message"))
	d.line("Records", Field(obj, "status", "agent", "freshness", "message"))
	// Taints set on the cluster (by a user: cordon, drain, purser taint)
	// apart from those purser adds from its conditions, since only the
	// first can be removed by hand.
	var taints [][]string
	for _, src := range []struct {
		path []string
		by   string
	}{{[]string{"spec", "taints"}, "set on the cluster"}, {[]string{"status", "taints"}, "added by purser from its conditions"}} {
		for _, t := range list(obj, src.path...) {
			m, _ := t.(map[string]any)
			row := []string{FormatTaint(m), src.by}
			if at := Field(m, "timeAdded"); at != "" {
				row = append(row, "since "+at)
			}
			taints = append(taints, row)
		}
	}
	d.section("Taints", taints)
	var conds [][]string
	for _, c := range list(obj, "status", "conditions") {
		m, _ := c.(map[string]any)
		conds = append(conds, []string{Field(m, "type"), Field(m, "status"), Field(m, "reason"), Field(m, "lastTransitionTime"), Field(m, "message")})
	}
	d.section("Conditions", conds)
	d.line("Heartbeat", Field(obj, "status", "agent", "lastHeartbeat"))
	d.line("Snapshot", Field(obj, "status", "agent", "lastSnapshot"))
	d.line("Last event", Field(obj, "status", "agent", "lastEvent"))
	d.line("Objects", Field(obj, "status", "inventory", "objects"))
	if byPhase, _ := Lookup(obj, "status", "runnables").(map[string]any); len(byPhase) > 0 {
		d.line("Runnables", JoinLabels(byPhase))
	}
}

func sortedKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
