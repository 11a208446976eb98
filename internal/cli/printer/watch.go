package printer

import (
	"fmt"
	"io"
	"strings"
)

// Watcher prints what `get -w` sees, as kubectl does: the first objects as
// a table with its header, then one row for each object as it changes, in
// the columns of the first table. In the other formats each object is
// printed on its own (YAML documents separated by ---).
type Watcher struct {
	w      io.Writer
	format Format
	kind   string
	opts   TableOptions
	widths []int
	yamls  int
}

// NewWatcher returns a Watcher of objects of kind.
func NewWatcher(w io.Writer, format Format, kind string, opts TableOptions) *Watcher {
	opts.Wide = format.Name == OutputWide
	return &Watcher{w: w, format: format, kind: kind, opts: opts}
}

// Print prints objects: with the header the first time, for a table.
func (wt *Watcher) Print(items []Object) error {
	if !wt.format.Table() {
		for _, it := range items {
			if err := wt.printOne(it); err != nil {
				return err
			}
		}
		return nil
	}
	t := buildTable(wt.kind, items, wt.opts)
	rows := t.rows
	if wt.widths == nil {
		rows = append([][]string{t.header}, rows...)
		wt.widths = make([]int, len(t.header))
		for _, r := range rows {
			for i, c := range r {
				wt.widths[i] = max(wt.widths[i], len(c))
			}
		}
	}
	for _, r := range rows {
		var b strings.Builder
		for i, c := range r {
			if i == len(r)-1 {
				b.WriteString(c)
				break
			}
			b.WriteString(c)
			b.WriteString(strings.Repeat(" ", max(wt.widths[i]-len(c), 0)+3))
		}
		if _, err := fmt.Fprintln(wt.w, strings.TrimRight(b.String(), " ")); err != nil {
			return err
		}
	}
	return nil
}

func (wt *Watcher) printOne(it Object) error {
	switch wt.format.Name {
	case OutputName:
		_, err := fmt.Fprintln(wt.w, Name(it))
		return err
	case OutputJSONPath:
		return wt.format.JSONPath(wt.w, it)
	case OutputYAML:
		if wt.yamls > 0 {
			fmt.Fprintln(wt.w, "---")
		}
		wt.yamls++
	}
	return Structured(wt.w, wt.format.Name, it)
}
