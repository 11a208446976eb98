package server

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"sort"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/placement"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/domain/rollout"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/member/clusters"
)

// diffTimeout bounds the dry run on one cluster.
const diffTimeout = 15 * time.Second

// ClusterDiff is what an apply of a deployable would change on one
// cluster: the field paths (never values, so a Secret's stay hidden), or
// that the object would be created.
type ClusterDiff struct {
	Cluster string   `json:"cluster"`
	Create  bool     `json:"create,omitempty"`
	Changes []string `json:"changes,omitempty"`
	// Overrides are the indices of spec.overrides applied on this cluster.
	Overrides []int  `json:"overrides,omitempty"`
	Error     string `json:"error,omitempty"`
}

// DiffResult is the answer of POST .../diff.
type DiffResult struct {
	Deployable string        `json:"deployable"`
	Clusters   []ClusterDiff `json:"clusters"`
}

// diffDeployable serves POST /api/v1/deployables/{ns}/{name}/diff: the
// body is a deployable as PUT would take it, checked as PUT checks it,
// and each cluster its placement matches is asked, by a server-side apply
// dry run of that cluster's object (its overrides applied), what would
// change. Nothing is written, in the store or on any cluster.
func (s *Server) diffDeployable(r *http.Request, u policy.User) (int, any, error) {
	ns, name, obj, err := s.deployableBody(r, u)
	if err != nil {
		return 0, nil, err
	}
	var cls []*store.Cluster
	if err := s.cfg.Store.Read(r.Context(), func(tx *store.Tx) error {
		var err error
		cls, err = tx.Clusters().List(r.Context())
		return err
	}); err != nil {
		return 0, nil, err
	}
	out := DiffResult{Deployable: ns + "/" + name, Clusters: []ClusterDiff{}}
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for _, c := range cls {
		var doc store.Document[v1alpha1.ClusterSpec]
		_ = json.Unmarshal(c.Spec, &doc) // unreadable: no taints
		if ok, _ := placement.Matches(obj.Spec.Placement, placement.Cluster{Name: c.Name, Labels: c.Labels, Taints: doc.Spec.Taints}); !ok {
			continue
		}
		wg.Go(func() {
			d := s.diffOn(r.Context(), c, obj)
			mu.Lock()
			out.Clusters = append(out.Clusters, d)
			mu.Unlock()
		})
	}
	wg.Wait()
	sort.Slice(out.Clusters, func(i, j int) bool { return out.Clusters[i].Cluster < out.Clusters[j].Cluster })
	return http.StatusOK, out, nil
}

func (s *Server) diffOn(ctx context.Context, c *store.Cluster, obj *v1alpha1.Deployable) ClusterDiff {
	ctx, cancel := context.WithTimeout(ctx, diffTimeout)
	defer cancel()
	out := ClusterDiff{Cluster: c.Name, Overrides: v1alpha1.OverridesFor(obj.Spec.Overrides, c.Labels)}
	fail := func(err error) ClusterDiff {
		out.Error = err.Error()
		return out
	}
	cfg, err := clusters.RESTConfig(c, s.cfg.Sealer)
	if err != nil {
		return fail(err)
	}
	kube, err := clusters.NewObjectClient(c.Name, cfg)
	if err != nil {
		return fail(err)
	}
	tmpl, err := v1alpha1.ApplyOverrides(obj.Spec.Template, obj.Spec.Overrides, out.Overrides)
	if err != nil {
		return fail(err)
	}
	desired := &unstructured.Unstructured{Object: maps.Clone(tmpl)}
	gv, err := schema.ParseGroupVersion(desired.GetAPIVersion())
	if err != nil {
		return fail(err)
	}
	mapping, err := kube.Mapping(gv.WithKind(desired.GetKind()))
	if err != nil {
		return fail(fmt.Errorf("kind %s is not served by the cluster: %w", desired.GetKind(), err))
	}
	objName := desired.GetName()
	if objName == "" {
		objName = obj.Metadata.Name
	}
	md, _ := tmpl["metadata"].(map[string]any)
	desired.Object["metadata"] = map[string]any{"name": objName}
	if md != nil {
		for _, k := range []string{"labels", "annotations"} {
			if v, ok := md[k]; ok {
				desired.Object["metadata"].(map[string]any)[k] = v
			}
		}
	}
	var ri dynamic.ResourceInterface = kube.Dynamic().Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		desired.SetNamespace(obj.Metadata.Namespace)
		ri = kube.Dynamic().Resource(mapping.Resource).Namespace(obj.Metadata.Namespace)
	}
	cur, err := ri.Get(ctx, objName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		out.Create = true
		return out
	case err != nil:
		return fail(err)
	}
	// The syncer's field manager, so that what purser applied before and
	// leaves out now shows as a change (server-side apply removes the
	// fields a manager stops setting), with dryRun=All: nothing stored.
	would, err := ri.Apply(ctx, objName, desired, metav1.ApplyOptions{FieldManager: v1alpha1.FieldManager, Force: true, DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		return fail(err)
	}
	out.Changes = rollout.Drift(cur.Object, would.Object)
	return out
}
