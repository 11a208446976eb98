package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/spf13/cobra"

	"github.com/purser-io/purser/internal/cli/client"
	"github.com/purser-io/purser/internal/cli/printer"
)

func newConfigCommand() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "config",
		Short: "The client config: which purser servers this machine talks to (contexts)",
		Long: `The client config holds contexts, as kubectl's kubeconfig does: each names a
purser server, the token to send it and, for one started by "purser up", its
data folder. Client commands use the current context unless given --context
NAME, --server or PURSER_SERVER. "purser up" adds (or, on a restart,
refreshes) the context named after its data folder and makes it current.

The file is $PURSER_CONFIG, else ~/.config/purser/config.yaml.`,
		Args: cobra.NoArgs,
	}
	cmd.PersistentFlags().StringVar(&path, "client-config", "", "the client config `FILE` (default: $PURSER_CONFIG, else ~/.config/purser/config.yaml)")
	file := func() (string, *client.File, error) {
		p := path
		if p == "" {
			var err error
			if p, err = client.DefaultConfigPath(); err != nil {
				return "", nil, err
			}
		}
		f, err := client.ReadFile(p)
		return p, f, err
	}
	var output string
	var tf tableFlags
	getContexts := &cobra.Command{
		Use:   "get-contexts",
		Short: "List the contexts: name, server and data folder, one a line; * marks the current one",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := printer.ParseFormat(output, printer.OutputName)
			if err != nil {
				return err
			}
			p, f, err := file()
			if err != nil {
				return err
			}
			if len(f.Contexts) == 0 {
				fmt.Fprintf(stderr(cmd), "No contexts in %s; `purser up` adds one.\n", p)
				return nil
			}
			if format.Name == printer.OutputName {
				for _, n := range f.Names() {
					fmt.Fprintln(stdout(cmd), n)
				}
				return nil
			}
			return printer.Contexts(tf.out(cmd, true), f)
		},
	}
	getContexts.Flags().StringVarP(&output, "output", "o", "", "output format: name (the names alone)")
	tf.register(getContexts)
	useContext := &cobra.Command{
		Use:   "use-context NAME",
		Short: "Make NAME the context client commands use",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, _, err := file()
			if err != nil {
				return err
			}
			var ctx client.Context
			err = client.EditFile(p, func(f *client.File) error {
				var ok bool
				if ctx, ok = f.Find(args[0]); !ok {
					return fmt.Errorf("no context %q in %s (contexts: %v)", args[0], p, f.Names())
				}
				f.CurrentContext = args[0]
				return nil
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout(cmd), "Switched to context %q (%s).\n", ctx.Name, ctx.Server)
			return nil
		},
	}
	currentContext := &cobra.Command{
		Use:   "current-context",
		Short: "Print the current context's name",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, f, err := file()
			if err != nil {
				return err
			}
			if f.CurrentContext == "" {
				return fmt.Errorf("%s has no current context; choose one with `purser config use-context NAME`", p)
			}
			fmt.Fprintln(stdout(cmd), f.CurrentContext)
			return nil
		},
	}
	deleteContext := &cobra.Command{
		Use:   "delete-context NAME",
		Short: "Remove a context (its server is not touched)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, _, err := file()
			if err != nil {
				return err
			}
			err = client.EditFile(p, func(f *client.File) error {
				if _, ok := f.Find(args[0]); !ok {
					return fmt.Errorf("no context %q in %s (contexts: %v)", args[0], p, f.Names())
				}
				f.Remove(args[0])
				return nil
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout(cmd), "Deleted context %q.\n", args[0])
			return nil
		},
	}
	prune := &cobra.Command{
		Use:   "prune",
		Short: "Remove the contexts of purser up instances that are gone: data folder removed and server silent",
		Long: `Remove every context whose data folder (the purser up that wrote it) no
longer exists and whose server does not answer. Contexts of servers started
otherwise (no data folder) are never removed; neither is one whose server
still answers.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, _, err := file()
			if err != nil {
				return err
			}
			var gone []string
			err = client.EditFile(p, func(f *client.File) error {
				gone = f.Prune(func(c client.Context) bool { return answers(cmd.Context(), c.Server) })
				return nil
			})
			if err != nil {
				return err
			}
			if len(gone) == 0 {
				fmt.Fprintln(stdout(cmd), "Nothing to prune.")
			}
			for _, n := range gone {
				fmt.Fprintf(stdout(cmd), "Deleted context %q: its data folder is gone and its server does not answer.\n", n)
			}
			return nil
		},
	}
	cmd.AddCommand(getContexts, useContext, currentContext, deleteContext, prune)
	return cmd
}

// answers reports whether something listens at a server's address: a
// TCP connection within two seconds.
func answers(ctx context.Context, server string) bool {
	u, err := url.Parse(server)
	if err != nil || u.Host == "" {
		return false
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), map[bool]string{true: "443", false: "80"}[u.Scheme == "https"])
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", host)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}
