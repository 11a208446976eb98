package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/purser-io/purser/internal/cli/client"
)

func newDeleteCommand() *cobra.Command {
	var cf clientFlags
	var ff fileFlags
	var namespace string
	cmd := &cobra.Command{
		Use:   "delete (KIND NAME [NAME...] | KIND/NAME... | -f FILE|DIR|-)",
		Short: "Cancel or remove runnables, delete deployables everywhere, remove clusters",
		Long: `Delete objects named by arguments, or every object of the files given with -f
(as for apply). A runnable that still runs, or waits, is cancelled: it is
removed from its cluster and its phase becomes Cancelled. A runnable that
has ended is removed; its history stays in the audit log (purser history).
A deployable is removed from every cluster (in a namespace that requires
approval, its deletion waits for one). A cluster is unregistered.`,
		Example: `  purser delete runnable nightly-report -n team-a
  purser delete -f examples/deployable-configmap.yaml
  purser get rn -n team-a -l app=old -o name | xargs purser delete -n team-a`,
		RunE: func(cmd *cobra.Command, args []string) error {
			type victim struct {
				res      client.Resource
				ns, name string
				where    string // the file and document, for -f
			}
			var victims []victim
			switch {
			case len(ff.files) > 0 && len(args) > 0:
				return errors.New("give objects by name or with -f, not both")
			case len(ff.files) > 0:
				objs, err := ff.read(cmd)
				if err != nil {
					return err
				}
				for _, o := range objs {
					r, ok := client.ResourceOfKind(o.Kind())
					if !ok {
						return fmt.Errorf("%s: kind %q is not a purser kind (Runnable, Deployable, Cluster)", o.Where(), o.Kind())
					}
					if o.Name() == "" {
						return fmt.Errorf("%s: the object has no metadata.name, so there is nothing to delete by name", o.Where())
					}
					ns := o.Namespace()
					if ns == "" {
						ns = namespace
					}
					victims = append(victims, victim{r, ns, o.Name(), o.Where() + ": "})
				}
			default:
				targets, err := parseTargets(args)
				if err != nil {
					return err
				}
				for _, t := range targets {
					if t.name == "" {
						return fmt.Errorf("say which %s to delete: %s NAME", t.res.Singular(), t.res.Plural)
					}
					victims = append(victims, victim{t.res, namespace, t.name, ""})
				}
			}
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			failed := 0
			for _, v := range victims {
				line, err := c.Delete(cmd.Context(), v.res, v.ns, v.name)
				if err != nil && len(victims) == 1 {
					return named(c, err)
				}
				if err != nil {
					failed++
					fmt.Fprintf(stderr(cmd), "%s%v\n", v.where, err)
					continue
				}
				fmt.Fprintln(stdout(cmd), line)
			}
			if failed > 0 {
				return named(c, fmt.Errorf("%d of %d deletions failed", failed, len(victims)))
			}
			return nil
		},
	}
	ff.register(cmd, "whose objects to delete")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "namespace (of objects in files that name none)")
	cf.register(cmd)
	return cmd
}
