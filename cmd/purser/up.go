package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/klog/v2"

	"github.com/purser-io/purser/internal/compose/up"
)

func newUpCommand() *cobra.Command {
	var cfg up.Config
	var verbose bool
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run every purser component in one process, with embedded NATS and SQLite",
		Long: `Run the API and every other component in one process, with an embedded NATS
JetStream server and an SQLite database under --data-dir. On first start it
writes an admin token to DIR/admin.token (hashed in DIR/tokens.yaml, with
DIR/policy.yaml making that user admin; both are reloaded when edited), an
encryption key to DIR/secret.key, the key that signs the audit anchors to
DIR/audit.key, and a client config so that later purser commands on this
machine need no flags: it adds (or, on a restart, refreshes) the context named
after the data folder, with the audit key's public half, and makes it current
(purser config get-contexts lists them). Restarting on the same data dir
keeps everything. The embedded NATS listens on no port: every component runs
in this process. With --oidc-issuer-url and --oidc-client-id, people sign in
with that provider (purser login, the console).

With --sandbox N it also starts N local Kubernetes clusters named sandbox-1 ..
sandbox-N (labels dc: dc-1 .. dc-N), registers them, and stops them on exit;
their kubeconfigs are at DIR/sandbox/<name>/kubeconfig. A sandbox
kube-apiserver that dies (killed, crashed) is said on the terminal and
started again; one stopped on purpose with "purser sandbox stop NAME" stays
down until "purser sandbox start NAME" (see purser sandbox --help). A
restart keeps the labels and taints set on the clusters, and starts every
cluster.

With --flink (and --sandbox N) each sandbox cluster also gets the
FlinkDeployment CRD and a SIMULATOR of the Apache Flink Kubernetes Operator
(internal/sandbox/flinksim): it follows the operator's state machine and
status but runs no Flink, so its jobs, their checkpoints and savepoints are
simulated. Those are written, as _metadata files where Flink writes them,
to a local S3-compatible store (gofakes3) kept in DIR/flink-storage, whose
address is printed; any s3://BUCKET/... directory of a FlinkDeployment
works, buckets are created on first use, and purser's failover finds a
job's newest checkpoint there. "purser sandbox flink fail NS/NAME" makes a
simulated job fail. Without --flink nothing of this runs.

It prints "purser is ready at http://ADDR" once /readyz answers 200, and a
link to the web console: with the admin token in it (#token=) only when
stdout is a terminal. Ctrl-C stops everything it started; the last line
says so. Logs (klog's included) go to DIR/purser.log.`,
		Example: `  purser up --sandbox 2
  purser apply -f examples/runnable-job.yaml
  purser get runnables

  purser up --sandbox 2 --flink
  purser label cluster sandbox-1 tier=prod; purser label cluster sandbox-2 tier=prod
  purser apply -f examples/runnable-flink.yaml
  purser sandbox stop sandbox-1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkUpFlags(cfg); err != nil {
				return err
			}
			cfg.Out = cmd.OutOrStdout()
			if f, ok := cfg.Out.(*os.File); ok {
				cfg.Terminal = term.IsTerminal(int(f.Fd()))
			}
			level := slog.LevelWarn
			if verbose {
				level = slog.LevelInfo
			}
			abs, err := filepath.Abs(cfg.DataDir)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(abs, 0o700); err != nil {
				return err
			}
			logFile, err := os.OpenFile(filepath.Join(abs, "purser.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
			if err != nil {
				return err
			}
			defer logFile.Close()
			cfg.Logger = slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: level}))
			// client-go logs through klog, to stderr unless told otherwise:
			// its warnings (a watch that failed, a throttled request) go to
			// the log file with the rest. klog's warnings arrive at info
			// level (logr has none lower than info but verbosity), so its
			// logger keeps info whatever -v says.
			klog.SetSlogLogger(slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelInfo})).With("source", "klog"))
			return up.Run(cmd.Context(), cfg)
		},
	}
	cmd.Flags().StringVar(&cfg.DataDir, "data-dir", "purser-data", "folder for the database, stream, keys, tokens, logs and sandbox clusters")
	cmd.Flags().StringVar(&cfg.Listen, "listen", "127.0.0.1:8080", "address of the API and web UI")
	cmd.Flags().IntVar(&cfg.Sandbox, "sandbox", 0, "also start and register this many local Kubernetes clusters")
	cmd.Flags().StringVar(&cfg.ClientConfig, "client-config", "", "the client config to add this server's context to (default: $PURSER_CONFIG, else ~/.config/purser/config.yaml)")
	cmd.Flags().BoolVar(&cfg.Flink, "flink", false, "with --sandbox: also run the FlinkDeployment CRD and a simulator of the Flink operator in each cluster, and an S3-compatible store for their checkpoints")
	registerOIDCFlags(cmd, &cfg.OIDC)
	registerKubeLimitFlags(cmd, &cfg.KubeWatchesPerUser, &cfg.KubeRequestsPerUser)
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "log at info level to DIR/purser.log (default: warnings and errors)")
	return cmd
}

// checkUpFlags refuses flags that contradict each other before anything
// starts.
func checkUpFlags(cfg up.Config) error {
	if cfg.Sandbox < 0 {
		return fmt.Errorf("--sandbox must be 0 or more, got %d", cfg.Sandbox)
	}
	if err := checkKubeLimits(cfg.KubeWatchesPerUser, cfg.KubeRequestsPerUser); err != nil {
		return err
	}
	if cfg.Flink && cfg.Sandbox == 0 {
		return fmt.Errorf("--flink runs the Flink operator simulator in the sandbox clusters: give --sandbox N too")
	}
	return nil
}
