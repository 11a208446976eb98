package kubeapi

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/internal/hub/store"
)

// resource is one kind the API serves, as discovery names it.
type resource struct {
	gvk        schema.GroupVersionKind
	plural     string
	singular   string
	shortNames []string
	categories []string
	namespaced bool
	// columns are the CRD's additionalPrinterColumns (a custom resource
	// whose CRD the inventory holds); nil: the built-in printer of the
	// kind, or NAME and AGE.
	columns []printerColumn
	// own is purser's kind this is, served by the REST API's handlers.
	own *OwnKind
}

// verbs are what the resource serves.
func (r *resource) verbs() []string {
	if r.own != nil {
		return r.own.verbs()
	}
	return verbs
}

func (r *resource) apiVersion() string { return r.gvk.GroupVersion().String() }

// builtin names the kinds purser's agent tracks by default and the ones
// tracked on request, with the names, short names and scope their
// kube-apiserver (or their CRD) gives them: kubernetes'
// pkg/registry/*/rest storage (ShortNames, Categories) for the built-in
// kinds; the Argo Workflows and Flink Kubernetes Operator CRDs for theirs.
// Any other kind found in the inventory is served too, named by
// apimachinery's meta.UnsafeGuessKindToResource unless its CRD is in the
// inventory.
var builtin = []resource{
	{gvk: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, plural: "configmaps", shortNames: []string{"cm"}, namespaced: true},
	{gvk: schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, plural: "secrets", namespaced: true},
	{gvk: schema.GroupVersionKind{Version: "v1", Kind: "Node"}, plural: "nodes", shortNames: []string{"no"}},
	{gvk: schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, plural: "pods", shortNames: []string{"po"}, categories: []string{"all"}, namespaced: true},
	{gvk: schema.GroupVersionKind{Version: "v1", Kind: "Event"}, plural: "events", shortNames: []string{"ev"}, namespaced: true},
	{gvk: schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}, plural: "jobs", categories: []string{"all"}, namespaced: true},
	{gvk: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, plural: "deployments", shortNames: []string{"deploy"}, categories: []string{"all"}, namespaced: true},
	{gvk: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "StatefulSet"}, plural: "statefulsets", shortNames: []string{"sts"}, categories: []string{"all"}, namespaced: true},
	{gvk: schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Workflow"}, plural: "workflows", shortNames: []string{"wf"}, namespaced: true},
	{gvk: schema.GroupVersionKind{Group: "flink.apache.org", Version: "v1beta1", Kind: "FlinkDeployment"}, plural: "flinkdeployments", shortNames: []string{"flinkdep"}, namespaced: true},
	{gvk: schema.GroupVersionKind{Group: "flink.apache.org", Version: "v1beta1", Kind: "FlinkStateSnapshot"}, plural: "flinkstatesnapshots", shortNames: []string{"flinksnp"}, namespaced: true},
	{gvk: schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}, plural: "customresourcedefinitions", shortNames: []string{"crd", "crds"}, categories: []string{"api-extensions"}},
}

// catalogue is the kinds served, by cluster ("" for every cluster).
type catalogue struct {
	all []*resource
}

// byResource finds a served resource by group, version and plural.
func (c *catalogue) byResource(group, version, plural string) *resource {
	for _, r := range c.all {
		if r.gvk.Group == group && r.gvk.Version == version && r.plural == plural {
			return r
		}
	}
	return nil
}

// groups returns the served groups, the core group ("") first, then by
// name, each with its versions.
func (c *catalogue) groups() []string {
	var out []string
	for _, r := range c.all {
		if !slices.Contains(out, r.gvk.Group) {
			out = append(out, r.gvk.Group)
		}
	}
	slices.Sort(out)
	return out
}

func (c *catalogue) versions(group string) []string {
	var out []string
	for _, r := range c.all {
		if r.gvk.Group == group && !slices.Contains(out, r.gvk.Version) {
			out = append(out, r.gvk.Version)
		}
	}
	slices.Sort(out)
	return out
}

func (c *catalogue) resources(group, version string) []*resource {
	var out []*resource
	for _, r := range c.all {
		if r.gvk.Group == group && r.gvk.Version == version {
			out = append(out, r)
		}
	}
	return out
}

// catalogues caches what is served for a while: discovery is read on
// every kubectl run and finding the kinds in the inventory scans it.
type catalogues struct {
	s   Reader
	ttl time.Duration
	// own are purser's kinds, served at the farm's level alone.
	own []*resource

	mu   sync.Mutex
	at   time.Time
	data map[string]*catalogue // by cluster; "" every cluster
}

// catalogueTTL is how long a kind new to the inventory may take to show
// in discovery.
const catalogueTTL = 10 * time.Second

func (cs *catalogues) get(ctx context.Context, cluster string) (*catalogue, error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.data == nil || time.Since(cs.at) > cs.ttl {
		data, err := loadCatalogues(ctx, cs.s)
		if err != nil {
			return nil, err
		}
		data[""].all = append(data[""].all, cs.own...)
		cs.data, cs.at = data, time.Now()
	}
	if c, ok := cs.data[cluster]; ok {
		return c, nil
	}
	return &catalogue{}, nil
}

