package syncer

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/admission"
	"github.com/purser-io/purser/internal/hub/seal"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// putWritten stores a deployable behind the API's back, as a tenant's
// (the author recorded), with its overrides; a Secret's values and its
// overrides' patches are sealed as the API seals them.
func (f *fixture) putWritten(name string, spec v1alpha1.DeployableSpec) *store.Deployable {
	f.t.Helper()
	var secret []byte
	hash := v1alpha1.SpecHash(spec)
	if spec.Template["kind"] == "Secret" {
		plain, values, err := seal.SplitSecret(spec.Template)
		if err != nil {
			f.t.Fatal(err)
		}
		spec.Template = plain
		var patches []json.RawMessage
		spec.Overrides = append([]v1alpha1.Override(nil), spec.Overrides...)
		for i, o := range spec.Overrides {
			patches = append(patches, o.Patch)
			if spec.Overrides[i].Patch, err = seal.RedactPatch(o.Patch); err != nil {
				f.t.Fatal(err)
			}
		}
		if values, err = seal.SealPatches(values, patches); err != nil {
			f.t.Fatal(err)
		}
		if secret, err = f.sealer.Seal(values, seal.SecretBinding(f.ns, name)); err != nil {
			f.t.Fatal(err)
		}
		hash = v1alpha1.SpecHash(spec) + "-" + f.sealer.Fingerprint(values)[:16]
	}
	doc, err := json.Marshal(store.Document[v1alpha1.DeployableSpec]{Spec: spec, Author: &store.Author{Name: "alice", Groups: []string{"team-a"}}})
	if err != nil {
		f.t.Fatal(err)
	}
	rec := &store.Deployable{Namespace: f.ns, Name: name, UID: randomHex(16), Generation: 1, Spec: doc, Secret: secret, SpecHash: hash}
	ctx := context.Background()
	if err := f.store.Tx(ctx, func(tx *store.Tx) error { return tx.Deployables().Create(ctx, rec) }); err != nil {
		f.t.Fatal(err)
	}
	return rec
}

// TestAdmissionOfTheObjectAsWritten: a tenant's Deployment stored behind
// the API, whose template passes and whose JSON patch override for one
// DC puts its pods in the host's PID namespace, is refused by the
// syncer's admission of that DC's object, right before the apply: the
// cluster's status says AdmissionDenied, naming the override and the
// rule, and no Deployment is there; the other DCs get theirs. An override
// that turns the template into another kind is refused the same way. A
// Secret's override, sealed with its values, reaches its DC.
func TestAdmissionOfTheObjectAsWritten(t *testing.T) {
	f := newFixture(t, storetest.Engines()[0].NewDSN(t))
	f.start(syncerOpts{policy: platformAdmins(t)})
	s1, s2, s3 := f.clusters[0].Name(), f.clusters[1].Name(), f.clusters[2].Name()
	dc := func(v string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"dc": v}}
	}
	deployment := map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "web"},
		"spec": map[string]any{"replicas": int64(0), "selector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "web"}},
				"spec": map[string]any{"containers": []any{map[string]any{"name": "main", "image": "nginx"}}}}}}
	rec := f.putWritten("web", v1alpha1.DeployableSpec{Template: deployment, Overrides: []v1alpha1.Override{
		{ClusterSelector: dc("dc-1"), Patch: json.RawMessage(`{"spec":{"replicas":0}}`)},
		{ClusterSelector: dc("dc-2"), Patch: json.RawMessage(`[{"op":"add","path":"/spec/template/spec/hostPID","value":true}]`)},
	}})
	ctx := context.Background()
	sandboxtest.Eventually(t, wait, "web refused on dc-2 only", func(ctx context.Context) error {
		sts, err := f.statuses(ctx, rec.UID)
		if err != nil {
			return err
		}
		st := sts[s2]
		if st == nil || st.State != string(v1alpha1.StateError) || st.Reason != admission.ReasonDenied ||
			!strings.Contains(st.Message, "as spec.overrides[1] renders it") || !strings.Contains(st.Message, "host namespaces (hostPID=true)") {
			return fmt.Errorf("%s: %+v", s2, st)
		}
		for _, c := range []string{s1, s3} {
			if st := sts[c]; st == nil || st.State != string(v1alpha1.StateSynced) {
				return fmt.Errorf("%s: %+v", c, st)
			}
		}
		return nil
	})
	if _, err := f.kube[s2].AppsV1().Deployments(f.ns).Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the refused Deployment is on %s (%v)", s2, err)
	}
	for _, c := range []string{s1, s3} {
		if _, err := f.kube[c].AppsV1().Deployments(f.ns).Get(ctx, "web", metav1.GetOptions{}); err != nil {
			t.Fatalf("the Deployment is not on %s: %v", c, err)
		}
	}

	// A stored override that makes a ConfigMap a Secret: refused on the
	// cluster it selects, nothing written there.
	cm := f.putWritten("turned", v1alpha1.DeployableSpec{Template: configMapTemplate(map[string]any{"k": "v"}), Overrides: []v1alpha1.Override{
		{ClusterSelector: dc("dc-3"), Patch: json.RawMessage(`[{"op":"replace","path":"/kind","value":"Secret"}]`)},
	}})
	sandboxtest.Eventually(t, wait, "turned refused on dc-3", func(ctx context.Context) error {
		sts, err := f.statuses(ctx, cm.UID)
		if err != nil {
			return err
		}
		if st := sts[s3]; st == nil || st.Reason != admission.ReasonDenied || !strings.Contains(st.Message, "spec.overrides[0].patch changes kind") {
			return fmt.Errorf("%s: %+v", s3, st)
		}
		return nil
	})
	for _, get := range []func() error{
		func() error {
			_, err := f.kube[s3].CoreV1().Secrets(f.ns).Get(ctx, "turned", metav1.GetOptions{})
			return err
		},
		func() error {
			_, err := f.kube[s3].CoreV1().ConfigMaps(f.ns).Get(ctx, "turned", metav1.GetOptions{})
			return err
		},
	} {
		if err := get(); !apierrors.IsNotFound(err) {
			t.Fatalf("the refused object is on %s (%v)", s3, err)
		}
	}

	// A Secret whose override for dc-3 is sealed with its values.
	secret := map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "creds"},
		"stringData": map[string]any{"password": "base"}}
	creds := f.putWritten("creds", v1alpha1.DeployableSpec{Template: secret, Overrides: []v1alpha1.Override{
		{ClusterSelector: dc("dc-3"), Patch: json.RawMessage(`{"stringData":{"password":"dc3-only"}}`)},
	}})
	if strings.Contains(string(creds.Spec), "dc3-only") {
		t.Fatalf("the stored spec holds the override's value: %s", creds.Spec)
	}
	f.waitSecretValue(s1, "creds", "password", "base")
	f.waitSecretValue(s3, "creds", "password", "dc3-only")
}
