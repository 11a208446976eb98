package sandbox

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/purser-io/purser/internal/platform/localport"
)

// Karmada's resources, as its control plane serves them.
var (
	KarmadaClusters = schema.GroupVersionResource{Group: "cluster.karmada.io", Version: "v1alpha1", Resource: "clusters"}
	KarmadaPolicies = schema.GroupVersionResource{Group: "policy.karmada.io", Version: "v1alpha1", Resource: "propagationpolicies"}
	KarmadaBindings = schema.GroupVersionResource{Group: "work.karmada.io", Version: "v1alpha2", Resource: "resourcebindings"}
	// KarmadaTaintPolicies are ClusterTaintPolicies: since v1.14 the only
	// source of a NoExecute taint on a Karmada cluster.
	KarmadaTaintPolicies = schema.GroupVersionResource{Group: "policy.karmada.io", Version: "v1alpha1", Resource: "clustertaintpolicies"}
)

// Namespaces of Karmada's own objects on its control plane.
const (
	karmadaSystemNamespace  = "karmada-system"
	karmadaClusterNamespace = "karmada-cluster" // member clusters' secrets
)

// KarmadaConfig describes a Karmada control plane on the sandbox.
type KarmadaConfig struct {
	Dir      string    // the control plane's folder
	Binaries *Binaries // the sandbox's own: etcd, kube-apiserver, kube-controller-manager
	Karmada  *KarmadaBinaries
	// FeatureGates is Karmada's --feature-gates, the same for its
	// controller manager, scheduler and webhook, which share one gate
	// registry. The aggregated apiserver has Kubernetes' gates instead,
	// and gets none.
	FeatureGates string
	// ControllerFlags are added to karmada-controller-manager's flags.
	ControllerFlags []string
	// WebhookFlags are added to karmada-webhook's flags.
	WebhookFlags []string
}

// Karmada is a running Karmada control plane: a kube-apiserver and etcd
// of the sandbox's (with a kube-controller-manager for namespaces and
// garbage collection, as Karmada's installers run one), and Karmada's
// aggregated apiserver, webhook, controller manager and scheduler. Member
// clusters join in Push mode: Karmada's controllers reach their
// kube-apiservers directly.
type Karmada struct {
	cfg  KarmadaConfig
	host *Cluster
}

// StartKarmada starts a Karmada control plane in cfg.Dir and returns once
// its API, its Cluster kind and its webhook answer.
func StartKarmada(ctx context.Context, cfg KarmadaConfig) (*Karmada, error) {
	if cfg.Dir == "" || cfg.Binaries == nil || cfg.Karmada == nil {
		return nil, errors.New("sandbox: KarmadaConfig needs Dir, Binaries and Karmada")
	}
	host, err := Start(ctx, Config{Name: "karmada", Dir: cfg.Dir, Binaries: cfg.Binaries, ControlPlaneOnly: true})
	if err != nil {
		return nil, err
	}
	k := &Karmada{cfg: cfg, host: host}
	if err := k.start(ctx); err != nil {
		host.Stop()
		return nil, fmt.Errorf("karmada: %w", err)
	}
	return k, nil
}

// RESTConfig is an admin client configuration of Karmada's API.
func (k *Karmada) RESTConfig() *rest.Config { return k.host.RESTConfig() }

// Dir is the control plane's folder; its logs are in logs/.
func (k *Karmada) Dir() string { return k.host.Dir() }

// Stop stops every process of the control plane, Karmada's first.
func (k *Karmada) Stop() { k.host.Stop() }

func (k *Karmada) start(ctx context.Context) error {
	client, err := k.host.Client()
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(k.host.RESTConfig())
	if err != nil {
		return err
	}
	for _, ns := range []string{karmadaSystemNamespace, karmadaClusterNamespace} {
		if err := ensureNamespace(ctx, client, ns); err != nil {
			return err
		}
	}
	crds, err := applyCRDs(ctx, dyn, k.cfg.Karmada.CRDs())
	if err != nil {
		return err
	}
	if err := waitUntil(ctx, apiServerStartTimeout, "Karmada's CRDs established", func(ctx context.Context) error {
		return crdsEstablished(ctx, dyn, crds)
	}); err != nil {
		return err
	}
	if err := k.startAggregatedAPIServer(ctx, client, dyn); err != nil {
		return err
	}
	if err := k.startWebhook(ctx, dyn); err != nil {
		return err
	}
	if err := k.host.startProgram(BinKarmadaScheduler, k.cfg.Karmada.Path(BinKarmadaScheduler), k.schedulerArgs(), nil); err != nil {
		return err
	}
	return k.host.startProgram(BinKarmadaControllerManager, k.cfg.Karmada.Path(BinKarmadaControllerManager), k.controllerArgs(k.cfg.ControllerFlags), nil)
}

