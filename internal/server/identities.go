package server

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/purser-io/purser/internal/auth"
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
}

func (s *Server) authConfig(w http.ResponseWriter, _ *http.Request) {
	var out AuthConfig
	if s.cfg.Identities != nil && s.cfg.Identities.OIDC() != nil {
		c := s.cfg.Identities.OIDC().Config()
		out.OIDC = &OIDCSettings{Issuer: c.IssuerURL, ClientID: c.ClientID, CLIClientID: c.CLIClientID,
			Scopes: append([]string{"openid"}, c.Scopes...)}
	}
	writeJSON(w, http.StatusOK, out)
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
