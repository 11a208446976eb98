package printer

import (
	"fmt"
	"io"
)

// History prints audit entries as a table, in the order given.
func History(w io.Writer, entries []Object) error {
	tw := newTabWriter(w)
	fmt.Fprintln(tw, "SEQ\tTIME\tACTOR\tACTION\tOBJECT\tOUTCOME\tSUMMARY")
	for _, e := range entries {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", Field(e, "seq"), Timestamp(Field(e, "time")), Field(e, "actor"),
			Field(e, "action"), Field(e, "object"), Field(e, "outcome"), Field(e, "summary"))
	}
	return tw.Flush()
}
