package main

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/purser-io/purser/internal/api/auth"
	"github.com/purser-io/purser/internal/cli/client"
	"github.com/purser-io/purser/internal/compose/up"
)

// dataFile is a file of a context's data folder (tokens, policy), or the
// path given to override it.
func dataFile(sel client.Selection, override, name string) (string, error) {
	if override != "" {
		return override, nil
	}
	ctx, err := client.SelectedContext(sel)
	if err != nil {
		return "", err
	}
	if ctx.DataDir == "" {
		return "", fmt.Errorf("context %s has no data folder (it was not written by purser up); name the file instead", ctx.Name)
	}
	return filepath.Join(ctx.DataDir, name), nil
}

func newTokenCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Bearer tokens of the tokens file",
		Args:  cobra.NoArgs,
	}
	var sel client.Selection
	var file string
	var groups []string
	create := &cobra.Command{
		Use:   "create USER [--group G]...",
		Short: "Make a token for USER, print it once, and keep only its hash in the tokens file",
		Long: `Make a new random token for USER (in the groups given), add its SHA-256 to the
tokens file and print the token on standard output, once: it is stored
nowhere else. The tokens file is that of the current context's data folder
(DIR/tokens.yaml of purser up), or of --context NAME, or --tokens-file. Its
comments and other entries are kept. What USER may do comes from the policy
file (purser policy check validates it). A user may hold several tokens.
purser up and purser api reload the tokens file when it changes, within a
second or so; no restart is needed.`,
		Example: `  purser token create alice --group team-a
  TOKEN=$(purser token create ci-bot)`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := dataFile(sel, file, up.TokensFile)
			if err != nil {
				return err
			}
			token, err := auth.AddToken(path, args[0], groups)
			if err != nil {
				return err
			}
			fmt.Fprintln(stdout(cmd), token)
			fmt.Fprintf(stderr(cmd), "token of %s added to %s (its hash only); it is printed this once\n", args[0], path)
			return nil
		},
	}
	create.Flags().StringArrayVar(&groups, "group", nil, "a group of the user (repeat for several); the policy names groups as group:NAME")
	create.Flags().StringVar(&file, "tokens-file", "", "the tokens `FILE` to add to (default: tokens.yaml of the context's data folder)")
	create.Flags().StringVar(&sel.Context, "context", "", "the context whose data folder holds the tokens file (default: the current one)")
	cmd.AddCommand(create)
	return cmd
}

func newPolicyCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "The policy file: who may do what, where",
		Args:  cobra.NoArgs,
	}
	var sel client.Selection
	check := &cobra.Command{
		Use:   "check [FILE]",
		Short: "Validate a policy file as the server reads it, with every problem by its place",
		Long: `Read a policy file as the server does and report every problem: YAML that
does not parse (with its line), fields the policy does not have (by their
path, such as namespaces.team-a.rols), unknown roles. It also warns about
rules that load but will not do what they seem to: namespaces whose changes
wait for an approval nobody may give, namespace keys that are not namespace
names, empty subjects, and users with no token in the tokens file beside
it. FILE defaults to policy.yaml of the current context's data folder (or
of --context NAME). It fails only on problems, not on warnings.`,
		Example: `  purser policy check
  purser policy check deploy/policy.yaml`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			override := ""
			if len(args) == 1 {
				override = args[0]
			}
			path, err := dataFile(sel, override, up.PolicyFile)
			if err != nil {
				return err
			}
			rep, err := auth.CheckPolicyFile(path, filepath.Join(filepath.Dir(path), up.TokensFile))
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			for _, w := range rep.Warnings {
				fmt.Fprintf(stderr(cmd), "warning: %s\n", w)
			}
			fmt.Fprintf(stdout(cmd), "%s is valid: %d admin subjects, namespaces %v, %d warnings\n", path, rep.Admins, rep.Namespaces, len(rep.Warnings))
			return nil
		},
	}
	check.Flags().StringVar(&sel.Context, "context", "", "the context whose data folder holds the policy file (default: the current one)")
	cmd.AddCommand(check)
	return cmd
}
