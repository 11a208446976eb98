package printer

import (
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
			rp = m.RestorePoint.Kind + " " + m.RestorePoint.Path
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
