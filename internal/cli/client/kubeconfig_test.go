package client

import (
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

// TestKubeconfig: what purser kubeconfig writes loads in client-go as a
// context for the farm, current, and one per cluster, each with the
// user's credential.
func TestKubeconfig(t *testing.T) {
	data, err := WriteKubeconfig(Kubeconfig(KubeconfigOptions{Server: "https://purser.example:8443/", Name: "farm",
		Clusters: []string{"dc1-a", "dc2-b"}, Token: "s3cret"}))
	if err != nil {
		t.Fatal(err)
	}
	for ctx, want := range map[string]string{"": "https://purser.example:8443/k8s", "farm-dc1-a": "https://purser.example:8443/k8s/clusters/dc1-a",
		"farm-dc2-b": "https://purser.example:8443/k8s/clusters/dc2-b"} {
		cc, err := clientcmd.NewClientConfigFromBytes(data)
		if err != nil {
			t.Fatal(err)
		}
		if ctx != "" {
			raw, _ := cc.RawConfig()
			cc = clientcmd.NewNonInteractiveClientConfig(raw, ctx, &clientcmd.ConfigOverrides{}, nil)
		}
		rc, err := cc.ClientConfig()
		if err != nil {
			t.Fatalf("context %q: %v", ctx, err)
		}
		if rc.Host != want || rc.BearerToken != "s3cret" {
			t.Errorf("context %q: host %s token %q, want %s with the user's token", ctx, rc.Host, rc.BearerToken, want)
		}
	}
	if NeedsProxy("https://purser.example") || !NeedsProxy("http://127.0.0.1:8080") {
		t.Errorf("NeedsProxy: https needs none, http does")
	}
}