// common are the flags of Karmada's controller manager and scheduler:
// one replica each, no metrics or health ports (which default to fixed
// ports on every address, and the shared machine runs several).
func (k *Karmada) common() []string {
	return []string{"--kubeconfig", k.host.KubeconfigPath(), "--leader-elect=false",
		"--metrics-bind-address=0", "--health-probe-bind-address=0", "--feature-gates", k.cfg.FeatureGates}
}

func (k *Karmada) controllerArgs(extra []string) []string {
	return append(k.common(), extra...)
}

func (k *Karmada) schedulerArgs() []string { return k.common() }

// RestartControllerManager runs karmada-controller-manager again with
// flags in place of KarmadaConfig.ControllerFlags, e.g. other failover
// periods; what it knows is all in the API, so nothing is lost.
func (k *Karmada) RestartControllerManager(flags []string) error {
	for _, p := range k.host.processes(BinKarmadaControllerManager) {
		p.stop(stopGrace)
	}
	return k.host.startProgram(BinKarmadaControllerManager, k.cfg.Karmada.Path(BinKarmadaControllerManager), k.controllerArgs(flags), nil)
}

// startAggregatedAPIServer serves Karmada's cluster.karmada.io API from
// the control plane's etcd, and registers it with the kube-apiserver by an
// APIService whose Service is an ExternalName for localhost: the
// aggregator resolves such a service to the name and the APIService's
// port, with no endpoints and no cluster network.
func (k *Karmada) startAggregatedAPIServer(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface) error {
	port, err := localport.Free()
	if err != nil {
		return err
	}
	const svcName = "karmada-aggregated-apiserver"
	cert, key, err := k.host.pki.ensureServingFor(svcName, []string{svcName + "." + karmadaSystemNamespace + ".svc"})
	if err != nil {
		return err
	}
	kc := k.host.KubeconfigPath()
	args := []string{"--kubeconfig", kc, "--authentication-kubeconfig", kc, "--authorization-kubeconfig", kc,
		"--etcd-servers", fmt.Sprintf("http://127.0.0.1:%d", k.host.state.EtcdClientPort),
		"--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(port),
		"--tls-cert-file", cert, "--tls-private-key-file", key}
	if err := k.host.startProgram(BinKarmadaAggregatedAPIServer, k.cfg.Karmada.Path(BinKarmadaAggregatedAPIServer), args, nil); err != nil {
		return err
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: svcName, Namespace: karmadaSystemNamespace},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost"},
	}
	if _, err := client.CoreV1().Services(karmadaSystemNamespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create the aggregated apiserver's service: %w", err)
	}
	ca, err := os.ReadFile(k.host.pki.caCert())
	if err != nil {
		return err
	}
	apiService := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": "v1alpha1.cluster.karmada.io"},
		"spec": map[string]any{
			"group": "cluster.karmada.io", "version": "v1alpha1",
			"groupPriorityMinimum": int64(2000), "versionPriority": int64(10),
			"caBundle": base64.StdEncoding.EncodeToString(ca),
			"service":  map[string]any{"namespace": karmadaSystemNamespace, "name": svc.Name, "port": int64(port)},
		},
	}}
	if err := createOrReplace(ctx, dyn.Resource(schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}), apiService); err != nil {
		return fmt.Errorf("register the aggregated apiserver: %w", err)
	}
	return waitUntil(ctx, apiServerStartTimeout, "Karmada's clusters API", func(ctx context.Context) error {
		_, err := dyn.Resource(KarmadaClusters).List(ctx, metav1.ListOptions{Limit: 1})
		return err
	}, k.host.processes(BinKarmadaAggregatedAPIServer)...)
}

