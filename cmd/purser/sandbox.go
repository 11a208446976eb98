package main

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/purser-io/purser/internal/sandbox"
)

const defaultSandboxDir = "purser-data/sandbox"

func newSandboxCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sandbox",
		Short: "Run local Kubernetes clusters for trying purser and for its tests",
		Long: `Local Kubernetes clusters on this machine: per cluster a real etcd,
kube-apiserver, kube-controller-manager and kube-scheduler, kwok nodes whose
pods run and complete, and the Argo Workflows controller.

The binaries are built from pinned Go modules under tools/ on first use and
cached (in $PURSER_SANDBOX_CACHE, default <user cache dir>/purser/sandbox);
the first build takes several minutes, later starts a few seconds. Each
cluster uses about 0.6 GB of memory.`,
	}
	cmd.AddCommand(newSandboxUpCommand(), newSandboxDownCommand(), newSandboxBuildCommand())
	return cmd
}

func newSandboxUpCommand() *cobra.Command {
	var (
		clusters, nodes int
		dir             string
		argo            bool
	)
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start local clusters and keep them running until Ctrl-C",
		Long: `Start N local clusters named sandbox-1 .. sandbox-N (labels dc: dc-1 ..
dc-N) in DIR, with admin kubeconfigs at DIR/<name>/kubeconfig, and keep them
running until interrupted (Ctrl-C, SIGTERM, or "purser sandbox down --dir DIR"
from another shell). Stopping leaves no process behind and keeps the data:
running "up" again on the same DIR brings the clusters back with their
objects, at the same addresses when those ports are still free.`,
		Example: `  purser sandbox up --clusters 2 --dir /tmp/x
  kubectl --kubeconfig /tmp/x/sandbox-1/kubeconfig get nodes`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if clusters < 1 {
				return fmt.Errorf("--clusters must be at least 1, got %d", clusters)
			}
			if nodes < 1 {
				return fmt.Errorf("--nodes must be at least 1, got %d", nodes)
			}
			ctx := cmd.Context()
			out := cmd.OutOrStdout()
			bins, err := sandbox.Ensure(ctx, sandbox.BuildConfig{Progress: out})
			if err != nil {
				return err
			}
			abs, err := filepath.Abs(dir)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "starting %d cluster(s) in %s ...\n", clusters, abs)
			start := time.Now()
			fleet, err := sandbox.StartFleet(ctx, sandbox.FleetConfig{
				Dir: abs, Clusters: clusters, Nodes: nodes, Argo: argo, Binaries: bins, Progress: out,
			})
			if err != nil {
				return err
			}
			defer func() {
				fmt.Fprintln(out, "stopping clusters ...")
				fleet.Stop()
				fmt.Fprintln(out, "stopped; no sandbox process is left")
			}()
			fmt.Fprintf(out, "%d cluster(s) ready in %s; press Ctrl-C to stop\n", clusters, time.Since(start).Round(100*time.Millisecond))
			<-ctx.Done()
			return nil
		},
	}
	cmd.Flags().IntVar(&clusters, "clusters", 2, "number of clusters")
	cmd.Flags().IntVar(&nodes, "nodes", 1, "kwok nodes per cluster (32 CPU, 256Gi, 110 pods each)")
	cmd.Flags().StringVar(&dir, "dir", defaultSandboxDir, "folder holding the clusters' data, keys, logs and kubeconfigs")
	cmd.Flags().BoolVar(&argo, "argo", true, "install the Argo Workflows CRDs and run its controller in each cluster")
	return cmd
}

func newSandboxDownCommand() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Stop the local clusters running in DIR",
		Long: `Stop the clusters that "purser sandbox up" runs in DIR, from another
shell, and make sure none of their processes is left. The data stays in DIR;
remove the folder to start afresh next time.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return sandbox.Down(cmd.Context(), dir, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&dir, "dir", defaultSandboxDir, "folder given to purser sandbox up")
	return cmd
}

func newSandboxBuildCommand() *cobra.Command {
	var dex bool
	cmd := &cobra.Command{
		Use:   "build",
		Short: "Build and cache the sandbox binaries now (otherwise done on first use)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			start := time.Now()
			bins, err := sandbox.Ensure(cmd.Context(), sandbox.BuildConfig{Progress: cmd.OutOrStdout()})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "sandbox binaries ready in %s (%s)\n", bins.Dir, time.Since(start).Round(time.Second))
			if dex {
				start := time.Now()
				path, err := sandbox.EnsureDex(cmd.Context(), sandbox.BuildConfig{Progress: cmd.OutOrStdout()})
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "dex ready at %s (%s)\n", path, time.Since(start).Round(time.Second))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&dex, "dex", false, "also build Dex "+sandbox.DexVersion+", the OpenID Connect provider of the single sign-on tests")
	return cmd
}
