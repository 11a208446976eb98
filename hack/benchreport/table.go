package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// section is one generated table of docs/benchmarks.md.
type section struct {
	ID      string
	Columns []string
	Rows    [][]cell
}

// cell is one table cell, computed from the results of one run.
type cell interface {
	text(r lookup) string
}

// lookup finds a result's metric by "package.Benchmark/sub" and unit;
// when it is missing, why says so in a word ("skipped", "failed", "not
// run", "—").
type lookup interface {
	value(name, unit string) (v float64, why string, ok bool)
}

// lit is fixed text.
type lit string

func (l lit) text(lookup) string { return string(l) }

// fig is one figure: a metric, scaled (or inverted: rate from ns/op),
// printed with prec decimals and a suffix.
type fig struct {
	name, unit string
	scale      float64
	invert     bool // scale / value instead of value × scale
	prec       int
	suffix     string
}

func metric(name, unit string, prec int, suffix string) fig {
	return fig{name: name, unit: unit, scale: 1, prec: prec, suffix: suffix}
}

// secs, millis and micros give a benchmark's time per operation.
func secs(name string, prec int) fig {
	return fig{name: name, unit: "ns/op", scale: 1e-9, prec: prec, suffix: " s"}
}

func millis(name string, prec int) fig {
	return fig{name: name, unit: "ns/op", scale: 1e-6, prec: prec, suffix: " ms"}
}

func micros(name string, prec int) fig {
	return fig{name: name, unit: "ns/op", scale: 1e-3, prec: prec, suffix: " µs"}
}

// perSec gives operations per second from the time per operation.
func perSec(name string, prec int, suffix string) fig {
	return fig{name: name, unit: "ns/op", scale: 1e9, invert: true, prec: prec, suffix: suffix}
}

func (f fig) get(r lookup) (float64, string, bool) {
	v, why, ok := r.value(f.name, f.unit)
	if !ok {
		return 0, why, false
	}
	if f.invert {
		if v == 0 {
			return 0, "—", false
		}
		return f.scale / v, "", true
	}
	return v * f.scale, "", true
}

func (f fig) text(r lookup) string {
	v, why, ok := f.get(r)
	if !ok {
		return why
	}
	return number(v, f.prec) + f.suffix
}

// quantity is a cell with a numeric value, which ratios combine.
type quantity interface {
	cell
	get(r lookup) (float64, string, bool)
}

// ratioCell is num / den, both from the same run.
type ratioCell struct {
	num, den quantity
	prec     int
	percent  bool
}

func ratio(num, den quantity, prec int) ratioCell { return ratioCell{num: num, den: den, prec: prec} }

// percent is num / den in per cent, no decimals.
func percent(num, den quantity) ratioCell { return ratioCell{num: num, den: den, percent: true} }

func (c ratioCell) get(r lookup) (float64, string, bool) {
	n, why, ok := c.num.get(r)
	if !ok {
		return 0, why, false
	}
	d, why, ok := c.den.get(r)
	if !ok {
		return 0, why, false
	}
	if d == 0 {
		return 0, "—", false
	}
	return n / d, "", true
}

func (c ratioCell) text(r lookup) string {
	v, why, ok := c.get(r)
	switch {
	case !ok:
		return why
	case c.percent:
		return number(100*v, 0) + " %"
	default:
		return number(v, c.prec)
	}
}

// bestCell is the largest of its figures: the ceiling when a benchmark
// has several shapes (one client, many).
type bestCell struct{ of []quantity }

func best(of ...quantity) bestCell { return bestCell{of: of} }

func (c bestCell) get(r lookup) (float64, string, bool) {
	var top float64
	for i, q := range c.of {
		v, why, ok := q.get(r)
		if !ok {
			return 0, why, false
		}
		if i == 0 || v > top {
			top = v
		}
	}
	return top, "", true
}

func (c bestCell) text(r lookup) string {
	v, why, ok := c.get(r)
	if !ok {
		return why
	}
	return number(v, 0)
}

// diffCell is a - b, printed as a's figure is.
type diffCell struct{ a, b fig }

func diff(a, b fig) diffCell { return diffCell{a: a, b: b} }

func (c diffCell) text(r lookup) string {
	x, why, ok := c.a.get(r)
	if !ok {
		return why
	}
	y, why, ok := c.b.get(r)
	if !ok {
		return why
	}
	return number(x-y, c.a.prec) + c.a.suffix
}

// joinCell puts cells side by side ("p50 / p99"). When every part that is
// a figure is missing, it says why once instead of "skipped / skipped".
type joinCell struct {
	sep   string
	parts []cell
}

func join(sep string, parts ...cell) joinCell { return joinCell{sep: sep, parts: parts} }

func (c joinCell) text(r lookup) string {
	var out []string
	why, figures, missing := "", 0, 0
	for _, p := range c.parts {
		if q, isQ := p.(quantity); isQ {
			figures++
			if _, w, ok := q.get(r); !ok {
				missing++
				why = w
			}
		}
		out = append(out, p.text(r))
	}
	if figures > 0 && missing == figures {
		return why
	}
	return strings.Join(out, c.sep)
}

// number prints v with prec decimals and thousands separated by commas,
// as the document writes them.
func number(v float64, prec int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "—"
	}
	s := strconv.FormatFloat(math.Abs(v), 'f', prec, 64)
	whole, frac, _ := strings.Cut(s, ".")
	var b strings.Builder
	if v < 0 && strings.Trim(s, "0.") != "" {
		b.WriteByte('-')
	}
	for i, d := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(d)
	}
	if frac != "" {
		b.WriteByte('.')
		b.WriteString(frac)
	}
	return b.String()
}

// markdown renders the table.
func (s section) markdown(r lookup) string {
	var b strings.Builder
	row := func(cells []string) {
		for i := range cells {
			cells[i] = strings.ReplaceAll(cells[i], "|", `\|`)
		}
		fmt.Fprintf(&b, "| %s |\n", strings.Join(cells, " | "))
	}
	row(append([]string(nil), s.Columns...))
	sep := make([]string, len(s.Columns))
	for i := range sep {
		sep[i] = "---"
	}
	row(sep)
	for _, cells := range s.Rows {
		texts := make([]string, len(cells))
		for i, c := range cells {
			texts[i] = c.text(r)
		}
		row(texts)
	}
	return b.String()
}
