package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/purser-io/purser/internal/cli/client"
	"github.com/purser-io/purser/internal/cli/manifest"
)

// fileFlags are -f and -R, as kubectl has them.
type fileFlags struct {
	files     []string
	recursive bool
}

func (f *fileFlags) register(cmd *cobra.Command, what string) {
	cmd.Flags().StringSliceVarP(&f.files, "filename", "f", nil, "`FILE`, folder or - (standard input) "+what+"; repeat it, or separate with commas, for several")
	cmd.Flags().BoolVarP(&f.recursive, "recursive", "R", false, "with -f DIR, also read the folder's subfolders")
}

func (f *fileFlags) read(cmd *cobra.Command) ([]*manifest.Object, error) {
	objs, err := manifest.Read(f.files, manifest.Config{Recursive: f.recursive, Stdin: cmd.InOrStdin()})
	if err != nil {
		return nil, err
	}
	if len(objs) == 0 {
		return nil, fmt.Errorf("%v holds no object", f.files)
	}
	return objs, nil
}

// inNamespace fills an object's namespace from -n when it has none, as
// kubectl does, and refuses an object that names another namespace than
// -n. It returns the body to send.
func inNamespace(o *manifest.Object, ns string, nsGiven bool) ([]byte, string, error) {
	r, ok := client.ResourceOfKind(o.Kind())
	if !ok || !r.Namespaced || !nsGiven {
		return o.Body, o.ContentType, nil
	}
	switch o.Namespace() {
	case ns:
		return o.Body, o.ContentType, nil
	case "":
		md, _ := o.Fields["metadata"].(map[string]any)
		if md == nil {
			md = map[string]any{}
			o.Fields["metadata"] = md
		}
		md["namespace"] = ns
		data, err := json.Marshal(o.Fields)
		return data, manifest.ContentJSON, err
	}
	return nil, "", fmt.Errorf("the object's namespace %q is not %q, the one -n names", o.Namespace(), ns)
}

func newApplyCommand() *cobra.Command {
	var cf clientFlags
	var ff fileFlags
	var namespace string
	cmd := &cobra.Command{
		Use:   "apply -f FILE|DIR|- [-f ...]",
		Short: "Submit Runnables and create or update Deployables and Clusters from YAML or JSON",
		Long: `Send every object of the files to the API, in order: a Runnable is submitted
(submitting the same one again changes nothing), a Deployable is created or
updated, a Cluster is registered or updated (without spec.kubeconfig the
stored one is kept, so the output of "purser get cluster X -o yaml", edited,
applies). Files hold YAML documents separated by ---, or JSON; a List's items
are applied one by one. -f takes files, folders (their .yaml, .yml and .json
files; -R also their subfolders) and - for standard input, and may be given
several times.

Every file is read first: if any object cannot be read, nothing is applied
and every problem is listed with its file and document number. Then each
object gets one line: submitted, created, registered, configured, or
unchanged when it was already so. The command fails if any object failed.`,
		Example: `  purser apply -f examples/runnable-job.yaml
  purser apply -f config/ -R
  purser apply -f a.yaml -f b.yaml
  cat deployables.yaml | purser apply -f -`,
		Args: cobra.NoArgs,
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
			failed := 0
			for _, o := range objs {
				body, ctype, err := inNamespace(o, namespace, nsGiven)
				if err == nil {
					ns := o.Namespace()
					if ns == "" && nsGiven {
						ns = namespace
					}
					var res client.Applied
					if res, err = c.Apply(cmd.Context(), o.Kind(), ns, o.Name(), body, ctype); err == nil {
						fmt.Fprintln(stdout(cmd), res)
						continue
					}
				}
				failed++
				fmt.Fprintf(stderr(cmd), "%s: %v\n", o.Where(), err)
			}
			if failed > 0 {
				return named(c, fmt.Errorf("%d of %d objects failed", failed, len(objs)))
			}
			return nil
		},
	}
	ff.register(cmd, "to apply")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "namespace of the objects that name none")
	_ = cmd.MarkFlagRequired("filename")
	cf.register(cmd)
	return cmd
}