// loadCatalogues builds what each cluster serves: the kinds the inventory
// holds there, and the built-in kinds its kube-apiserver serves (as its
// agent's discovery recorded), so that a tracked kind with no object yet
// is listed, empty, rather than unknown.
func loadCatalogues(ctx context.Context, s Reader) (map[string]*catalogue, error) {
	type key struct{ cluster, apiVersion, kind string }
	found := map[key]bool{}
	crds := map[schema.GroupKind]crdNames{}
	err := s.Read(ctx, func(tx *store.Tx) error {
		clear(found)
		clear(crds)
		kinds, err := tx.Inventory().Kinds(ctx)
		if err != nil {
			return err
		}
		for _, k := range kinds {
			found[key{k.Cluster, k.APIVersion, k.Kind}] = true
		}
		clusters, err := tx.Clusters().List(ctx)
		if err != nil {
			return err
		}
		for _, c := range clusters {
			served, err := tx.Kinds().List(ctx, c.Name)
			if err != nil {
				return err
			}
			for _, k := range served {
				gv := schema.GroupVersion{Group: k.Group, Version: k.Version}.String()
				for _, b := range builtin {
					if b.gvk.Group == k.Group && b.gvk.Kind == k.Kind && b.gvk.Kind != "Pod" && b.gvk.Kind != "Event" {
						found[key{c.Name, gv, k.Kind}] = true
					}
				}
			}
		}
		// The CRDs the inventory holds name their kinds and columns.
		f := store.InventoryFilter{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition", System: true}
		for {
			rows, next, err := tx.Inventory().List(ctx, f)
			if err != nil {
				return err
			}
			for _, r := range rows {
				if n, ok := parseCRD(r.Object); ok {
					crds[n.gk] = n
				}
			}
			if next == "" {
				return nil
			}
			f.Continue = next
		}
	})
	if err != nil {
		return nil, err
	}
	out := map[string]*catalogue{"": {}}
	seen := map[string]map[schema.GroupVersionKind]bool{}
	for k := range found {
		gv, err := schema.ParseGroupVersion(k.apiVersion)
		if err != nil {
			continue
		}
		gvk := gv.WithKind(k.kind)
		r := describe(gvk, crds)
		for _, c := range []string{"", k.cluster} {
			if seen[c] == nil {
				seen[c] = map[schema.GroupVersionKind]bool{}
			}
			if seen[c][gvk] {
				continue
			}
			seen[c][gvk] = true
			if out[c] == nil {
				out[c] = &catalogue{}
			}
			out[c].all = append(out[c].all, r)
		}
	}
	for _, c := range out {
		slices.SortFunc(c.all, func(a, b *resource) int {
			return strings.Compare(a.gvk.Group+"/"+a.gvk.Version+"/"+a.plural, b.gvk.Group+"/"+b.gvk.Version+"/"+b.plural)
		})
	}
	return out, nil
}

// describe names a kind: as its CRD does, as the built-in table does, or
// by apimachinery's guess.
func describe(gvk schema.GroupVersionKind, crds map[schema.GroupKind]crdNames) *resource {
	r := &resource{gvk: gvk, namespaced: true}
	found := false
	for _, b := range builtin {
		if b.gvk.Group == gvk.Group && b.gvk.Kind == gvk.Kind {
			*r = b
			r.gvk = gvk
			found = true
			break
		}
	}
	if n, ok := crds[gvk.GroupKind()]; ok {
		r.plural, r.singular, r.shortNames, r.categories, r.namespaced = n.plural, n.singular, n.shortNames, n.categories, n.namespaced
		r.columns = n.columns[gvk.Version]
		found = true
	}
	if !found {
		plural, singular := meta.UnsafeGuessKindToResource(gvk)
		r.plural, r.singular = plural.Resource, singular.Resource
	}
	if r.singular == "" {
		r.singular = strings.ToLower(gvk.Kind)
	}
	return r
}

// crdNames is what a CustomResourceDefinition says of its kind.
type crdNames struct {
	gk               schema.GroupKind
	plural, singular string
	shortNames       []string
	categories       []string
	namespaced       bool
	columns          map[string][]printerColumn // by version
}

// printerColumn is one of a CRD version's additionalPrinterColumns
// (apiextensions.k8s.io/v1 CustomResourceColumnDefinition).
type printerColumn struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Format      string `json:"format,omitempty"`
	Description string `json:"description,omitempty"`
	Priority    int32  `json:"priority,omitempty"`
	JSONPath    string `json:"jsonPath"`
}

func parseCRD(obj []byte) (crdNames, bool) {
	var crd struct {
		Spec struct {
			Group string `json:"group"`
			Names struct {
				Plural     string   `json:"plural"`
				Singular   string   `json:"singular"`
				Kind       string   `json:"kind"`
				ShortNames []string `json:"shortNames"`
				Categories []string `json:"categories"`
			} `json:"names"`
			Scope    string `json:"scope"`
			Versions []struct {
				Name                     string          `json:"name"`
				AdditionalPrinterColumns []printerColumn `json:"additionalPrinterColumns"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if len(obj) == 0 || json.Unmarshal(obj, &crd) != nil || crd.Spec.Names.Kind == "" || crd.Spec.Names.Plural == "" {
		return crdNames{}, false
	}
	n := crdNames{gk: schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}, plural: crd.Spec.Names.Plural,
		singular: crd.Spec.Names.Singular, shortNames: crd.Spec.Names.ShortNames, categories: crd.Spec.Names.Categories,
		namespaced: crd.Spec.Scope != "Cluster", columns: map[string][]printerColumn{}}
	for _, v := range crd.Spec.Versions {
		n.columns[v.Name] = v.AdditionalPrinterColumns
	}
	return n, true
}
