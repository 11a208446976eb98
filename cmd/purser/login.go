package main

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/spf13/cobra"
	"golang.org/x/oauth2"

	"github.com/purser-io/purser/internal/cli/client"
)

func newLoginCommand() *cobra.Command {
	var server string
	cmd := &cobra.Command{
		Use:   "login",
		Short: "Sign in with the server's OpenID Connect provider (device flow) and cache the token",
		Long: `Sign in as yourself with the identity provider the server trusts (purser
api --oidc-issuer-url): the command prints an address and a code; open the
address in any browser, on this machine or another, and sign in there. The
ID token (and its refresh token) is cached for this server under your user's
cache folder, readable by you only, and refreshed when it expires. Later
commands on this server use it instead of the client config's token, unless
--token or $PURSER_TOKEN is given. purser logout forgets it.`,
		Example: `  purser login --server https://purser.example.com
  purser get runnables -n team-a`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			out := cmd.OutOrStdout()
			cfg, err := client.Resolve(client.Selection{Server: server, Token: "stand-in"})
			if err != nil {
				return err
			}
			var settings struct {
				OIDC *struct {
					Issuer      string   `json:"issuer"`
					CLIClientID string   `json:"cliClientID"`
					Scopes      []string `json:"scopes"`
				} `json:"oidc"`
			}
			if _, err := client.New(client.Config{Server: cfg.Server}).Do(ctx, http.MethodGet, "/api/v1/auth/config", nil, nil, "", &settings); err != nil {
				return err
			}
			if settings.OIDC == nil {
				return fmt.Errorf("%s signs no one in with an identity provider (it has no --oidc-issuer-url); use a token of its tokens file", cfg.Server)
			}
			provider, err := oidc.NewProvider(ctx, settings.OIDC.Issuer)
			if err != nil {
				return fmt.Errorf("identity provider %s: %w", settings.OIDC.Issuer, err)
			}
			oc := oauth2.Config{ClientID: settings.OIDC.CLIClientID, Endpoint: provider.Endpoint(), Scopes: settings.OIDC.Scopes}
			if oc.Endpoint.DeviceAuthURL == "" {
				return fmt.Errorf("identity provider %s offers no device flow (no device_authorization_endpoint)", settings.OIDC.Issuer)
			}
			da, err := oc.DeviceAuth(ctx)
			if err != nil {
				return fmt.Errorf("start the sign-in with %s: %w", settings.OIDC.Issuer, err)
			}
			if da.VerificationURIComplete != "" {
				fmt.Fprintf(out, "To sign in, open %s\n", da.VerificationURIComplete)
				fmt.Fprintf(out, "(or open %s and enter the code %s)\n", da.VerificationURI, da.UserCode)
			} else {
				fmt.Fprintf(out, "To sign in, open %s and enter the code %s\n", da.VerificationURI, da.UserCode)
			}
			fmt.Fprintf(out, "waiting for the sign-in (until %s) ...\n", da.Expiry.Format(time.Kitchen))
			tok, err := oc.DeviceAccessToken(ctx, da)
			if err != nil {
				return fmt.Errorf("sign-in: %w", err)
			}
			idToken, _ := tok.Extra("id_token").(string)
			if idToken == "" {
				return errors.New("sign-in: the provider returned no ID token (was the openid scope refused?)")
			}
			login := &client.Login{Server: cfg.Server, Issuer: settings.OIDC.Issuer, ClientID: oc.ClientID, TokenURL: oc.Endpoint.TokenURL}
			if err := login.SetToken(tok, idToken); err != nil {
				return err
			}
			// Ask the server who that is before keeping it: a token it does
			// not accept is no login.
			var who struct {
				User   string   `json:"user"`
				Groups []string `json:"groups"`
			}
			if _, err := client.New(client.Config{Server: cfg.Server, Token: idToken}).Do(ctx, http.MethodGet, "/api/v1/whoami", nil, nil, "", &who); err != nil {
				return fmt.Errorf("%s does not accept the token: %w", cfg.Server, err)
			}
			if err := client.SaveLogin(login); err != nil {
				return err
			}
			fmt.Fprintf(out, "logged in to %s as %s (groups: %v)\n", cfg.Server, who.User, who.Groups)
			return nil
		},
	}
	cmd.Flags().StringVar(&server, "server", "", "purser API URL (default: $PURSER_SERVER, else the client config)")
	return cmd
}

func newLogoutCommand() *cobra.Command {
	var server string
	cmd := &cobra.Command{
		Use:   "logout",
		Short: "Forget the login of purser login for a server",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := client.Resolve(client.Selection{Server: server, Token: "stand-in"})
			if err != nil {
				return err
			}
			if err := client.RemoveLogin(cfg.Server); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "logged out of %s\n", cfg.Server)
			return nil
		},
	}
	cmd.Flags().StringVar(&server, "server", "", "purser API URL (default: $PURSER_SERVER, else the client config)")
	return cmd
}
