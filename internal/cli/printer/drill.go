package printer

import (
	"cmp"
	"fmt"
	"io"
	"strings"

	"github.com/purser-io/purser/api/v1alpha1"
)

// Drill prints a drill's what-if as tables: the verdict, the moves, the
// runnables left and why, each cluster before and after.
func Drill(w io.Writer, rep *v1alpha1.DrillReport, noHeaders bool) error {
	fmt.Fprintf(w, "%s: %s\n", rep.Verdict, rep.Message)
	var moves, left, clusters [][]string
	for _, m := range rep.Moves {
		rp := "<none>"
		if m.RestorePoint != nil {
			rp = m.RestorePoint.Kind + " " + cmp.Or(m.RestorePoint.Path, m.RestorePoint.Source)
		}
		moves = append(moves, []string{m.Runnable, m.From, m.To, fmt.Sprintf("%gs", m.DowntimeSeconds), rp})
	}
	for _, u := range rep.Unplaceable {
		left = append(left, []string{u.Runnable, u.Reason})
	}
	for _, c := range rep.Clusters {
		runnables, cpu, mem := fmt.Sprint(c.Before.Runnables)+" -> ", orUnknown(c.Before.Free["cpu"])+" -> ", orUnknown(c.Before.Free["memory"])+" -> "
		if c.After != nil {
			runnables += fmt.Sprint(c.After.Runnables)
			cpu += orUnknown(c.After.Free["cpu"])
			mem += orUnknown(c.After.Free["memory"])
		} else {
			runnables, cpu, mem = runnables+"lost", cpu+"lost", mem+"lost"
		}
		clusters = append(clusters, []string{c.Name, runnables, cpu, mem})
	}
	for _, t := range []struct {
		header string
		rows   [][]string
		always bool
	}{
		{"RUNNABLE\tFROM\tTO\tDOWNTIME\tRESTORE POINT", moves, false},
		{"LEFT\tREASON", left, false},
		{"CLUSTER\tRUNNABLES\tCPU FREE\tMEMORY FREE", clusters, true},
	} {
		if len(t.rows) == 0 && !t.always {
			continue
		}
		fmt.Fprintln(w)
		tw := newTabWriter(w)
		if !noHeaders {
			fmt.Fprintln(tw, t.header)
		}
		for _, row := range t.rows {
			fmt.Fprintln(tw, strings.Join(row, "\t"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(rep.Moves) > 0 {
		fmt.Fprintf(w, "\n%d to move, the last placed after %gs\n", len(rep.Moves), rep.DurationSeconds)
	}
	return nil
}

// DrillRun prints a real drill's report: its state and message, then per
// runnable what was planned against what happened, and the totals.
func DrillRun(w io.Writer, d *v1alpha1.Drill, noHeaders bool) error {
	st := d.Status
	fmt.Fprintf(w, "drill %s: %s %s, %s (started by %s at %s)\n", d.Metadata.Name, d.Spec.Target.Kind, d.Spec.Target.Name, st.State,
		st.StartedBy, st.StartedAt.UTC().Format("2006-01-02T15:04:05Z"))
	if st.Message != "" {
		fmt.Fprintln(w, st.Message)
	}
	rows := make([][]string, 0, len(st.Runnables))
	for _, o := range st.Runnables {
		planned := orNone(o.PlannedTo)
		down := "-"
		if o.DowntimeSeconds != nil {
			down = fmt.Sprintf("%.1fs", *o.DowntimeSeconds)
		}
		back := "-"
		if o.Back != nil {
			back = o.Back.Step
		}
		why := o.Error
		if why == "" {
			why = "-"
		}
		rows = append(rows, []string{o.Runnable, o.From, planned, orNone(o.To), o.Step, fmt.Sprintf("%gs", o.PlannedDowntimeSeconds), down,
			orNone(o.RestorePoint), back, why})
	}
	if len(rows) > 0 {
		fmt.Fprintln(w)
		tw := newTabWriter(w)
		if !noHeaders {
			fmt.Fprintln(tw, "RUNNABLE\tFROM\tPLANNED\tTO\tSTEP\tPLANNED DOWNTIME\tDOWNTIME\tRESTORED FROM\tBACK\tWHY")
		}
		for _, row := range rows {
			fmt.Fprintln(tw, strings.Join(row, "\t"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	t := st.Totals
	fmt.Fprintf(w, "\n%d of %d planned moves done, %d failed, %d under way; %d unplaceable; %d as planned; %gs (planned %gs)\n",
		t.Moved, t.Planned, t.Failed, t.Moving, t.Unplaceable, t.AsPlanned, st.DurationSeconds, st.PlannedDurationSeconds)
	if e := st.End; e != nil {
		fmt.Fprintf(w, "ended by %s at %s: uncordoned %s", e.By, e.At.UTC().Format("2006-01-02T15:04:05Z"), orNone(strings.Join(e.Uncordoned, ",")))
		if e.MoveBack {
			fmt.Fprintf(w, "; moved back %d, %d failed", t.MovedBack, t.FailedBack)
		}
		fmt.Fprintln(w)
	}
	return nil
}

// DrillList prints one line a drill.
func DrillList(w io.Writer, ds []v1alpha1.Drill, noHeaders bool) error {
	tw := newTabWriter(w)
	if !noHeaders {
		fmt.Fprintln(tw, "ID\tTARGET\tSTATE\tVERDICT\tMOVED\tFAILED\tUNPLACEABLE\tSTARTED BY\tSTARTED\tENDED")
	}
	for _, d := range ds {
		verdict := "-"
		if d.Status.Planned != nil {
			verdict = d.Status.Planned.Verdict
		}
		ended := "-"
		if e := d.Status.End; e != nil {
			ended = e.At.UTC().Format("2006-01-02T15:04:05Z")
		}
		t := d.Status.Totals
		fmt.Fprintf(tw, "%s\t%s %s\t%s\t%s\t%d/%d\t%d\t%d\t%s\t%s\t%s\n", d.Metadata.Name, d.Spec.Target.Kind, d.Spec.Target.Name, d.Status.State,
			verdict, t.Moved, t.Planned, t.Failed, t.Unplaceable, d.Status.StartedBy, d.Status.StartedAt.UTC().Format("2006-01-02T15:04:05Z"), ended)
	}
	return tw.Flush()
}
