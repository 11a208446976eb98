package server

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/yaml"

	"github.com/purser-io/purser/internal/api/auth"
)

// AuthConfig is the answer of GET /api/v1/auth/config, which needs no
// token: what a client needs to sign a user in (`purser login`, the
// console), as Argo CD's /api/v1/settings tells its CLI.
type AuthConfig struct {
	OIDC *OIDCSettings `json:"oidc,omitempty"`
}

// OIDCSettings is the provider clients sign in with.
type OIDCSettings struct {
	Issuer      string   `json:"issuer"`
	ClientID    string   `json:"clientID"`
	CLIClientID string   `json:"cliClientID"`
	Scopes      []string `json:"scopes"`
	// AuthorizationEndpoint is where the console sends the browser; empty
	// while the provider cannot be reached.
	AuthorizationEndpoint string `json:"authorizationEndpoint,omitempty"`
}

func (s *Server) authConfig(w http.ResponseWriter, r *http.Request) {
	var out AuthConfig
	if o := s.oidc(); o != nil {
		c := o.Config()
		out.OIDC = &OIDCSettings{Issuer: c.IssuerURL, ClientID: c.ClientID, CLIClientID: c.CLIClientID,
			Scopes: append([]string{"openid"}, c.Scopes...)}
		if ep, err := o.Endpoint(r.Context()); err == nil {
			out.OIDC.AuthorizationEndpoint = ep.AuthURL
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) oidc() *auth.OIDC {
	if s.cfg.Identities == nil {
		return nil
	}
	return s.cfg.Identities.OIDC()
}

// CodeExchange is the body of POST /api/v1/auth/token: the console's
// authorization code, its PKCE verifier and the redirect URI it used.
type CodeExchange struct {
	Code         string `json:"code"`
	CodeVerifier string `json:"codeVerifier"`
	RedirectURI  string `json:"redirectURI"`
}

// TokenAnswer is the answer of POST /api/v1/auth/token.
type TokenAnswer struct {
	IDToken string `json:"idToken"`
	User    string `json:"user"`
}

// exchangeCode finishes the console's sign-in (the authorization code
// flow with PKCE): it needs no token, since it makes one. So every call
// counts against its address's limit of requests without a valid token,
// as a failed authentication does: a sign-in is rare, and each call costs
// a request to the provider.
func (s *Server) exchangeCode(w http.ResponseWriter, r *http.Request) {
	if allowed, wait := s.failed.allow(clientAddress(r), time.Now()); !allowed {
		w.Header().Set("Connection", "close") // the body is not read
		writeError(w, errTooManyRequests(wait, "too many sign-ins without a valid token from this address; wait before trying again"))
		return
	}
	o := s.oidc()
	if o == nil {
		writeError(w, errNotFound("this server signs no one in with an identity provider"))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
	req, err := decodeBody(r, func(data []byte, _ string) (CodeExchange, error) {
		var req CodeExchange
		if err := yaml.UnmarshalStrict(data, &req); err != nil {
			return req, errBadRequest("request body is malformed: %v", err)
		}
		return req, nil
	})
	if err != nil {
		writeError(w, err)
		return
	}
	if req.Code == "" || req.CodeVerifier == "" || req.RedirectURI == "" {
		writeError(w, errInvalid("code, codeVerifier and redirectURI are required", nil))
		return
	}
	raw, u, err := o.Exchange(r.Context(), req.Code, req.CodeVerifier, req.RedirectURI)
	if err != nil {
		s.log.Info("console sign-in refused", "error", err)
		writeError(w, errUnauthorized())
		return
	}
	writeJSON(w, http.StatusOK, TokenAnswer{IDToken: raw, User: u.Name})
}

// registerIdentityMetrics shows the reloads of the tokens and policy files,
// and whether a file on disk is not the one in force.
func registerIdentityMetrics(reg prometheus.Registerer, id *auth.Identities) {
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "purser_auth_reloads_total",
			Help: "Reloads of the tokens and policy files that took effect.",
		}, func() float64 { return float64(id.Reloads()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "purser_auth_reload_failing",
			Help: "1 while the tokens or policy file on disk cannot be loaded and the last good version is in force.",
		}, func() float64 {
			if id.Problem() != nil {
				return 1
			}
			return 0
		}),
	)
}
