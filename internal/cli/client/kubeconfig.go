package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientauthv1 "k8s.io/client-go/pkg/apis/clientauthentication/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// KubeconfigOptions say what `purser kubeconfig` writes: a kubeconfig
// whose contexts read the farm through purser's Kubernetes-shaped API.
type KubeconfigOptions struct {
	// Server is the URL kubectl talks to: purser's, or a local proxy's.
	Server string
	// Name prefixes the names of the contexts, clusters and user:
	// NAME for the farm, NAME-CLUSTER for each cluster.
	Name string
	// Clusters are the member clusters, one context each.
	Clusters []string
	// Token is the bearer token kubectl sends; with Exec set instead,
	// kubectl runs that command for one (an OIDC login that refreshes).
	// Neither: kubectl sends no credential (a local proxy adds it).
	Token string
	Exec  *clientcmdapi.ExecConfig
	// CAData is the PEM of the CA that signed the server's certificate,
	// when the system's do not.
	CAData []byte
}

// Kubeconfig builds the kubeconfig: a context for the whole farm
// (Server/k8s), current, and one per cluster (Server/k8s/clusters/NAME).
func Kubeconfig(o KubeconfigOptions) *clientcmdapi.Config {
	cfg := clientcmdapi.NewConfig()
	server := strings.TrimSuffix(o.Server, "/")
	user := clientcmdapi.NewAuthInfo()
	user.Token, user.Exec = o.Token, o.Exec
	cfg.AuthInfos[o.Name] = user
	add := func(name, path string) {
		c := clientcmdapi.NewCluster()
		c.Server = server + path
		c.CertificateAuthorityData = o.CAData
		cfg.Clusters[name] = c
		ctx := clientcmdapi.NewContext()
		ctx.Cluster, ctx.AuthInfo = name, o.Name
		cfg.Contexts[name] = ctx
	}
	add(o.Name, "/k8s")
	for _, c := range o.Clusters {
		add(o.Name+"-"+c, "/k8s/clusters/"+url.PathEscape(c))
	}
	cfg.CurrentContext = o.Name
	return cfg
}

// WriteKubeconfig encodes cfg as kubectl reads it.
func WriteKubeconfig(cfg *clientcmdapi.Config) ([]byte, error) { return clientcmd.Write(*cfg) }

// ClusterNames lists the member clusters the user may see; a user the
// API does not let list clusters gets none, and the farm's context alone.
func (c *Client) ClusterNames(ctx context.Context) ([]string, error) {
	var page struct {
		Items []Object `json:"items"`
	}
	code, err := c.Do(ctx, http.MethodGet, "/api/v1/clusters", nil, nil, "", &page)
	if code == http.StatusForbidden {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, o := range page.Items {
		if md, ok := o["metadata"].(map[string]any); ok {
			if n, ok := md["name"].(string); ok {
				names = append(names, n)
			}
		}
	}
	return names, nil
}

// ExecCredential is what `purser kubeconfig credential` prints for
// kubectl's exec plugin (client.authentication.k8s.io/v1).
func ExecCredential(token string, expiry time.Time) *clientauthv1.ExecCredential {
	ec := &clientauthv1.ExecCredential{TypeMeta: metav1.TypeMeta{APIVersion: "client.authentication.k8s.io/v1", Kind: "ExecCredential"},
		Status: &clientauthv1.ExecCredentialStatus{Token: token}}
	if !expiry.IsZero() {
		t := metav1.NewTime(expiry)
		ec.Status.ExpirationTimestamp = &t
	}
	return ec
}

// NeedsProxy reports whether kubectl would send no credential to server:
// client-go's clientcmd reads a kubeconfig's user only for a server it
// reaches over TLS (DirectClientConfig.ClientConfig), so a plain-HTTP
// purser, such as `purser up`'s, is read through a local proxy that adds
// the credential.
func NeedsProxy(server string) bool {
	u, err := url.Parse(server)
	return err == nil && u.Scheme == "http"
}

// proxyHosts are the Host headers of requests addressed to the proxy
// listening at addr: its address as kubectl reaches it from the
// kubeconfig, and localhost with its port. A browser sends the name it
// resolved instead, so a page that points a name of its own at 127.0.0.1
// (DNS rebinding) is told apart and refused: the proxy would otherwise
// add the user's credential to that page's requests.
func proxyHosts(addr net.Addr) []string {
	hosts := []string{strings.ToLower(addr.String())}
	if _, port, err := net.SplitHostPort(addr.String()); err == nil {
		hosts = append(hosts, "localhost:"+port)
	}
	return hosts
}

// KubeProxy forwards the requests kubectl sends to addr (a loopback
// address) under /k8s to server, adding token(ctx) as their credential,
// until ctx ends. It answers only requests addressed to it (proxyHosts);
// any other Host is refused with 403.
func KubeProxy(ctx context.Context, ln net.Listener, server string, token func(ctx context.Context) (string, error)) error {
	target, err := url.Parse(strings.TrimSuffix(server, "/"))
	if err != nil {
		return fmt.Errorf("server %q: %w", server, err)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = target.Host
		},
		FlushInterval: -1, // watches stream
	}
	hosts := proxyHosts(ln.Addr())
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !slices.Contains(hosts, strings.ToLower(r.Host)) {
			http.Error(w, fmt.Sprintf("this proxy adds your purser credential, so it answers only requests addressed to it (Host %s); Host %q is refused: a web page that renamed a host of its own to this address (DNS rebinding) sends that",
				strings.Join(hosts, " or "), r.Host), http.StatusForbidden)
			return
		}
		if r.URL.Path != "/k8s" && !strings.HasPrefix(r.URL.Path, "/k8s/") {
			http.Error(w, "this proxy serves purser's Kubernetes API only, under /k8s", http.StatusNotFound)
			return
		}
		tok, err := token(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		r.Header.Set("Authorization", "Bearer "+tok)
		proxy.ServeHTTP(w, r)
	})
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
