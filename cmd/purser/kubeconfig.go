package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/purser-io/purser/internal/cli/client"
)

func newKubeconfigCommand() *cobra.Command {
	var cf clientFlags
	var output, name, proxy, caFile string
	cmd := &cobra.Command{
		Use:   "kubeconfig [--output FILE] [--proxy 127.0.0.1:PORT]",
		Short: "Write a kubeconfig that reads and writes the farm with kubectl, GitOps tools or client-go",
		Long: `Write a kubeconfig for purser's Kubernetes-shaped API: context NAME
(default purser) for every cluster at once (SERVER/k8s), and NAME-CLUSTER
for each member cluster (SERVER/k8s/clusters/CLUSTER). The first is the
current context, so that "kubectl --kubeconfig FILE get cm -A" lists
ConfigMaps across the farm with a CLUSTER column. Answers come from
purser's database: they keep coming when a cluster is down, and a warning
names a cluster whose records are stale.

Context NAME also writes, as kubectl, server-side apply and GitOps
controllers (Flux's spec.kubeConfig, a remote cluster of Argo CD) write:
purser's kinds (Runnables, Deployables, Quotas, placement policies;
Clusters for admins) and native objects a placement policy selects (a
FlinkDeployment applied becomes its runnable), through the same checks,
approvals and audit as purser's REST API. The NAME-CLUSTER contexts only
read: what runs on one member cluster changes through the farm.

The credential is yours, as the other commands resolve it (--token, the
context's token, $PURSER_TOKEN). After purser login (OIDC), kubectl runs
"purser kubeconfig credential" instead, which refreshes the ID token, so
that the kubeconfig holds no token.

kubectl sends credentials only over TLS (client-go's clientcmd drops a
kubeconfig's user for an http:// server). For a purser served over plain
HTTP, as purser up serves it on this machine, pass --proxy ADDRESS: the
command then runs a proxy on that loopback address, which adds your
credential to what kubectl sends, until it is interrupted; the kubeconfig
names the proxy and holds no credential.

The kubeconfig goes to standard output, or to --output (mode 0600).`,
		Example: `  purser kubeconfig --output ~/.kube/purser && kubectl --kubeconfig ~/.kube/purser get cm -A
  purser kubeconfig --proxy 127.0.0.1:8001 --output /tmp/purser.kubeconfig &
  KUBECONFIG=/tmp/purser.kubeconfig kubectl --context purser-sandbox-1 get jobs -A -o wide`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			server := c.Server()
			if client.NeedsProxy(server) && proxy == "" {
				return fmt.Errorf("%s is served over plain HTTP, and kubectl sends no credential to an http:// server; pass --proxy 127.0.0.1:PORT to read it through a local proxy that adds yours", server)
			}
			clusters, err := c.ClusterNames(ctx)
			if err != nil {
				return named(c, err)
			}
			opts := client.KubeconfigOptions{Server: server, Name: name, Clusters: clusters}
			if caFile != "" {
				if opts.CAData, err = os.ReadFile(caFile); err != nil {
					return err
				}
			}
			login, err := client.LoadLogin(server)
			if err != nil {
				return err
			}
			var ln net.Listener
			switch {
			case proxy != "":
				host, _, err := net.SplitHostPort(proxy)
				if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
					return fmt.Errorf("--proxy %q: the proxy adds your credential to every request, so it listens on a loopback address only, such as 127.0.0.1:8001", proxy)
				}
				if ln, err = (&net.ListenConfig{}).Listen(ctx, "tcp", proxy); err != nil {
					return err
				}
				defer ln.Close()
				opts.Server, opts.CAData = "http://"+ln.Addr().String(), nil
			case login != nil && cf.sel.Token == "":
				self, err := os.Executable()
				if err != nil {
					return err
				}
				opts.Exec = &clientcmdapi.ExecConfig{APIVersion: "client.authentication.k8s.io/v1", Command: self,
					Args: []string{"kubeconfig", "credential", "--server", server}, InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
			default:
				opts.Token = c.Config().Token
			}
			data, err := client.WriteKubeconfig(client.Kubeconfig(opts))
			if err != nil {
				return err
			}
			if output == "" {
				if _, err := stdout(cmd).Write(data); err != nil {
					return err
				}
			} else if err := os.WriteFile(output, data, 0o600); err != nil {
				return err
			}
			if ln == nil {
				return nil
			}
			fmt.Fprintf(stderr(cmd), "proxying %s/k8s to %s with your credential; interrupt to stop\n", opts.Server, server)
			pctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
			defer stop()
			return client.KubeProxy(pctx, ln, server, func(ctx context.Context) (string, error) {
				if login != nil && cf.sel.Token == "" {
					return login.Token(ctx)
				}
				return c.Config().Token, nil
			})
		},
	}
	cf.register(cmd)
	fl := cmd.Flags()
	fl.StringVarP(&output, "output", "o", "", "write the kubeconfig to `FILE` (mode 0600) instead of standard output")
	fl.StringVar(&name, "name", "purser", "`NAME` of the farm's context; each cluster's is NAME-CLUSTER")
	fl.StringVar(&proxy, "proxy", "", "run a proxy on this loopback `ADDRESS` that adds your credential, for a purser served over plain HTTP")
	fl.StringVar(&caFile, "certificate-authority", "", "PEM `FILE` of the CA of the server's certificate, written into the kubeconfig, when the system's CAs do not sign it")
	cmd.AddCommand(newKubeconfigCredentialCommand())
	return cmd
}

// newKubeconfigCredentialCommand is kubectl's exec plugin for a user who
// signed in with purser login: it prints the login's ID token, refreshed
// when it expired, as an ExecCredential.
func newKubeconfigCredentialCommand() *cobra.Command {
	var server string
	cmd := &cobra.Command{
		Use:   "credential --server URL",
		Short: "Print the ID token of purser login as kubectl's exec plugin reads it",
		Long: `Print, as a client.authentication.k8s.io/v1 ExecCredential, the ID token of
the login of purser login for the server, refreshed when it expired. kubectl
runs it for the kubeconfig purser kubeconfig writes after a login.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			login, err := client.LoadLogin(server)
			if err != nil {
				return err
			}
			if login == nil {
				return errors.New("no login for " + server + "; run purser login --server " + server)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			tok, err := login.Token(ctx)
			if err != nil {
				return err
			}
			// The login was refreshed in place when it had expired.
			return json.NewEncoder(stdout(cmd)).Encode(client.ExecCredential(tok, login.Expiry))
		},
	}
	cmd.Flags().StringVar(&server, "server", "", "`URL` of the purser API the login is for")
	_ = cmd.MarkFlagRequired("server")
	return cmd
}
