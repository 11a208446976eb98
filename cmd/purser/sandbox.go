package main

import (
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/purser-io/purser/internal/cli/client"
	"github.com/purser-io/purser/internal/sandbox"
	"github.com/purser-io/purser/internal/sandbox/flinksim"
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
cluster uses about 0.6 GB of memory.

stop, start, status and flink act on the sandbox of a running
"purser up --sandbox N" (through DATA/sandbox/control.sock): take one
cluster down as a power cut would and bring it back, or make a job of the
Flink operator simulator (purser up --flink) fail, to watch purser notice
and move the work.`,
	}
	cmd.AddCommand(newSandboxUpCommand(), newSandboxDownCommand(), newSandboxBuildCommand(),
		newSandboxStopCommand(), newSandboxStartCommand(), newSandboxStatusCommand(), newSandboxFlinkCommand())
	return cmd
}

// controlHelp says, for the commands that talk to a running purser up,
// how they reach it.
const controlHelp = `It talks to the "purser up --sandbox N" running on this machine through
the Unix socket DATA/sandbox/control.sock, which only the data folder's owner
can reach; DATA is --data-dir, else the data folder of the current context
(or of --context NAME) that purser up wrote to the client config. The
command returns once the change is done.`

// sandboxControlFlags locate the purser up a control command talks to.
type sandboxControlFlags struct {
	dataDir string
	context string
}

func (f *sandboxControlFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.dataDir, "data-dir", "", "the data folder of the purser up to talk to (default: the context's)")
	cmd.Flags().StringVar(&f.context, "context", "", "the context whose purser up to talk to (default: the current one)")
}

// sandboxDir is the sandbox folder of the purser up to talk to.
func (f *sandboxControlFlags) sandboxDir() (string, error) {
	if f.dataDir != "" {
		return filepath.Join(f.dataDir, "sandbox"), nil
	}
	c, err := client.SelectedContext(client.Selection{Context: f.context})
	if err != nil {
		return "", fmt.Errorf("%w (or pass --data-dir)", err)
	}
	if c.DataDir == "" {
		return "", fmt.Errorf("context %s was not written by purser up on this machine, so it names no data folder; pass --data-dir", c.Name)
	}
	return filepath.Join(c.DataDir, "sandbox"), nil
}

func (f *sandboxControlFlags) call(cmd *cobra.Command, method, path string) error {
	dir, err := f.sandboxDir()
	if err != nil {
		return err
	}
	msg, err := sandbox.CallControl(cmd.Context(), dir, method, path)
	if err != nil {
		return err
	}
	fmt.Fprintln(cmd.OutOrStdout(), msg)
	return nil
}

func newSandboxStopCommand() *cobra.Command {
	var f sandboxControlFlags
	cmd := &cobra.Command{
		Use:   "stop CLUSTER",
		Short: "Take one sandbox cluster of purser up down, as a power cut would, until sandbox start",
		Long: `Take the sandbox cluster CLUSTER of a running "purser up --sandbox N" down
on purpose, to watch purser notice and move its work: its agent stops first
(its last heartbeat found the cluster answering), then its Flink operator
simulator with the simulated jobs (with --flink), then its kube-apiserver,
etcd, controllers and nodes. The data stays. purser up's supervisor leaves
it down (it restarts a kube-apiserver only when it exits unasked) until
"purser sandbox start CLUSTER", or until purser up is restarted.

purser marks the cluster not Ready after its probes fail (purser get
clusters, purser describe cluster CLUSTER), taints it unreachable after the
NoExecute grace, and moves its AtMostOne work once the agent's lease and the
fencing margin have passed (docs/failover.md).

` + controlHelp,
		Example: `  purser sandbox stop sandbox-1
  purser get clusters
  purser sandbox start sandbox-1`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.call(cmd, http.MethodPost, "/clusters/"+url.PathEscape(args[0])+"/stop")
		},
	}
	f.register(cmd)
	return cmd
}

func newSandboxStartCommand() *cobra.Command {
	var f sandboxControlFlags
	cmd := &cobra.Command{
		Use:   "start CLUSTER",
		Short: "Bring a sandbox cluster taken down with sandbox stop back",
		Long: `Start the sandbox cluster CLUSTER that "purser sandbox stop" took down, in
a machine's boot order: etcd and the kube-apiserver, then its agent (which
fences on return the AtMostOne work it must no longer run), then its
controllers and nodes, then its Flink operator simulator (with --flink). Its
objects are back with its data; a Flink job the simulator ran there before
is found without its JobManager, as after a power cut.

` + controlHelp,
		Example: `  purser sandbox start sandbox-1`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.call(cmd, http.MethodPost, "/clusters/"+url.PathEscape(args[0])+"/start")
		},
	}
	f.register(cmd)
	return cmd
}

func newSandboxStatusCommand() *cobra.Command {
	var f sandboxControlFlags
	cmd := &cobra.Command{
		Use:   "status",
		Short: "List the sandbox clusters of purser up, running or stopped on purpose",
		Long: `List the sandbox clusters of a running "purser up --sandbox N" and whether
