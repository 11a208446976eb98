package main

import (
	"github.com/spf13/cobra"

	"github.com/purser-io/purser/internal/api/auth"
)

// registerOIDCFlags adds the flags that accept an OpenID Connect
// provider's ID tokens, named as kube-apiserver's.
func registerOIDCFlags(cmd *cobra.Command, c *auth.OIDCConfig) {
	cmd.Flags().StringVar(&c.IssuerURL, "oidc-issuer-url", "", "accept ID tokens of this OpenID Connect provider (its issuer URL); users sign in with purser login and the console")
	cmd.Flags().StringVar(&c.ClientID, "oidc-client-id", "", "the client the console signs in with; tokens must name it (or --oidc-cli-client-id) in their audience")
	cmd.Flags().StringVar(&c.CLIClientID, "oidc-cli-client-id", "", "the client purser login uses (a public client, for the device flow); default: --oidc-client-id")
	cmd.Flags().StringVar(&c.UsernameClaim, "oidc-username-claim", "email", "claim that names the user in the policy")
	cmd.Flags().StringVar(&c.UsernamePrefix, "oidc-username-prefix", "", "put before every user name from the provider, e.g. sso:")
	cmd.Flags().StringVar(&c.GroupsClaim, "oidc-groups-claim", "groups", "claim that holds the user's groups (group:NAME in the policy)")
	cmd.Flags().StringVar(&c.GroupsPrefix, "oidc-groups-prefix", "", "put before every group name from the provider")
	cmd.Flags().StringVar(&c.CAFile, "oidc-ca-file", "", "PEM certificates that verify the provider (default: the system's roots)")
}
