package printer

import (
	"fmt"
	"io"
	"strings"
)

// Inventory prints inventory records as a table.
func Inventory(w io.Writer, items []Object, wide bool) error {
	tw := newTabWriter(w)
	header := "CLUSTER\tNAMESPACE\tKIND\tNAME\tHEALTH\tPHASE\tSEEN"
	if wide {
		header += "\tAPIVERSION\tLABELS"
	}
	fmt.Fprintln(tw, header)
	for _, it := range items {
		line := strings.Join([]string{Field(it, "cluster"), Field(it, "namespace"), Field(it, "kind"), Field(it, "name"),
			orNone(Field(it, "health")), orNone(Field(it, "phase")), Age(seenAt(it))}, "\t")
		if wide {
			labels, _ := Lookup(it, "labels").(map[string]any)
			line += "\t" + Field(it, "apiVersion") + "\t" + orNone(JoinLabels(labels))
		}
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}

// seenAt is when a record was last known to be its object's state (the
// API's seenAt), or its last change for a server that predates it.
func seenAt(it Object) string {
	if s := Field(it, "seenAt"); s != "" {
		return s
	}
	return Field(it, "observedAt")
}
