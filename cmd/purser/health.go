package main

import (
	"github.com/spf13/cobra"

	"github.com/purser-io/purser/internal/member/health"
)

func newHealthCommand() *cobra.Command {
	var file, rulesFile string
	cmd := &cobra.Command{
		Use:   "health -f FILE [--rules FILE]",
		Short: "Judge the health of the Kubernetes objects in a file, offline",
		Long: `Print, for each object of FILE (YAML documents separated by ---, JSON, or a
List), one line: <kind>/<name> <Healthy|Unhealthy|Unknown> <phase> <message>.
Built-in interpreters know Job, Argo Workflow, Deployment, StatefulSet and
FlinkDeployment; --rules adds CEL rules for any kind (see docs/health.md).
A purser Runnable or Deployable is judged by its spec.template, with the
status the runnable last observed (status.result) when it has one, and the
message says so.`,
		Example: `  kubectl get job nightly -o yaml | purser health -f -
  purser get runnable nightly-report -n team-a -o yaml | purser health -f -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			interp, err := health.Load(rulesFile)
			if err != nil {
				return err
			}
			if file == "-" {
				return health.Evaluate(cmd.OutOrStdout(), cmd.InOrStdin(), interp)
			}
			return health.EvaluateFile(cmd.OutOrStdout(), file, interp)
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "YAML or JSON file of objects, - for standard input")
	cmd.Flags().StringVar(&rulesFile, "rules", "", "YAML file whose healthRules (CEL) judge kinds before the built-ins")
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}
