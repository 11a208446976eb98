package stream_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/hub/stream/streamtest"
)

// A NATS server that requires TLS with client certificates: a component
// with the CA, its certificate and key connects and declares purser's
// streams; without its certificate, or without the CA, it is refused.
func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t)
	serverCert := ca.issue(t, "nats", true)
	files := map[string][]byte{"ca.pem": ca.pem}
	clientCert, clientKey := ca.issuePEM(t, "purser-agent")
	files["client.pem"], files["client-key.pem"] = clientCert, clientKey
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.pem)
	url := startServer(t, &server.Options{
		TLS: true, TLSVerify: true, TLSTimeout: 5,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{serverCert}, ClientCAs: pool,
			ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12},
	})

	file := func(name string) string { return filepath.Join(dir, name) }
	full := stream.Security{CAFile: file("ca.pem"), CertFile: file("client.pem"), KeyFile: file("client-key.pem")}
	c := connect(t, url, full)
	if err := c.Declare(streamtest.Context(t)); err != nil {
		t.Fatalf("Declare over mutual TLS: %v", err)
	}

	for name, sec := range map[string]stream.Security{
		"without the client certificate": {CAFile: file("ca.pem")},
		"without the CA":                 {CertFile: file("client.pem"), KeyFile: file("client-key.pem")},
	} {
		if _, err := tryConnect(url, sec); !errors.Is(err, stream.ErrUnavailable) {
			t.Errorf("%s: %v, want a refused connection", name, err)
		}
	}
}

// Wrong files are refused at once, naming what is wrong, not retried until
// the deadline.
func TestSecurityFilesChecked(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		sec  stream.Security
		want string
	}{
		{stream.Security{CAFile: notPEM}, "holds no PEM certificate"},
		{stream.Security{CAFile: filepath.Join(dir, "missing.pem")}, "no such file"},
		{stream.Security{CertFile: notPEM}, "give both or neither"},
		{stream.Security{CertFile: notPEM, KeyFile: notPEM}, "client certificate"},
		{stream.Security{Credentials: filepath.Join(dir, "missing.creds")}, "nats credentials"},
	} {
		start := time.Now()
		_, err := tryConnect("nats://127.0.0.1:1", c.sec)
		if err == nil || !strings.Contains(err.Error(), c.want) || errors.Is(err, stream.ErrUnavailable) {
			t.Errorf("%+v: %v, want an error saying %q", c.sec, err, c.want)
		}
		if time.Since(start) > 2*time.Second {
			t.Errorf("%+v: refused only after %s", c.sec, time.Since(start))
		}
	}
}

// A server in operator mode (decentralised JWT auth) admits a component
// with its credentials file and refuses one without.
func TestCredentialsFile(t *testing.T) {
	operator, _ := nkeys.CreateOperator()
	operatorPub, _ := operator.PublicKey()
	operatorClaims := jwt.NewOperatorClaims(operatorPub)
	if _, err := operatorClaims.Encode(operator); err != nil {
		t.Fatal(err)
	}
	account, _ := nkeys.CreateAccount()
	accountPub, _ := account.PublicKey()
	accountClaims := jwt.NewAccountClaims(accountPub)
	accountClaims.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
	accountJWT, err := accountClaims.Encode(operator)
	if err != nil {
		t.Fatal(err)
	}
	user, _ := nkeys.CreateUser()
	userPub, _ := user.PublicKey()
	userJWT, err := jwt.NewUserClaims(userPub).Encode(account)
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := user.Seed()
	creds, err := jwt.FormatUserConfig(userJWT, seed)
	if err != nil {
		t.Fatal(err)
	}
	credsFile := filepath.Join(t.TempDir(), "purser.creds")
	if err := os.WriteFile(credsFile, creds, 0o600); err != nil {
		t.Fatal(err)
	}
	// JetStream in operator mode needs the server's system account.
	system, _ := nkeys.CreateAccount()
	systemPub, _ := system.PublicKey()
	systemJWT, err := jwt.NewAccountClaims(systemPub).Encode(operator)
	if err != nil {
		t.Fatal(err)
	}
	resolver := &server.MemAccResolver{}
	for pub, claims := range map[string]string{accountPub: accountJWT, systemPub: systemJWT} {
		if err := resolver.Store(pub, claims); err != nil {
			t.Fatal(err)
		}
	}
	url := startServer(t, &server.Options{TrustedOperators: []*jwt.OperatorClaims{operatorClaims},
		AccountResolver: resolver, SystemAccount: systemPub})

	c := connect(t, url, stream.Security{Credentials: credsFile})
	if err := c.Declare(streamtest.Context(t)); err != nil {
		t.Fatalf("Declare with a credentials file: %v", err)
	}
	if _, err := tryConnect(url, stream.Security{}); !errors.Is(err, stream.ErrUnavailable) || !strings.Contains(strings.ToLower(err.Error()), "authorization") {
		t.Errorf("without credentials: %v, want an authorization failure", err)
	}
}

// startServer starts a JetStream server with opts on a free loopback port
// and returns its URL.
func startServer(t *testing.T, opts *server.Options) string {
	t.Helper()
	opts.Host, opts.Port = "127.0.0.1", server.RANDOM_PORT
	opts.JetStream, opts.StoreDir = true, t.TempDir()
	opts.NoSigs = true
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(streamtest.Timeout) {
		t.Fatal("nats server not ready")
	}
	return srv.ClientURL()
}

func connect(t *testing.T, url string, sec stream.Security) *stream.Client {
	t.Helper()
	c, err := stream.Connect(streamtest.Context(t), url, stream.Config{Name: t.Name(), Security: sec})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// tryConnect connects with a short deadline, for connections that must
// fail.
func tryConnect(url string, sec stream.Security) (*stream.Client, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	c, err := stream.Connect(ctx, url, stream.Config{Name: "refused", Security: sec})
	if err == nil {
		c.Close()
	}
	return c, err
}

// ca is a certificate authority made up for one test.
type ca struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newCA(t *testing.T) *ca {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "purser test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &ca{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issuePEM issues a client certificate and returns it and its key in PEM.
func (c *ca) issuePEM(t *testing.T, name string) (certPEM, keyPEM []byte) {
	t.Helper()
	cert := c.issue(t, name, false)
	keyDER, err := x509.MarshalECPrivateKey(cert.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

// issue issues a certificate for a server on 127.0.0.1 or for a client.
func (c *ca) issue(t *testing.T, name string, isServer bool) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if isServer {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
