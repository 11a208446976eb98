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
	var namespace, fieldManager string
	var serverSide, forceConflicts bool
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
unchanged when it was already so. The command fails if any object failed.

--server-side applies each object by server-side apply through purser's
Kubernetes API (/k8s), as "kubectl apply --server-side" does: the fields
the file sets become the field manager's (--field-manager, default
"purser"), a field it set before and no longer sets is removed, and a field
another manager (a teammate's kubectl, a GitOps controller) owns with
another value is refused as a conflict naming that manager, unless
--force-conflicts takes it over. Runnables, Deployables, Quotas, Clusters
and placement policies are served so; the write goes through the same
checks, approvals and audit as without it.`,
		Example: `  purser apply -f examples/runnable-job.yaml
  purser apply -f config/ -R
  purser apply -f a.yaml -f b.yaml
  cat deployables.yaml | purser apply -f -
  purser apply --server-side --field-manager team-a-ci -f config/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !serverSide && (cmd.Flags().Changed("field-manager") || forceConflicts) {
				return fmt.Errorf("--field-manager and --force-conflicts go with --server-side")
			}
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
					if serverSide {
						res, err = c.ServerSideApply(cmd.Context(), o.Kind(), ns, o.Name(), body, fieldManager, forceConflicts)
					} else {
						res, err = c.Apply(cmd.Context(), o.Kind(), ns, o.Name(), body, ctype)
					}
					if err == nil {
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
	cmd.Flags().BoolVar(&serverSide, "server-side", false, "apply by server-side apply through /k8s: fields owned by a field manager, conflicts refused")
	cmd.Flags().StringVar(&fieldManager, "field-manager", "purser", "`NAME` of the field manager that owns what --server-side applies")
	cmd.Flags().BoolVar(&forceConflicts, "force-conflicts", false, "with --server-side, take over fields another field manager owns")
	_ = cmd.MarkFlagRequired("filename")
	cf.register(cmd)
	return cmd
}
