package printer

import (
	"fmt"
	"io"

	"github.com/purser-io/purser/internal/cli/client"
)

// Kinds lists the kinds the command line knows, as `kubectl api-resources`
// does.
func Kinds(w io.Writer, resources []client.Resource) error {
	tw := newTabWriter(w)
	fmt.Fprintln(tw, "NAME\tSHORTNAMES\tNAMESPACED\tKIND")
	for _, r := range resources {
		fmt.Fprintf(tw, "%s\t%s\t%v\t%s\n", r.Plural, r.Short, r.Namespaced, r.Kind)
	}
	return tw.Flush()
}