// startWebhook serves karmada-webhook with the control plane's serving
// certificate (its SANs are the loopback addresses) and registers the
// webhooks the failover path meets. Karmada's chart templates them for a
// Service in a cluster; these are written from its field facts: the same
// paths, operations and failure policy, addressed by URL.
func (k *Karmada) startWebhook(ctx context.Context, dyn dynamic.Interface) error {
	port, err := localport.Free()
	if err != nil {
		return err
	}
	pkiDir := filepath.Dir(k.host.pki.servingCert())
	args := append([]string{"--kubeconfig", k.host.KubeconfigPath(),
		"--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(port),
		"--cert-dir", pkiDir,
		"--tls-cert-file-name", filepath.Base(k.host.pki.servingCert()),
		"--tls-private-key-file-name", filepath.Base(k.host.pki.servingKey()),
		"--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--feature-gates", k.cfg.FeatureGates}, k.cfg.WebhookFlags...)
	if err := k.host.startProgram(BinKarmadaWebhook, k.cfg.Karmada.Path(BinKarmadaWebhook), args, nil); err != nil {
		return err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if err := waitUntil(ctx, apiServerStartTimeout, "karmada-webhook", func(ctx context.Context) error {
		d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // a readiness check of a local port; the API server verifies the CA
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		return conn.Close()
	}, k.host.processes(BinKarmadaWebhook)...); err != nil {
		return err
	}
	ca, err := os.ReadFile(k.host.pki.caCert())
	if err != nil {
		return err
	}
	hook := func(name, path, resource, scope string, ops ...string) map[string]any {
		group := "policy.karmada.io"
		if resource == "resourcebindings" || resource == "works" {
			group = "work.karmada.io"
		}
		ifaces := make([]any, len(ops))
		for i, op := range ops {
			ifaces[i] = op
		}
		return map[string]any{
			"name": name,
			"rules": []any{map[string]any{"operations": ifaces, "apiGroups": []any{group},
				"apiVersions": []any{"*"}, "resources": []any{resource}, "scope": scope}},
			"clientConfig":            map[string]any{"url": "https://" + addr + path, "caBundle": base64.StdEncoding.EncodeToString(ca)},
			"failurePolicy":           "Fail",
			"sideEffects":             "None",
			"admissionReviewVersions": []any{"v1"},
			// Karmada's chart says 3 s; a loaded two-core machine needs more.
			"timeoutSeconds": int64(10),
		}
	}
	mutating := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
		"metadata": map[string]any{"name": "karmada-mutating"},
		"webhooks": []any{
			hook("propagationpolicy.karmada.io", "/mutate-propagationpolicy", "propagationpolicies", "Namespaced", "CREATE", "UPDATE"),
			hook("clusterpropagationpolicy.karmada.io", "/mutate-clusterpropagationpolicy", "clusterpropagationpolicies", "Cluster", "CREATE", "UPDATE"),
			hook("resourcebinding.karmada.io", "/mutate-resourcebinding", "resourcebindings", "Namespaced", "CREATE"),
			hook("work.karmada.io", "/mutate-work", "works", "Namespaced", "CREATE", "UPDATE"),
		},
	}}
	validating := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
		"metadata": map[string]any{"name": "karmada-validating"},
		"webhooks": []any{
			hook("propagationpolicy.karmada.io", "/validate-propagationpolicy", "propagationpolicies", "Namespaced", "CREATE", "UPDATE"),
			hook("clusterpropagationpolicy.karmada.io", "/validate-clusterpropagationpolicy", "clusterpropagationpolicies", "Cluster", "CREATE", "UPDATE"),
			hook("clustertaintpolicy.karmada.io", "/validate-clustertaintpolicy", "clustertaintpolicies", "Cluster", "CREATE", "UPDATE"),
			hook("resourcebinding.karmada.io", "/validate-resourcebinding", "resourcebindings", "Namespaced", "CREATE", "UPDATE"),
		},
	}}
	admission := func(res string) dynamic.ResourceInterface {
		return dyn.Resource(schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: res})
	}
	if err := createOrReplace(ctx, admission("mutatingwebhookconfigurations"), mutating); err != nil {
		return fmt.Errorf("register karmada-webhook: %w", err)
	}
	if err := createOrReplace(ctx, admission("validatingwebhookconfigurations"), validating); err != nil {
		return fmt.Errorf("register karmada-webhook: %w", err)
	}
	return nil
}

// Join registers member in Karmada as a Push-mode cluster named name: a
// Secret holding its token and CA (for Karmada's controllers and as the
// impersonator's), and a Cluster with its endpoint. It returns once
// Karmada reports the cluster Ready.
func (k *Karmada) Join(ctx context.Context, name string, member *Cluster) error {
	client, err := k.host.Client()
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(k.host.RESTConfig())
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(member.pki.caCert())
	if err != nil {
		return err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: karmadaClusterNamespace},
		Data:       map[string][]byte{"token": []byte(member.state.Token), "caBundle": ca},
	}
	if _, err := client.CoreV1().Secrets(karmadaClusterNamespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("karmada: join %s: %w", name, err)
	}
	ref := map[string]any{"namespace": karmadaClusterNamespace, "name": name}
	cluster := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{"syncMode": "Push", "apiEndpoint": member.Server(),
			"secretRef": ref, "impersonatorSecretRef": ref},
	}}
	if _, err := dyn.Resource(KarmadaClusters).Create(ctx, cluster, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("karmada: join %s: %w", name, err)
	}
	return waitUntil(ctx, apiServerStartTimeout, "Karmada cluster "+name+" Ready", func(ctx context.Context) error {
		c, err := dyn.Resource(KarmadaClusters).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(c.Object, "status", "conditions")
		for _, cond := range conds {
			m, _ := cond.(map[string]any)
			if m["type"] == "Ready" && m["status"] == "True" {
				return nil
			}
		}
		return fmt.Errorf("conditions %v", conds)
	}, k.host.processes(BinKarmadaControllerManager)...)
}

// createOrReplace creates obj, or replaces the object of its name that a
// start in the same folder left.
func createOrReplace(ctx context.Context, res dynamic.ResourceInterface, obj *unstructured.Unstructured) error {
	_, err := res.Create(ctx, obj, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	old, err := res.Get(ctx, obj.GetName(), metav1.GetOptions{})
	if err != nil {
		return err
	}
	obj.SetResourceVersion(old.GetResourceVersion())
	_, err = res.Update(ctx, obj, metav1.UpdateOptions{})
	return err
}
