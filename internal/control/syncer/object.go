package syncer

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/seal"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/platform/fields"
)

// What purser writes on every object it manages. The label is what makes an
// object purser's: only objects carrying it are ever updated or deleted, and
// the informers select on it. The annotations let an operator looking at a
// member cluster tell where an object comes from and which version it is.
const (
	LabelDeployable      = v1alpha1.LabelDeployable      // the deployable's uid
	AnnotationDeployable = v1alpha1.AnnotationDeployable // namespace/name
	AnnotationGeneration = v1alpha1.AnnotationGeneration // the deployable's generation
	AnnotationSpecHash   = v1alpha1.AnnotationSpecHash   // see specHash
	FieldManager         = v1alpha1.FieldManager         // server-side apply manager
)

// deployable is one row of the source of truth, decoded once per change
// (not once per cluster): placement for the decision, and the clear
// template for building the object. Secret values are not decoded here;
// they are opened per apply and dropped right after.
type deployable struct {
	rec       *store.Deployable
	placement v1alpha1.Placement
	rollout   *v1alpha1.Rollout // nil: every cluster gets each generation at once
	overrides []v1alpha1.Override
	observe   bool // spec.mode Observe: report drift, never write
	// gates are the rollout's compiled gates (rollout.go), built once.
	gatesOnce sync.Once
	gates     []gate
	gatesErr  error
	template  map[string]any
	gvk       schema.GroupVersionKind
	author    policy.User // who wrote the spec, whom the policy is asked about
	authored  bool        // the spec records its author (written since authors are)
	name      string      // the object's name on the member clusters
	hash      string
	err       error // the spec could not be decoded: reported as status Error
}

// live reports whether the deployable should exist on the clusters its
// placement matches: approved at least once and not tombstoned.
func (d *deployable) live() bool { return d.rec.Generation > 0 && d.rec.DeletedAt == nil }

// decodeDeployable decodes the clear part of a row. Errors are kept in the
// result rather than returned: the row still names a deployable whose
// objects may have to be removed, and whose status must say what is wrong.
func decodeDeployable(rec *store.Deployable) *deployable {
	d := &deployable{rec: rec, name: rec.Name, hash: specHash(rec)}
	var doc store.Document[v1alpha1.DeployableSpec]
	if err := json.Unmarshal(rec.Spec, &doc); err != nil {
		d.err = fmt.Errorf("stored spec does not decode: %w", err)
		return d
	}
	d.placement, d.template, d.rollout = doc.Spec.Placement, doc.Spec.Template, doc.Spec.Rollout
	d.overrides, d.observe = doc.Spec.Overrides, doc.Spec.Mode == v1alpha1.ModeObserve
	if doc.Author != nil {
		d.author, d.authored = policy.User{Name: doc.Author.Name, Groups: doc.Author.Groups}, true
	}
	apiVersion, _ := d.template["apiVersion"].(string)
	kind, _ := d.template["kind"].(string)
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil || kind == "" {
		// Tombstones of never-approved deployables have an empty spec;
		// they need no kind, since nothing of theirs was ever applied.
		if d.live() {
			d.err = fmt.Errorf("template has no valid apiVersion/kind")
		}
		return d
	}
	d.gvk = gv.WithKind(kind)
	if md, ok := d.template["metadata"].(map[string]any); ok {
		if n, _ := md["name"].(string); n != "" {
			d.name = n
		}
	}
	return d
}

// specHash identifies the desired object without revealing a Secret's
// values: it covers the clear stored document and the store's spec hash,
// which for a Secret includes a keyed fingerprint of the values (never the
// values themselves), so the annotation is safe to show on a cluster.
func specHash(rec *store.Deployable) string {
	h := sha256.New()
	h.Write(rec.Spec)
	h.Write([]byte{0})
	h.Write([]byte(rec.SpecHash))
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// hashFor is the spec hash of the object of a cluster that the overrides
// named by which select: a cluster whose labels change to select other
// overrides needs another object, though the spec did not change.
func (d *deployable) hashFor(which []int) string {
	if len(which) == 0 {
		return d.hash
	}
	h := sha256.New()
	h.Write([]byte(d.hash))
	for _, i := range which {
		h.Write([]byte{'/'})
		h.Write([]byte(strconv.Itoa(i)))
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// object builds the object to apply. namespaced comes from the cluster's
// RESTMapper: a cluster-scoped kind (ClusterWorkflowTemplate) gets no
// namespace. For a Secret, the sealed values are opened and joined to the
// template here; the result must only be applied and then dropped, never
// logged or stored.
//
// The overrides whose clusterSelector matches clusterLabels are applied to
// the template first (Secret values joined, and a Secret's overrides'
// patches, which are sealed with them), so that the object compared and
// repaired on each cluster is that cluster's own. An error wrapping
// v1alpha1.ErrTooLarge or ErrIdentity is a refusal of what the overrides
// render (AdmissionDenied).
func (d *deployable) object(sealer *seal.Sealer, namespaced bool, clusterLabels map[string]string) (*unstructured.Unstructured, error) {
	tmpl, overrides := d.template, d.overrides
	if d.gvk.Group == "" && d.gvk.Kind == "Secret" && len(d.rec.Secret) > 0 {
		values, err := sealer.Open(d.rec.Secret, seal.SecretBinding(d.rec.Namespace, d.rec.Name))
		if err != nil {
			return nil, fmt.Errorf("open secret values: %w", err)
		}
		tmpl, err = seal.JoinSecret(tmpl, values)
		var patches []json.RawMessage
		if err == nil {
			patches, err = seal.OpenPatches(values)
		}
		clear(values)
		if err != nil {
			// The messages name the field, never a value.
			return nil, err
		}
		if patches != nil {
			if len(patches) != len(overrides) {
				return nil, fmt.Errorf("the sealed overrides (%d) do not match spec.overrides (%d)", len(patches), len(overrides))
			}
			overrides = slices.Clone(overrides)
			for i := range overrides {
				overrides[i].Patch = patches[i]
			}
		}
	}
	which := v1alpha1.OverridesFor(overrides, clusterLabels)
	if len(which) > 0 {
		var err error
		if tmpl, err = v1alpha1.ApplyOverrides(tmpl, overrides, which); err != nil {
			return nil, err // names the override, never a value
		}
	}
	obj := &unstructured.Unstructured{Object: maps.Clone(tmpl)}
	// Metadata is rebuilt rather than taken from the template so that
	// nothing a user put there (uid, resourceVersion, ownerReferences
	// pointing into purser's world) reaches the cluster.
	var labels, annotations map[string]string
	if md, ok := tmpl["metadata"].(map[string]any); ok {
		labels = fields.StringMap(md["labels"])
		annotations = fields.StringMap(md["annotations"])
	}
	obj.Object["metadata"] = map[string]any{}
	obj.SetName(d.name)
	if namespaced {
		obj.SetNamespace(d.rec.Namespace)
	}
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelDeployable] = d.rec.UID
	obj.SetLabels(labels)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[AnnotationDeployable] = d.rec.Namespace + "/" + d.rec.Name
	annotations[AnnotationGeneration] = strconv.FormatInt(d.rec.Generation, 10)
	annotations[AnnotationSpecHash] = d.hashFor(which)
	obj.SetAnnotations(annotations)
	delete(obj.Object, "status")
	return obj, nil
}
