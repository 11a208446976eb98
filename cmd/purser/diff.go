package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/purser-io/purser/api/v1alpha1"
)

func newDiffCommand() *cobra.Command {
	var cf clientFlags
	var ff fileFlags
	var namespace string
	cmd := &cobra.Command{
		Use:   "diff -f FILE|DIR|- [-f ...]",
		Short: "Show what apply would change in the Runnables of the files",
		Long: `For every Runnable of the files, the difference between its stored spec,
labels and annotations and those of the file, as a unified diff of YAML,
with the file's defaults filled in as the API fills them (so a field left
to its default is no change). A Runnable that does not exist yet is shown
as new. Nothing is sent but reads. Other kinds are skipped with a note.`,
		Example: `  purser diff -f examples/runnable-job.yaml`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			objs, err := ff.read(cmd)
			if err != nil {
				return err
			}
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			nsGiven := cmd.Flags().Changed("namespace")
			for _, o := range objs {
				if o.Kind() != v1alpha1.KindRunnable {
					fmt.Fprintf(stdout(cmd), "%s: %s is not compared (only Runnables are)\n", o.Where(), o.Kind())
					continue
				}
				if err := diffRunnable(cmd, c, o, namespace, nsGiven); err != nil {
					return err
				}
			}
			return nil
		},
	}
	ff.register(cmd, "to compare")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "namespace of the objects that name none")
	_ = cmd.MarkFlagRequired("filename")
	cf.register(cmd)
	return cmd
}
