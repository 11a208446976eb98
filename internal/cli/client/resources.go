package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/purser-io/purser/api/v1alpha1"
)

// Resource is one of purser's kinds as the command line and the API name
// it: Runnable, its plural runnables that is also its path, its short
// name rn.
type Resource struct {
	Kind       string
	Plural     string
	Short      string
	Namespaced bool
}

// Resources are purser's kinds, in the order `purser get` lists them.
var Resources = []Resource{
	{v1alpha1.KindRunnable, "runnables", "rn", true},
	{v1alpha1.KindDeployable, "deployables", "dp", true},
	{v1alpha1.KindCluster, "clusters", "cl", false},
	// A Quota is named after its namespace, and its path has no other.
	{v1alpha1.KindQuota, "quotas", "quota", false},
	{v1alpha1.KindSchedule, "schedules", "sched", true},
	{v1alpha1.KindTrigger, "triggers", "trig", true},
	{v1alpha1.KindPlacementPolicy, "placementpolicies", "pp", true},
	{v1alpha1.KindClusterPlacementPolicy, "clusterplacementpolicies", "cpp", false},
}

// ParseResource accepts what kubectl users type: runnable, runnables,
// Runnable, rn; deployable(s), dp; cluster(s), cl.
func ParseResource(s string) (Resource, error) {
	low := strings.ToLower(s)
	for _, r := range Resources {
		if strings.EqualFold(low, r.Kind) || low == r.Plural || low == r.Short {
			return r, nil
		}
	}
	return Resource{}, fmt.Errorf("unknown kind %q: use runnables (rn), deployables (dp), clusters (cl), quotas, schedules (sched), triggers (trig), placementpolicies (pp) or clusterplacementpolicies (cpp)", s)
}

// ResourceOfKind returns the resource of an object's kind.
func ResourceOfKind(kind string) (Resource, bool) {
	for _, r := range Resources {
		if r.Kind == kind {
			return r, true
		}
	}
	return Resource{}, false
}

// Singular is the lower-case kind: runnable, as `-o name` and messages
// write it.
func (r Resource) Singular() string { return strings.ToLower(r.Kind) }

// ListPath is the path of the resource's list.
func (r Resource) ListPath() string { return "/api/v1/" + r.Plural }

// Path is the path of one object; ns is ignored for clusters.
func (r Resource) Path(ns, name string) string {
	if r.Namespaced {
		return r.ListPath() + "/" + url.PathEscape(ns) + "/" + url.PathEscape(name)
	}
	return r.ListPath() + "/" + url.PathEscape(name)
}

// Object is an API object as decoded JSON: the command line shows what the
// server answers without losing fields it does not know.
type Object = map[string]any

// Get reads one object.
func (c *Client) Get(ctx context.Context, r Resource, ns, name string) (Object, error) {
	var obj Object
	if _, err := c.Do(ctx, http.MethodGet, r.Path(ns, name), nil, nil, "", &obj); err != nil {
		return nil, err
	}
	return obj, nil
}

// List follows continue tokens from path until the list ends or limit
// items (limit > 0) were read.
func (c *Client) List(ctx context.Context, path string, q url.Values, limit int) ([]Object, error) {
	q = cloneValues(q)
	var all []Object
	for {
		var page struct {
			Items    []Object `json:"items"`
			Continue string   `json:"continue"`
		}
		if _, err := c.Do(ctx, http.MethodGet, path, q, nil, "", &page); err != nil {
			return nil, err
		}
		all = append(all, page.Items...)
		if limit > 0 && len(all) >= limit {
			return all[:limit], nil
		}
		if page.Continue == "" {
			return all, nil
		}
		q.Set("continue", page.Continue)
	}
}

func cloneValues(q url.Values) url.Values {
	out := url.Values{}
	for k, v := range q {
		out[k] = append([]string(nil), v...)
	}
	return out
}

// ListOptions select the objects of a list.
type ListOptions struct {
	Namespace string // "" with a namespaced kind: every namespace
	// Selector is matched on metadata.labels here, with apimachinery's
	// selector, as kubectl's -l would be matched by a kube-apiserver;
	// nil or empty matches everything.
	Selector labels.Selector
	// Phase and Cluster filter runnables, on the server.
	Phase, Cluster string
	Limit          int // at most this many matching objects; 0: all
}

// ListObjects reads the objects of a kind that opts select, every page.
func (c *Client) ListObjects(ctx context.Context, r Resource, opts ListOptions) ([]Object, error) {
	q := url.Values{}
	if r.Namespaced && opts.Namespace != "" {
		q.Set("namespace", opts.Namespace)
	}
	if r.Kind == v1alpha1.KindRunnable {
		if opts.Phase != "" {
			q.Set("phase", opts.Phase)
		}
		if opts.Cluster != "" {
			q.Set("cluster", opts.Cluster)
		}
	}
	if opts.Selector == nil || opts.Selector.Empty() {
		return c.List(ctx, r.ListPath(), q, opts.Limit)
	}
	items, err := c.List(ctx, r.ListPath(), q, 0)
	if err != nil {
		return nil, err
	}
	var out []Object
	for _, it := range items {
		if opts.Selector.Matches(objectLabels(it)) {
			out = append(out, it)
			if opts.Limit > 0 && len(out) == opts.Limit {
				break
			}
		}
	}
	return out, nil
}

func objectLabels(o Object) labels.Set {
	set := labels.Set{}
	md, _ := o["metadata"].(map[string]any)
	m, _ := md["labels"].(map[string]any)
	for k, v := range m {
		set[k], _ = v.(string)
	}
	return set
}
