package printer

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/purser-io/purser/api/v1alpha1"
)

// TableOptions change a table.
type TableOptions struct {
	Wide bool // -o wide: more columns
	// WithNamespace adds the NAMESPACE column to namespaced kinds, as
	// kubectl does for a list across namespaces.
	WithNamespace bool
}

// table is a header and rows of cells.
type table struct {
	header []string
	rows   [][]string
}

// newTabWriter is the one layout of every table: kubectl's three spaces.
func newTabWriter(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
}

func (t table) write(w io.Writer) error {
	tw := newTabWriter(w)
	fmt.Fprintln(tw, strings.Join(t.header, "\t"))
	for _, r := range t.rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// Table prints objects of one kind as `kubectl get` does.
func Table(w io.Writer, kind string, items []Object, opts TableOptions) error {
	return buildTable(kind, items, opts).write(w)
}

func buildTable(kind string, items []Object, opts TableOptions) table {
	namespaced := kind != v1alpha1.KindCluster && kind != v1alpha1.KindQuota && kind != KindDC
	var t table
	if opts.WithNamespace && namespaced {
		t.header = append(t.header, "NAMESPACE")
	}
	t.header = append(t.header, header(kind, opts.Wide)...)
	for _, it := range items {
		var row []string
		if opts.WithNamespace && namespaced {
			row = append(row, Field(it, "metadata", "namespace"))
		}
		t.rows = append(t.rows, append(row, cells(kind, it, opts.Wide)...))
	}
	if kind == v1alpha1.KindRunnable {
		t = withQueue(t, items, opts.Wide)
	}
	return t
}

// withQueue adds, when some runnable waits in the queue, its POSITION
// beside PHASE and (in the narrow table too) the MESSAGE that says what
// it waits for.
func withQueue(t table, items []Object, wide bool) table {
	queued := false
	for _, it := range items {
		queued = queued || Field(it, "status", "queuePosition") != ""
	}
	if !queued {
		return t
	}
	at := slices.Index(t.header, "PHASE") + 1
	t.header = slices.Insert(t.header, at, "POSITION")
	if !wide {
		t.header = append(t.header, "MESSAGE")
	}
	for i, it := range items {
		t.rows[i] = slices.Insert(t.rows[i], at, orNone(Field(it, "status", "queuePosition")))
		if !wide {
			t.rows[i] = append(t.rows[i], Field(it, "status", "message"))
		}
	}
	return t
}

func header(kind string, wide bool) []string {
	switch kind {
	case v1alpha1.KindRunnable:
		h := []string{"NAME", "KIND", "PHASE", "CLUSTER", "HEALTH", "AGE"}
		if wide {
			h = append(h, "ATTEMPTS", "SUBMITTED-BY", "MESSAGE")
		}
		return h
	case v1alpha1.KindDeployable:
		h := []string{"NAME", "KIND", "GENERATION", "PHASE", "SYNCED", "AGE"}
		if wide {
			h = append(h, "CLUSTERS")
		}
		return h
	case v1alpha1.KindCluster:
		h := []string{"NAME", "STATUS", "LABELS", "TAINTS", "OBJECTS", "AGE"}
		if wide {
			h = append(h, "REASON", "RECORDS", "TAINT-LIST", "LAST-HEARTBEAT")
		}
		return h
	case v1alpha1.KindQuota:
		return []string{"NAME", "USED / LIMIT", "AGE"}
	case v1alpha1.KindSchedule:
		return []string{"NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST", "NEXT"}
	case v1alpha1.KindTrigger:
		return []string{"NAME", "SOURCE", "SUSPEND", "FIRED", "LAST", "AGE"}
	case v1alpha1.KindPlacementPolicy, v1alpha1.KindClusterPlacementPolicy:
		return []string{"NAME", "SELECTS", "PRIORITY", "AGE"}
	case KindDC:
		h := []string{"NAME", "CLUSTERS", "ABSORBABLE", "SHORT"}
		if wide {
			h = append(h, "VERDICT", "CLUSTER-LIST", "MESSAGE")
		}
		return h
	}
	return []string{"NAME", "AGE"}
}

func cells(kind string, it Object, wide bool) []string {
	row := []string{Field(it, "metadata", "name")}
	created := Age(Field(it, "metadata", "creationTimestamp"))
	switch kind {
	case v1alpha1.KindRunnable:
		row = append(row, Field(it, "spec", "template", "kind"), Field(it, "status", "phase"),
			orNone(Field(it, "status", "cluster")), orNone(Field(it, "status", "health")), created)
		if wide {
			row = append(row, attemptCount(it), Field(it, "status", "submittedBy"), Field(it, "status", "message"))
		}
	case v1alpha1.KindDeployable:
		synced, total, perCluster := syncSummary(it)
		row = append(row, Field(it, "spec", "template", "kind"), Field(it, "status", "generation"),
			Field(it, "status", "phase"), fmt.Sprintf("%d/%d", synced, total), created)
		if wide {
			row = append(row, orNone(perCluster))
		}
	case v1alpha1.KindCluster:
		labels, _ := Lookup(it, "metadata", "labels").(map[string]any)
		taints := Taints(it)
		ready := ReadyCondition(it)
		row = append(row, ClusterState(it), orNone(JoinLabels(labels)), fmt.Sprint(len(taints)),
			orNone(Field(it, "status", "inventory", "objects")), created)
		if wide {
			var tl []string
			for _, t := range taints {
				tl = append(tl, FormatTaint(t))
			}
			row = append(row, orNone(Field(ready, "reason")), orNone(Field(it, "status", "agent", "freshness", "reason")),
				orNone(strings.Join(tl, ",")), orNone(Timestamp(Field(it, "status", "agent", "lastHeartbeat"))))
		}
	case v1alpha1.KindQuota:
		var parts []string
		for _, r := range QuotaRows(it) {
			parts = append(parts, r[0]+" "+r[1]+"/"+r[2])
		}
		row = append(row, orNone(strings.Join(parts, ", ")), created)
	case v1alpha1.KindSchedule:
		suspend := Field(it, "spec", "suspend")
		if suspend == "" {
			suspend = "false"
		}
		row = append(row, Field(it, "spec", "schedule"), orNone(Field(it, "spec", "timeZone")), suspend,
			fmt.Sprint(len(list(it, "status", "active"))), agoOrNone(Field(it, "status", "lastScheduleTime")),
			orNone(Field(it, "status", "nextScheduleTime")))
	case v1alpha1.KindTrigger:
		suspend := Field(it, "spec", "suspend")
		if suspend == "" {
			suspend = "false"
		}
		fired := Field(it, "status", "fired")
		if fired == "" {
			fired = "0"
		}
		row = append(row, TriggerSource(it), suspend, fired, agoOrNone(Field(it, "status", "lastFired")), created)
	case v1alpha1.KindPlacementPolicy, v1alpha1.KindClusterPlacementPolicy:
		var sels []string
		for _, sel := range list(it, "spec", "resourceSelectors") {
			m, _ := sel.(map[string]any)
			what := fmt.Sprint(m["kind"])
			if group, _, ok := strings.Cut(fmt.Sprint(m["apiVersion"]), "/"); ok {
				what += "." + group
			}
			if n, _ := m["name"].(string); n != "" {
				what += "/" + n
			} else if m["labelSelector"] != nil {
				what += " (labels)"
			}
			sels = append(sels, what)
		}
		prio := Field(it, "spec", "priority")
		if prio == "" {
			prio = "0"
		}
		row = append(row, strings.Join(sels, ","), prio, created)
	case KindDC:
		clusters := list(it, "status", "clusters")
		names := make([]string, len(clusters))
		for i, c := range clusters {
			names[i] = fmt.Sprint(c)
		}
		absorbable := "no"
		if Field(it, "status", "headroom", "absorbable") == "true" {
			absorbable = "yes"
		}
		row = append(row, fmt.Sprint(len(clusters)), absorbable, dcShort(it))
		if wide {
			row = append(row, Field(it, "status", "headroom", "verdict"), strings.Join(names, ","), Field(it, "status", "message"))
		}
	default:
		row = append(row, created)
	}
	return row
}

// KindDC is a DC of GET /api/v1/dcs, with its standing headroom.
const KindDC = "DC"

// dcShort says what the farm lacks to absorb a DC's loss: "2 runnables
// (cpu 4, memory 8Gi)", or <none>.
func dcShort(it Object) string {
	n := Field(it, "status", "headroom", "short", "runnables")
	if n == "" {
		return "<none>"
	}
	req, _ := Lookup(it, "status", "headroom", "short", "requests").(map[string]any)
	names := make([]string, 0, len(req))
	for name := range req {
		names = append(names, name)
	}
	slices.Sort(names)
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = name + " " + fmt.Sprint(req[name])
	}
	word := " runnables"
	if n == "1" {
		word = " runnable"
	}
	if len(parts) == 0 {
		return n + word
	}
	return n + word + " (" + strings.Join(parts, ", ") + ")"
}