each runs or was stopped with "purser sandbox stop". What purser itself
makes of them is in "purser get clusters".

` + controlHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return f.call(cmd, http.MethodGet, "/clusters")
		},
	}
	f.register(cmd)
	return cmd
}

func newSandboxFlinkCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "flink",
		Short: "Make a job of the Flink operator simulator (purser up --flink) fail, or recover",
	}
	faults := make([]string, len(flinksim.Faults))
	for i, f := range flinksim.Faults {
		faults[i] = f.String()
	}
	var (
		f       sandboxControlFlags
		fault   string
		cluster string
	)
	fail := &cobra.Command{
		Use:   "fail NAMESPACE/NAME",
		Short: "Make the simulated Flink job of a FlinkDeployment fail, where it runs now",
		Long: `Make the simulated Flink job of the FlinkDeployment NAMESPACE/NAME (the
runnable's namespace and name) fail on the sandbox cluster that holds it
(--cluster: on that one, even before it holds it), until "purser sandbox
flink recover". The fault stays with that cluster: a copy of the job that
purser starts elsewhere runs. --fault is one of:

  Reconciling       (the default) the JobManager cannot run on this
                    cluster: DEPLOYING, the job RECONCILING. purser judges
                    it Unhealthy and, after the runnable's tolerationSeconds
                    (initialTolerationSeconds before it first ran Healthy),
                    fails it over to another cluster with its newest
                    checkpoint from the sandbox's storage.
  ImagePullBackOff  the JobManager's image cannot be pulled: JobManager
                    ERROR, an error of the spec itself, which no other
                    cluster cures; purser does not move it.
  FailedJob         the job exhausted Flink's restart strategy: job FAILED;
                    the runnable is Failed (its spec.retry decides whether
                    it runs again).

purser describe runnable NAME -n NAMESPACE shows each step.

` + controlHelp,
		Example: `  purser sandbox flink fail team-a/clickstream
  purser describe runnable clickstream -n team-a`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, name, err := splitNamespaced(args[0])
			if err != nil {
				return err
			}
			if _, err := flinksim.ParseFault(fault); err != nil {
				return err
			}
			return f.call(cmd, http.MethodPut, sandbox.FlinkFaultPath(ns, name, fault, cluster))
		},
	}
	f.register(fail)
	fail.Flags().StringVar(&fault, "fault", flinksim.Reconciling.String(), "the fault: "+strings.Join(faults, ", "))
	fail.Flags().StringVar(&cluster, "cluster", "", "the sandbox cluster to set it on (default: every one holding the FlinkDeployment)")
	var (
		rf       sandboxControlFlags
		rcluster string
	)
	recoverCmd := &cobra.Command{
		Use:   "recover NAMESPACE/NAME",
		Short: "Remove the fault of a FlinkDeployment set with sandbox flink fail",
		Long: `Remove the fault "purser sandbox flink fail" set on the FlinkDeployment
NAMESPACE/NAME, on every running sandbox cluster where it is set (--cluster:
on that one), whether or not a copy of the job still runs there; the
simulator runs its job again at its next pass.

` + controlHelp,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, name, err := splitNamespaced(args[0])
			if err != nil {
				return err
			}
			return rf.call(cmd, http.MethodDelete, sandbox.FlinkFaultPath(ns, name, "", rcluster))
		},
	}
	rf.register(recoverCmd)
	recoverCmd.Flags().StringVar(&rcluster, "cluster", "", "the sandbox cluster to remove it from (default: every one where it is set)")
	cmd.AddCommand(fail, recoverCmd)
	return cmd
}

// splitNamespaced splits NAMESPACE/NAME.
func splitNamespaced(arg string) (namespace, name string, err error) {
	namespace, name, ok := strings.Cut(arg, "/")
	if !ok || namespace == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("want NAMESPACE/NAME (a FlinkDeployment's, which is its runnable's), got %q", arg)
	}
	return namespace, name, nil
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
	var dex, flux bool
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
			fmt.Fprintf(cmd.OutOrStdout(), "kubectl (the clusters' version): %s\n", bins.Kubectl())
			if dex {
				start := time.Now()
				path, err := sandbox.EnsureDex(cmd.Context(), sandbox.BuildConfig{Progress: cmd.OutOrStdout()})
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "dex ready at %s (%s)\n", path, time.Since(start).Round(time.Second))
			}
			if flux {
				start := time.Now()
				fb, err := sandbox.EnsureFlux(cmd.Context(), sandbox.BuildConfig{Progress: cmd.OutOrStdout()})
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Flux's kustomize-controller ready at %s (%s)\n", fb.KustomizeController(), time.Since(start).Round(time.Second))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&dex, "dex", false, "also build Dex "+sandbox.DexVersion+", the OpenID Connect provider of the single sign-on tests")
	cmd.Flags().BoolVar(&flux, "flux", false, "also build Flux's kustomize-controller "+sandbox.FluxKustomizeControllerVersion+", the GitOps controller of the GitOps test")
	return cmd
}
