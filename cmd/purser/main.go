// Command purser is the whole of purser in one binary: every control-plane
// component is a subcommand, and so is the command-line client. This
// package only wires flags to constructors.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() { os.Exit(execute()) }

// execute runs the command line and returns the exit code, so that the
// signal handling is undone before the process exits.
func execute() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCommand().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		return 1
	}
	return 0
}
