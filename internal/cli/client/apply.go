package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"

	"github.com/purser-io/purser/api/v1alpha1"
)

// Applied is the outcome of applying one object.
type Applied struct {
	Resource  Resource
	Namespace string
	Name      string
	// Verb is what happened: submitted, created, registered, configured,
	// unchanged.
	Verb string
	// Detail is the state the object is in afterwards, such as the
	// runnable's phase.
	Detail string
}

// Outcome verbs.
const (
	VerbSubmitted  = "submitted"
	VerbCreated    = "created"
	VerbRegistered = "registered"
	VerbConfigured = "configured"
	VerbUnchanged  = "unchanged"
)

// Ref names the object as messages do: runnable/team-a/nightly.
func (a Applied) Ref() string {
	if a.Resource.Namespaced {
		return a.Resource.Singular() + "/" + a.Namespace + "/" + a.Name
	}
	return a.Resource.Singular() + "/" + a.Name
}

// String is the line `purser apply` prints.
func (a Applied) String() string {
	s := a.Ref() + " " + a.Verb
	if a.Detail != "" {
		s += " (" + a.Detail + ")"
	}
	return s
}

// answer is what the command line reads of the server's answer to a write.
type answer struct {
	Metadata v1alpha1.ObjectMeta `json:"metadata"`
	Status   struct {
		Phase      string `json:"phase"`
		Generation int64  `json:"generation"`
	} `json:"status"`
}

// Apply sends one object where its kind goes, as `kubectl apply` does:
// a Runnable is submitted (the same one again is unchanged), a Deployable
// put, a Cluster registered or, when registered already, updated (without
// a kubeconfig the stored one is kept, so that `get -o yaml`, edit, apply
// works). "unchanged" is told from the object's resourceVersion, which the
// server moves only when it writes.
func (c *Client) Apply(ctx context.Context, kind, ns, name string, body []byte, contentType string) (Applied, error) {
	r, ok := ResourceOfKind(kind)
	if !ok {
		if kind == "" {
			return Applied{}, errors.New("the object has no kind")
		}
		return Applied{}, fmt.Errorf("kind %q is not a purser kind (Runnable, Deployable, Cluster, Quota, Schedule, Trigger, PlacementPolicy, ClusterPlacementPolicy); wrap Kubernetes objects in spec.template, or write them with kubectl to purser's Kubernetes API, where a placement policy makes them runnables", kind)
	}
	out := Applied{Resource: r, Namespace: ns, Name: name}
	var ans answer
	switch kind {
	case v1alpha1.KindRunnable:
		code, err := c.Do(ctx, http.MethodPost, r.ListPath(), nil, body, contentType, &ans)
		if IsConflict(err) && ns != "" && name != "" {
			// The name holds another spec: an update, as kubectl apply
			// makes one (update.go).
			return c.updateRunnable(ctx, r, ns, name, body, err)
		}
		if err != nil {
			return out, err
		}
		out.Verb = VerbSubmitted
		if code == http.StatusOK {
			out.Verb = VerbUnchanged
		}
		out.Namespace, out.Name, out.Detail = ans.Metadata.Namespace, ans.Metadata.Name, ans.Status.Phase
		return out, nil
	case v1alpha1.KindSchedule:
		if ns == "" || name == "" {
			return out, errors.New("a Schedule needs metadata.namespace and metadata.name")
		}
		before, err := c.resourceVersion(ctx, r, ns, name)
		if err != nil {
			return out, err
		}
		var sch struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
			} `json:"metadata"`
			Status struct {
				NextScheduleTime string `json:"nextScheduleTime"`
			} `json:"status"`
		}
		if _, err := c.Do(ctx, http.MethodPut, r.Path(ns, name), nil, body, contentType, &sch); err != nil {
			return out, err
		}
		out.Verb = changeVerb(before, sch.Metadata.ResourceVersion, VerbCreated)
		if sch.Status.NextScheduleTime != "" {
			out.Detail = "next tick " + sch.Status.NextScheduleTime
		}
		return out, nil
	case v1alpha1.KindTrigger:
		if ns == "" || name == "" {
			return out, errors.New("a Trigger needs metadata.namespace and metadata.name")
		}
		before, err := c.resourceVersion(ctx, r, ns, name)
		if err != nil {
			return out, err
		}
		var trg struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
			} `json:"metadata"`
			Status struct {
				Token       string `json:"token"`
				WebhookPath string `json:"webhookPath"`
			} `json:"status"`
		}
		if _, err := c.Do(ctx, http.MethodPut, r.Path(ns, name), nil, body, contentType, &trg); err != nil {
			return out, err
		}
		out.Verb = changeVerb(before, trg.Metadata.ResourceVersion, VerbCreated)
		if trg.Status.Token != "" {
			// Shown this once: purser keeps only its hash.
			out.Detail = fmt.Sprintf("webhook POST %s with Authorization: Bearer %s (shown once; keep it)", trg.Status.WebhookPath, trg.Status.Token)
		}
		return out, nil
	case v1alpha1.KindDeployable:
		if ns == "" || name == "" {
			return out, errors.New("a Deployable needs metadata.namespace and metadata.name")
		}
		before, err := c.resourceVersion(ctx, r, ns, name)
		if err != nil {
			return out, err
		}
		if _, err := c.Do(ctx, http.MethodPut, r.Path(ns, name), nil, body, contentType, &ans); err != nil {
			return out, err
		}
		out.Verb = changeVerb(before, ans.Metadata.ResourceVersion, VerbCreated)
		out.Detail = fmt.Sprintf("generation %d, %s", ans.Status.Generation, ans.Status.Phase)
		return out, nil
	case v1alpha1.KindPlacementPolicy, v1alpha1.KindClusterPlacementPolicy:
		if name == "" || (r.Namespaced && ns == "") {
			return out, fmt.Errorf("a %s needs metadata.name%s", kind, map[bool]string{true: " and metadata.namespace"}[r.Namespaced])
		}
		before, err := c.resourceVersion(ctx, r, ns, name)
		if err != nil {
			return out, err
		}
		if _, err := c.Do(ctx, http.MethodPut, r.Path(ns, name), nil, body, contentType, &ans); err != nil {
			return out, err
		}
		out.Verb = changeVerb(before, ans.Metadata.ResourceVersion, VerbCreated)
		return out, nil
	case v1alpha1.KindQuota:
		if name == "" {
			return out, errors.New("a Quota needs metadata.name: the namespace it bounds")
		}
		before, err := c.resourceVersion(ctx, r, "", name)
		if err != nil {
			return out, err
		}
		if _, err := c.Do(ctx, http.MethodPut, r.Path("", name), nil, body, contentType, &ans); err != nil {
			return out, err
		}
		out.Verb = changeVerb(before, ans.Metadata.ResourceVersion, VerbCreated)
		return out, nil
	default: // Cluster
		before := ""
		if name != "" {
			var err error
			if before, err = c.resourceVersion(ctx, r, "", name); err != nil {
				return out, err
			}
		}
		if before == "" {
			if _, err := c.Do(ctx, http.MethodPost, r.ListPath(), nil, body, contentType, &ans); err != nil {
				return out, err
			}
			out.Name, out.Verb = ans.Metadata.Name, VerbRegistered
			return out, nil
		}
		if _, err := c.Do(ctx, http.MethodPut, r.Path("", name), nil, body, contentType, &ans); err != nil {
			return out, err
		}
		out.Verb = changeVerb(before, ans.Metadata.ResourceVersion, VerbRegistered)
		return out, nil
	}
}

