package sandbox

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the key material of one cluster, kept in its folder so that a
// restarted or wiped cluster keeps its endpoint identity and credentials.
type pki struct {
	dir string
}

func (p pki) caCert() string         { return filepath.Join(p.dir, "ca.crt") }
func (p pki) caKey() string          { return filepath.Join(p.dir, "ca.key") }
func (p pki) servingCert() string    { return filepath.Join(p.dir, "apiserver.crt") }
func (p pki) servingKey() string     { return filepath.Join(p.dir, "apiserver.key") }
func (p pki) saKey() string          { return filepath.Join(p.dir, "sa.key") }
func (p pki) saPub() string          { return filepath.Join(p.dir, "sa.pub") }
func (p pki) frontProxyCert() string { return filepath.Join(p.dir, "front-proxy-client.crt") }
func (p pki) frontProxyKey() string  { return filepath.Join(p.dir, "front-proxy-client.key") }

// frontProxyName is the common name of the front proxy's client
// certificate, the one name an aggregated API server accepts the
// forwarded user's headers from.
const frontProxyName = "front-proxy-client"

// ensureFrontProxy writes a client certificate signed by the cluster's CA
// for the kube-apiserver to present to aggregated API servers, unless it
// exists.
func (p pki) ensureFrontProxy() error {
	if exists(p.frontProxyCert()) {
		return nil
	}
	caCert, caKey, err := p.loadCA()
	if err != nil {
		return fmt.Errorf("front proxy certificate: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: frontProxyName},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(10, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	if err := writePEM(p.frontProxyKey(), "EC PRIVATE KEY", mustMarshalEC(key), 0o600); err != nil {
		return err
	}
	return writePEM(p.frontProxyCert(), "CERTIFICATE", der, 0o644)
}

// ensureServingFor writes, unless it exists, a serving certificate signed
// by the cluster's CA for a server the kube-apiserver reaches by another
// name (an aggregated API server, which it verifies by its Service's DNS
// name), with the loopback addresses too.
func (p pki) ensureServingFor(name string, dnsNames []string) (cert, key string, err error) {
	cert, key = filepath.Join(p.dir, name+".crt"), filepath.Join(p.dir, name+".key")
	if exists(cert) {
		return cert, key, nil
	}
	caCert, caKey, err := p.loadCA()
	if err != nil {
		return "", "", fmt.Errorf("serving certificate of %s: %w", name, err)
	}
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(10, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback},
		DNSNames:     append([]string{"localhost"}, dnsNames...),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
	if err != nil {
		return "", "", err
	}
	if err := writePEM(key, "EC PRIVATE KEY", mustMarshalEC(k), 0o600); err != nil {
		return "", "", err
	}
	return cert, key, writePEM(cert, "CERTIFICATE", der, 0o644)
}

// loadCA reads the cluster's CA certificate and key.
func (p pki) loadCA() (*x509.Certificate, *ecdsa.PrivateKey, error) {
	certPEM, err := os.ReadFile(p.caCert())
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := os.ReadFile(p.caKey())
	if err != nil {
		return nil, nil, err
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, nil, fmt.Errorf("no PEM in %s or %s", p.caCert(), p.caKey())
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

// ensure creates whatever key material is missing: a CA, a serving
// certificate for 127.0.0.1/localhost signed by it, and the service account
// signing key pair.
func (p pki) ensure(clusterName string) error {
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return err
	}
	if !exists(p.caCert()) || !exists(p.servingCert()) {
		if err := p.writeCertificates(clusterName); err != nil {
			return fmt.Errorf("certificates: %w", err)
		}
	}
	if !exists(p.saKey()) {
		if err := p.writeServiceAccountKeys(); err != nil {
			return fmt.Errorf("service account keys: %w", err)
		}
	}
	return nil
}

func (p pki) writeCertificates(clusterName string) error {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: clusterName + "-ca", Organization: []string{"purser sandbox"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(10, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback},
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	if err := writePEM(p.caKey(), "EC PRIVATE KEY", mustMarshalEC(caKey), 0o600); err != nil {
		return err
	}
	if err := writePEM(p.servingKey(), "EC PRIVATE KEY", mustMarshalEC(key), 0o600); err != nil {
		return err
	}
	if err := writePEM(p.servingCert(), "CERTIFICATE", der, 0o644); err != nil {
		return err
	}
	// The CA certificate is written last: its presence means the set is whole.
	return writePEM(p.caCert(), "CERTIFICATE", caDER, 0o644)
}

func (p pki) writeServiceAccountKeys() error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	if err := writePEM(p.saPub(), "PUBLIC KEY", pub, 0o644); err != nil {
		return err
	}
	return writePEM(p.saKey(), "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key), 0o600)
}

func mustMarshalEC(k *ecdsa.PrivateKey) []byte {
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		panic(err) // only fails for curves the standard library does not know
	}
	return der
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	return writeFileAtomic(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode)
}

// writeFileAtomic writes through a temporary file so that a crash never
// leaves half a file behind.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
