package printer

import (
	"fmt"
	"io"

	"github.com/purser-io/purser/internal/cli/client"
)

// Contexts lists a client config's contexts as `kubectl config
// get-contexts` does: one a line, the current one marked. Tokens are never
// printed.
func Contexts(w io.Writer, f *client.File) error {
	tw := newTabWriter(w)
	fmt.Fprintln(tw, "CURRENT\tNAME\tSERVER\tDATA-DIR")
	for _, c := range f.Contexts {
		mark := ""
		if c.Name == f.CurrentContext {
			mark = "*"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", mark, c.Name, c.Server, orNone(c.DataDir))
	}
	return tw.Flush()
}