// changeVerb tells created, configured and unchanged apart by the
// resourceVersion before ("" for none) and after a write.
func changeVerb(before, after, created string) string {
	switch before {
	case "":
		return created
	case after:
		return VerbUnchanged
	}
	return VerbConfigured
}

// resourceVersion is the object's resourceVersion, "" when there is none.
func (c *Client) resourceVersion(ctx context.Context, r Resource, ns, name string) (string, error) {
	var ans answer
	_, err := c.Do(ctx, http.MethodGet, r.Path(ns, name), nil, nil, "", &ans)
	if IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return ans.Metadata.ResourceVersion, nil
}

// IsNotFound reports an API answer 404.
func IsNotFound(err error) bool { return hasCode(err, http.StatusNotFound) }

// IsConflict reports an API answer 409.
func IsConflict(err error) bool { return hasCode(err, http.StatusConflict) }

func hasCode(err error, code int) bool {
	var st *v1alpha1.Status
	return errors.As(err, &st) && st.Code == code
}

// Marshal is the JSON body of an object to send.
func Marshal(obj Object) ([]byte, error) { return json.Marshal(obj) }

// VerbServerSideApplied is what `purser apply --server-side` prints of an
// object, as kubectl does.
const VerbServerSideApplied = "serverside-applied"

// serverSideKinds are the kinds purser's Kubernetes API (/k8s) serves
// server-side apply for.
var serverSideKinds = []string{v1alpha1.KindRunnable, v1alpha1.KindDeployable, v1alpha1.KindQuota,
	v1alpha1.KindCluster, v1alpha1.KindPlacementPolicy, v1alpha1.KindClusterPlacementPolicy}

// ServerSideApply applies one object by server-side apply through the
// API's /k8s, as `kubectl apply --server-side` does: the fields the object
// sets become manager's, and those it no longer sets but manager owned are
// removed; a field another manager owns with another value is a conflict
// (409, naming the manager) unless force takes it over. The write is the
// same write as Apply's, through the same checks, approvals and audit.
func (c *Client) ServerSideApply(ctx context.Context, kind, ns, name string, body []byte, manager string, force bool) (Applied, error) {
	r, ok := ResourceOfKind(kind)
	if !ok || !slices.Contains(serverSideKinds, r.Kind) {
		return Applied{}, fmt.Errorf("server-side apply is not served for kind %q; apply it without --server-side", kind)
	}
	if name == "" {
		return Applied{}, fmt.Errorf("a %s needs metadata.name", r.Kind)
	}
	path := "/k8s/apis/purser.io/v1alpha1/"
	if r.Namespaced {
		if ns == "" {
			return Applied{}, fmt.Errorf("%s %q names no namespace: set metadata.namespace or -n", r.Kind, name)
		}
		path += "namespaces/" + url.PathEscape(ns) + "/"
	}
	path += r.Plural + "/" + url.PathEscape(name)
	q := url.Values{"fieldManager": {manager}}
	if force {
		q.Set("force", "true")
	}
	var ans answer
	if _, err := c.Do(ctx, http.MethodPatch, path, q, body, "application/apply-patch+yaml", &ans); err != nil {
		return Applied{}, err
	}
	return Applied{Resource: r, Namespace: ns, Name: name, Verb: VerbServerSideApplied, Detail: ans.Status.Phase}, nil
}
