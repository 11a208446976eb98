package printer

import (
	"fmt"
	"io"

	"github.com/purser-io/purser/internal/domain/drill"
)

// Drill prints a drill's what-if as tables: the verdict, the moves, the
// runnables left and why, each cluster before and after.
func Drill(w io.Writer, rep *drill.Report, noHeaders bool) error {
	fmt.Fprintf(w, "%s: %s\n", rep.Verdict, rep.Message)
	if len(rep.Moves) > 0 {
		fmt.Fprintln(w)
		tw := newTabWriter(w)
		if !noHeaders {
			fmt.Fprintln(tw, "RUNNABLE\tFROM\tTO\tDOWNTIME\tRESTORE POINT")
		}
		for _, m := range rep.Moves {
			rp := "<none>"
			if m.RestorePoint != nil {
				rp = m.RestorePoint.Kind + " " + m.RestorePoint.Path
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%gs\t%s\n", m.Runnable, m.From, m.To, m.DowntimeSeconds, rp)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(rep.Unplaceable) > 0 {
		fmt.Fprintln(w)
		tw := newTabWriter(w)
		if !noHeaders {
			fmt.Fprintln(tw, "LEFT\tREASON")
		}
		for _, u := range rep.Unplaceable {
			fmt.Fprintf(tw, "%s\t%s\n", u.Runnable, u.Reason)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(w)
	tw := newTabWriter(w)
	if !noHeaders {
		fmt.Fprintln(tw, "CLUSTER\tRUNNABLES\tCPU FREE\tMEMORY FREE")
	}
	for _, c := range rep.Clusters {
		after := "lost"
		runnables, cpu, mem := fmt.Sprint(c.Before.Runnables)+" -> ", orUnknown(c.Before.Free["cpu"])+" -> ", orUnknown(c.Before.Free["memory"])+" -> "
		if c.After != nil {
			runnables += fmt.Sprint(c.After.Runnables)
			cpu += orUnknown(c.After.Free["cpu"])
			mem += orUnknown(c.After.Free["memory"])
		} else {
			runnables, cpu, mem = runnables+after, cpu+after, mem+after
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Name, runnables, cpu, mem)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(rep.Moves) > 0 {
		fmt.Fprintf(w, "\n%d to move, the last placed after %gs\n", len(rep.Moves), rep.DurationSeconds)
	}
	return nil
}