// TriggerSource says which events a trigger watches.
func TriggerSource(it Object) string {
	switch {
	case Lookup(it, "spec", "source", "runnableEnded") != nil:
		return "runnableEnded"
	case Lookup(it, "spec", "source", "deployableRolledOut") != nil:
		if n := Field(it, "spec", "source", "deployableRolledOut", "name"); n != "" {
			return "deployableRolledOut " + n
		}
		return "deployableRolledOut"
	case Lookup(it, "spec", "source", "webhook") != nil:
		return "webhook"
	}
	return "<none>"
}

// QuotaRows are a quota's limits in name order, each [name, used, limit].
func QuotaRows(it Object) [][]string {
	limits, _ := Lookup(it, "spec", "limits").(map[string]any)
	names := make([]string, 0, len(limits))
	for n := range limits {
		names = append(names, n)
	}
	sort.Strings(names)
	rows := make([][]string, 0, len(names))
	for _, n := range names {
		used := Field(it, "status", "used", n)
		if used == "" {
			used = "0"
		}
		rows = append(rows, []string{n, used, fmt.Sprint(limits[n])})
	}
	return rows
}

func syncSummary(obj Object) (synced, total int, perCluster string) {
	var parts []string
	for _, c := range list(obj, "status", "clusters") {
		m, _ := c.(map[string]any)
		total++
		if m["state"] == string(v1alpha1.StateSynced) {
			synced++
		}
		parts = append(parts, fmt.Sprintf("%v=%v", m["cluster"], m["state"]))
	}
	return synced, total, strings.Join(parts, ",")
}

// attemptCount is a runnable's number of attempts: status.attemptCount,
// which lists carry, else the attempts a single GET carries.
func attemptCount(it Object) string {
	if n := Field(it, "status", "attemptCount"); n != "" {
		return n
	}
	return fmt.Sprint(len(list(it, "status", "attempts")))
}

// agoOrNone is how long ago ts was, or <none>.
func agoOrNone(ts string) string {
	if ts == "" {
		return orNone("")
	}
	return Age(ts) + " ago"
}
