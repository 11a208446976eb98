package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/purser-io/purser/internal/cli/client"
	"github.com/purser-io/purser/internal/cli/printer"
)

// clientFlags are the connection flags of every client command.
type clientFlags struct {
	sel     client.Selection
	verbose bool
}

func (f *clientFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.sel.Server, "server", "", "`URL` of the purser API, such as http://127.0.0.1:8080 (default: the context's server, else $PURSER_SERVER)")
	fl.StringVar(&f.sel.Token, "token", "", "bearer `TOKEN` (default: $PURSER_TOKEN unless --context is given, else the login of purser login for the server, else the context's token)")
	fl.StringVar(&f.sel.Context, "context", "", "`NAME` of the context of the client config to use (default: its current context; see purser config get-contexts)")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "say which server, and which context, the command talks to")
}

// client resolves the server and token (a login of purser login for the
// server before a context's token); with -v it says which on stderr.
func (f *clientFlags) client(cmd *cobra.Command) (*client.Client, error) {
	ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
	defer cancel()
	cfg, err := client.ResolveWithLogin(ctx, f.sel)
	if err != nil {
		return nil, err
	}
	c := client.New(cfg)
	if f.verbose {
		fmt.Fprintln(cmd.ErrOrStderr(), "talking to "+c.Describe())
	}
	return c, nil
}

// named puts the server on the first line of an error, so that a user
// with several contexts sees which server said no.
func named(c *client.Client, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", c.Describe(), err)
}

// stdout and stderr of a command, short.
func stdout(cmd *cobra.Command) io.Writer { return cmd.OutOrStdout() }
func stderr(cmd *cobra.Command) io.Writer { return cmd.ErrOrStderr() }

// tableFlags is --no-headers, on every command that prints a table.
type tableFlags struct{ noHeaders bool }

func (f *tableFlags) register(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.noHeaders, "no-headers", false, "print tables without their header lines, as kubectl does (table output only)")
}

// out is where a command prints: its standard output, without the tables'
// headers under --no-headers when table is set (never in YAML or JSON).
func (f *tableFlags) out(cmd *cobra.Command, table bool) io.Writer {
	if f.noHeaders && table {
		return printer.WithoutHeaders(stdout(cmd))
	}
	return stdout(cmd)
}
