package stream

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"github.com/nats-io/nats.go"
)

// Security is how a component proves itself to NATS and checks the server:
// what a production NATS asks of its clients beyond a URL (which may carry
// a user and password or a token itself).
type Security struct {
	// Credentials is a credentials file (a user JWT and its NKey seed), as
	// `nsc generate creds` writes, for servers in operator mode.
	Credentials string
	// CAFile holds the PEM certificates that verify the server; empty: the
	// system's roots.
	CAFile string
	// CertFile and KeyFile are a client certificate and its key, for
	// servers that verify their clients (mutual TLS). Both or neither.
	CertFile, KeyFile string
}

// options checks every file now, so that a wrong path or a file of the
// wrong kind is a clear error at start rather than a connection that is
// retried until the caller's deadline, and turns them into client options.
func (s Security) options() ([]nats.Option, error) {
	var opts []nats.Option
	if s.Credentials != "" {
		if _, err := os.ReadFile(s.Credentials); err != nil {
			return nil, fmt.Errorf("nats credentials: %w", err)
		}
		opts = append(opts, nats.UserCredentials(s.Credentials))
	}
	if s.CAFile == "" && s.CertFile == "" && s.KeyFile == "" {
		return opts, nil
	}
	if (s.CertFile == "") != (s.KeyFile == "") {
		return nil, errors.New("nats tls: a client certificate and its key go together; give both or neither")
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.CAFile != "" {
		pem, err := os.ReadFile(s.CAFile)
		if err != nil {
			return nil, fmt.Errorf("nats tls: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("nats tls: %s holds no PEM certificate", s.CAFile)
		}
	}
	if s.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("nats tls: client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return append(opts, nats.Secure(cfg)), nil
}
