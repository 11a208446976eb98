package server_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purser-io/purser/internal/api/kubeapi"
	"github.com/purser-io/purser/internal/api/server"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// crdDir holds the CustomResourceDefinitions of purser's kinds;
// examplesDir, what users copy.
var (
	crdDir      = filepath.FromSlash("../../../deploy/crds")
	examplesDir = filepath.FromSlash("../../../examples")
)

// TestCRDsAreGenerated: deploy/crds is what the schema /k8s serves makes
// (PURSER_UPDATE_CRDS=1 writes it), so that the CRDs tools install say
// what purser accepts.
func TestCRDsAreGenerated(t *testing.T) {
	var files []string
	for _, k := range server.KubeKinds() {
		want, err := kubeapi.CRD(&k)
		if err != nil {
			t.Fatal(err)
		}
		name := k.Plural + "." + kubeapi.OwnGroup + ".yaml"
		files = append(files, name)
		want = append([]byte("# Generated from purser's schema of the kind (internal/api/kubeapi, CRD); do not edit:\n# PURSER_UPDATE_CRDS=1 go test -run TestCRDsAreGenerated ./internal/api/server/\n"), want...)
		path := filepath.Join(crdDir, name)
		if os.Getenv("PURSER_UPDATE_CRDS") == "1" {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s is not what the schema makes (%v); run PURSER_UPDATE_CRDS=1 go test -run TestCRDsAreGenerated ./internal/api/server/", path, err)
		}
	}
	kust := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- " + strings.Join(files, "\n- ") + "\n"
	path := filepath.Join(crdDir, "kustomization.yaml")
	if os.Getenv("PURSER_UPDATE_CRDS") == "1" {
		if err := os.WriteFile(path, []byte(kust), 0o644); err != nil {
			t.Fatal(err)
		}
	} else if got, err := os.ReadFile(path); err != nil || string(got) != kust {
		t.Errorf("%s does not list the CRDs (%v)", path, err)
	}
}

// TestCRDsInstall: a real kube-apiserver takes the CRDs (their schemas
// are structural), serves the kinds, explains them, and accepts the
// examples under them.
func TestCRDsInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kube-apiserver")
	}
	c := sandboxes.Clusters(t)[0]
	kubectl := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, sandboxes.Binaries(t).Kubectl(), append([]string{"--kubeconfig", c.KubeconfigPath()}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	kubectl("apply", "-k", crdDir)
	kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/runnables.purser.io", "crd/deployables.purser.io", "crd/quotas.purser.io", "crd/clusters.purser.io")
	// Established is not yet served: the kube-apiserver publishes a new
	// CRD's discovery and OpenAPI a moment later, and explain reads both.
	sandboxtest.Eventually(t, time.Minute, "kubectl explain runnables.spec.template names purser.io", func(ctx context.Context) error {
		out, err := exec.CommandContext(ctx, sandboxes.Binaries(t).Kubectl(), "--kubeconfig", c.KubeconfigPath(), "explain", "runnables.spec.template").CombinedOutput()
		if err != nil {
			return fmt.Errorf("explain on the cluster: %w\n%s", err, out)
		}
		if !strings.Contains(string(out), "purser.io") {
			return fmt.Errorf("explain on the cluster does not name purser.io:\n%s", out)
		}
		return nil
	})
	if err := c.EnsureNamespace(t.Context(), "team-a"); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"runnable-job.yaml", "runnable-flink.yaml", "deployable-rollout.yaml"} {
		kubectl("apply", "--dry-run=server", "--validate=strict", "-n", "team-a", "-f", filepath.Join(examplesDir, f))
	}
}
