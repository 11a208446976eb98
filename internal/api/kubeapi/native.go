package kubeapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"
	clientscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/native"
)

// Native objects written to /k8s. A FlinkDeployment applied with kubectl
// to purser (POST, PUT, a patch or an apply, DELETE in a namespace of the
// farm-wide /k8s) is not stored as itself: the placement policy that
// selects it (internal/domain/native) makes it a runnable (or a
// deployable) named after it, the object as its template, and that is
// written through the runnables' (or deployables') own handlers, the
// kinds of Own, so that the write is authorized, admitted, approved and
// audited as the writer's POST or PUT of it would be. Read back by name,
// the object is the template of what holds it, with that one's identity
// and version, purser's view of it as annotations and, for a runnable,
// the live copy's status, read from the inventory of the cluster it runs
// on. Lists and watches of the kind stay the inventory's: the live copies
// on the member clusters.

// Annotations of a native object read back from its runnable (among
// native.ViewAnnotations, which a write drops from the template).
const (
	// RunnableAnnotation and DeployableAnnotation name what the object
	// is.
	RunnableAnnotation   = "purser.io/runnable"
	DeployableAnnotation = "purser.io/deployable"
	// PhaseAnnotation is the phase of what holds it; AttemptAnnotation a
	// runnable's attempt count, GenerationAnnotation a deployable's
	// generation; ClusterAnnotation names a runnable's current cluster.
	PhaseAnnotation      = "purser.io/phase"
	AttemptAnnotation    = "purser.io/attempt"
	GenerationAnnotation = "purser.io/generation"
)

// Policies reads the placement policies that may select an object of a
// namespace: the namespace's and the farm's.
type Policies func(ctx context.Context, namespace string) ([]native.Policy, error)

// nativeCall is one request on a native object: the runnable kind's call
// for the same namespace and name, and the native kind.
type nativeCall struct {
	*ownCall
	res *resource
}

// serveNative serves a write of a native object, or a read of one by
// name that a runnable holds; handled is false for a read the inventory
// answers instead.
func (a *API) serveNative(w http.ResponseWriter, req *request, res *resource, ns, name string) (handled bool, err error) {
	rk := a.ownKind("runnables")
	if rk == nil || a.cfg.Policies == nil || req.cluster != "" || !res.namespaced || ns == "" || res.own != nil {
		return false, nil
	}
	n := &nativeCall{ownCall: &ownCall{a: a, w: w, req: req, k: rk, ns: ns, name: name, native: res}, res: res}
	r := req.r
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		if name == "" || isTrue(r.URL.Query().Get("watch")) {
			return false, nil
		}
		return n.get()
	}
	if err := rk.MayWrite(req.user, ns); err != nil {
		w.Header().Set("Connection", "close")
		return true, n.refusal(err)
	}
	if err := n.readWhole(); err != nil {
		return true, err
	}
	if err := n.dryRun(); err != nil {
		return true, err
	}
	switch {
	case r.Method == http.MethodPost && name == "":
		return true, n.create()
	case r.Method == http.MethodPut && name != "":
		return true, n.update()
	case r.Method == http.MethodPatch && name != "":
		return true, n.patch()
	case r.Method == http.MethodDelete && name != "":
		return true, n.delete()
	}
	w.Header().Set("Allow", "GET, POST, PUT, PATCH, DELETE")
	return true, statusErr(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed,
		fmt.Sprintf("%s is not served on %s", r.Method, r.URL.Path))
}

// what names the native kind in messages: flinkdeployments.flink.apache.org.
func (n *nativeCall) what() string {
	if n.res.gvk.Group == "" {
		return n.res.plural
	}
	return n.res.plural + "." + n.res.gvk.Group
}

// held is what holds a native object of the path's name: a runnable or
// a deployable whose template is of the native kind.
type held struct {
	k          *OwnKind // its kind, whose handlers write it
	meta       v1alpha1.ObjectMeta
	template   map[string]any
	runnable   *v1alpha1.Runnable
	deployable *v1alpha1.Deployable
}

// gone says the object was deleted through here: its runnable was
// cancelled (and stays readable as such until it is removed).
func (h *held) gone() bool {
	return h.runnable != nil && h.runnable.Status.Phase == v1alpha1.PhaseCancelled
}

// on is a call of kind k's handlers for the path's namespace and name.
func (n *nativeCall) on(k *OwnKind) *ownCall {
	o := *n.ownCall
	o.k = k
	return &o
}

// read reads the object of the path's name of kind k as the writer may:
// its body, or nil when there is none.
func (n *nativeCall) read(k *OwnKind) ([]byte, error) {
	if k == nil {
		return nil, nil
	}
	_, body, err := n.on(k).call(k.Get, http.MethodGet, nil, nil)
	var se *statusError
	if errors.As(err, &se) && se.st.Code == http.StatusNotFound {
		return nil, nil
	}
	return body, err
}

// current is what holds the path's name when it is of the native kind
// (a cancelled runnable included: its object is gone); nil when nothing
// does. taken says whether the name is held at all, of any kind: a
// runnable and a deployable share no name with a native object of
// another kind.
func (n *nativeCall) current() (h *held, taken bool, err error) {
	body, err := n.read(n.a.ownKind("runnables"))
	if err != nil {
		return nil, false, err
	}
	if body != nil {
		var r v1alpha1.Runnable
		if err := json.Unmarshal(body, &r); err != nil {
			return nil, false, fmt.Errorf("the runnable as read: %w", err)
		}
		if templateGVK(r.Spec.Template) != n.res.gvk {
			return nil, true, nil
		}
		return &held{k: n.a.ownKind("runnables"), meta: r.Metadata, template: r.Spec.Template, runnable: &r}, true, nil
	}
	body, err = n.read(n.a.ownKind("deployables"))
	if err != nil || body == nil {
		return nil, false, err
	}
	var d v1alpha1.Deployable
	if err := json.Unmarshal(body, &d); err != nil {
		return nil, false, fmt.Errorf("the deployable as read: %w", err)
	}
	if templateGVK(d.Spec.Template) != n.res.gvk {
		return nil, true, nil
	}
	return &held{k: n.a.ownKind("deployables"), meta: d.Metadata, template: d.Spec.Template, deployable: &d}, true, nil
}

// live is current without what was deleted through here.
func (n *nativeCall) held() (*held, error) {
	h, _, err := n.current()
	if err != nil || h == nil || h.gone() {
		return nil, err
	}
	return h, nil
}

func templateGVK(t map[string]any) schema.GroupVersionKind {
	apiVersion, _ := t["apiVersion"].(string)
	kind, _ := t["kind"].(string)
	gv, _ := schema.ParseGroupVersion(apiVersion)
	return gv.WithKind(kind)
}

// unheld refuses a change of an object no live runnable or deployable
// holds: what the inventory shows of the member clusters is read-only
// here.
func (n *nativeCall) unheld() error {
	n.w.Header().Set("Allow", "GET, HEAD, POST")
	return statusErr(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed,
		fmt.Sprintf("%s %q is held by no runnable or deployable of namespace %s: what the inventory shows of the member clusters is read-only through /k8s; "+
			"create the object here (a placement policy makes it a runnable or a deployable), or change what runs through purser's API, /api/v1", n.what(), n.name, n.ns))
}

// get answers the object a live runnable or deployable holds; a name
// nothing of the kind holds (or a runnable cancelled, whose object was
// deleted) is the inventory's to answer.
func (n *nativeCall) get() (bool, error) {
	if n.k.MayRead != nil && n.k.MayRead(n.req.user, n.ns) != nil {
		return false, nil // the inventory's read refuses in its own words
	}
	h, err := n.held()
	if err != nil || h == nil {
		return false, err
	}
	if asTable(n.req.r) != "" {
		return false, nil // kubectl get's table: the live copies' columns
	}
	obj, err := n.view(h)
	if err != nil {
		return true, err
	}
	entries, err := n.on(h.k).readManaged(n.req.r.Context(), h.meta.UID)
	if err != nil {
		return true, err
	}
	if len(entries) > 0 {
		u := unstructured.Unstructured{Object: obj}
		u.SetManagedFields(entries)
	}
	return true, writeJSON(n.w, http.StatusOK, obj)
}

// view is the native object h holds: its template, with h's identity and
// version, purser's view as annotations, and a runnable's live copy's
// status.
func (n *nativeCall) view(h *held) (map[string]any, error) {
	raw, err := json.Marshal(h.template)
	if err != nil {
		return nil, err
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, err
	}
	md, _ := obj["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		obj["metadata"] = md
	}
	md["name"], md["namespace"] = h.meta.Name, h.meta.Namespace
	md["uid"], md["resourceVersion"] = h.meta.UID, h.meta.ResourceVersion
	md["creationTimestamp"] = h.meta.CreationTimestamp.UTC().Format("2006-01-02T15:04:05Z")
	ann, _ := md["annotations"].(map[string]any)
	if ann == nil {
		ann = map[string]any{}
	}
	if p := h.meta.Annotations[native.AnnotationPolicy]; p != "" {
		ann[native.AnnotationPolicy] = p
	}
	md["annotations"] = ann
	if d := h.deployable; d != nil {
		ann[DeployableAnnotation] = h.meta.Namespace + "/" + h.meta.Name
		ann[PhaseAnnotation] = string(d.Status.Phase)
		ann[GenerationAnnotation] = strconv.FormatInt(d.Status.Generation, 10)
		return obj, nil
	}
	r := h.runnable
	ann[RunnableAnnotation] = h.meta.Namespace + "/" + h.meta.Name
	ann[PhaseAnnotation] = string(r.Status.Phase)
	ann[AttemptAnnotation] = strconv.Itoa(r.Status.AttemptCount)
	if r.Status.Cluster != "" {
		ann[ClusterAnnotation] = r.Status.Cluster
		q := sel{res: n.res, cluster: r.Status.Cluster, namespace: h.meta.Namespace, name: h.meta.Name}
		p, err := n.a.read(n.req, &q, 0, "")
		if err != nil {
			return nil, err
		}
		if len(p.rows) > 0 {
			var live struct {
				Status any `json:"status"`
			}
			if json.Unmarshal(p.rows[0].Object, &live) == nil && live.Status != nil {
				obj["status"] = live.Status
			}
		}
	}
	addConditions(obj, v1alpha1.RunnableConditions(r))
	return obj, nil
}

// addConditions adds purser's conditions of what holds a native object to
// the status.conditions its live copy reports, so that a reader of
// Kubernetes status (kubectl wait, Flux's and Argo CD's health) sees a
// runnable still queued as in progress and one that failed for good as
// failed; a type the copy reports itself is left as the copy says.
func addConditions(obj map[string]any, conds []v1alpha1.Condition) {
	st, _ := obj["status"].(map[string]any)
	if st == nil {
		st = map[string]any{}
	}
	have, _ := st["conditions"].([]any)
	seen := map[string]bool{}
	for _, c := range have {
		if m, ok := c.(map[string]any); ok {
			t, _ := m["type"].(string)
			seen[t] = true
		}
	}
	for _, c := range conds {
		if seen[c.Type] {
			continue
		}
		m := map[string]any{"type": c.Type, "status": string(c.Status), "reason": c.Reason, "message": c.Message}
		have = append(have, m)
	}
	if len(have) == 0 {
		return
	}
	st["conditions"] = have
	obj["status"] = st
}

// object reads the body as one native object of the path's kind, its
// namespace and name fitted to the path as the kube-apiserver does.
func (n *nativeCall) object() (map[string]any, error) {
	obj, err := n.bodyObject()
	if err != nil {
		return nil, err
	}
	return obj, n.fitNative(obj)
}

// fitNative checks obj's apiVersion and kind against the path, and fills
// or checks its namespace and name as fitPath does for purser's kinds.
func (n *nativeCall) fitNative(obj map[string]any) error {
	if templateGVK(obj) != n.res.gvk {
		return n.invalidNative(fmt.Sprintf("apiVersion and kind must be %s, %s on %s", n.res.apiVersion(), n.res.gvk.Kind, n.what()),
			[]FieldCause{{Field: "kind", Message: fmt.Sprintf("Invalid value: %v", obj["kind"])}})
	}
	md, _ := obj["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		obj["metadata"] = md
	}
	switch got, _ := md["namespace"].(string); {
	case got == "":
		md["namespace"] = n.ns
	case got != n.ns:
		return badRequest(fmt.Sprintf("the namespace of the provided object (%s) does not match the namespace sent on the request (%s)", got, n.ns))
	}
	name, _ := md["name"].(string)
	switch {
	case n.name == "" && name == "":
		return n.invalidNative("metadata.name is required: the object's runnable is named after it (generateName is not served for native objects)",
			[]FieldCause{{Field: "metadata.name", Message: "Required value"}})
	case n.name == "":
		n.name = name
	case name == "":
		md["name"] = n.name
	case name != n.name:
		return badRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", name, n.name))
	}
	return nil
}

func (n *nativeCall) invalidNative(msg string, causes []FieldCause) error {
	se := newStatus(http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, fmt.Sprintf("%s %q is invalid: %s", n.what(), n.name, msg))
	se.st.Details = &metav1.StatusDetails{Name: n.name, Group: n.res.gvk.Group, Kind: n.res.plural}
	for _, c := range causes {
		se.st.Details.Causes = append(se.st.Details.Causes, metav1.StatusCause{Type: metav1.CauseTypeFieldValueInvalid, Field: c.Field, Message: c.Message})
	}
	return se
}

// policyFor is the policy that selects obj now (refused, naming what is
// missing, when none does).
func (n *nativeCall) policyFor(obj map[string]any) (*native.Policy, error) {
	policies, err := n.a.cfg.Policies(n.req.r.Context(), n.ns)
	if err != nil {
		return nil, err
	}
	md, _ := obj["metadata"].(map[string]any)
	o := native.Object{GVK: n.res.gvk, Namespace: n.ns, Name: n.name, Labels: stringMap(md["labels"])}
	p, _ := native.Select(policies, o)
	if p == nil {
		why := native.Unselected(policies, o)
		return nil, n.invalidNative(why, []FieldCause{{Field: "metadata", Message: why}})
	}
	return p, nil
}

// holderOf is what obj becomes under p, JSON, and the kind that writes
// it: a runnable or a deployable, as p says.
func (n *nativeCall) holderOf(p *native.Policy, obj map[string]any) (*OwnKind, map[string]any, error) {
	k := n.a.ownKind("runnables")
	if p.Spec.Deployable != nil {
		k = n.a.ownKind("deployables")
	}
	if k == nil {
		return nil, nil, statusErr(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed, "this server writes no "+p.Ref()+" objects")
	}
	var v any
	if p.Spec.Deployable != nil {
		v = native.DeployableOf(p, obj)
	} else {
		v = native.RunnableOf(p, obj)
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, nil, err
	}
	return k, out, nil
}

func stringMap(v any) map[string]string {
	m, _ := v.(map[string]any)
	out := make(map[string]string, len(m))
	for k, x := range m {
		if s, ok := x.(string); ok {
			out[k] = s
		}
	}
	return out
}

// answer writes the native view of what the REST API of kind k answered.
func (n *nativeCall) answer(k *OwnKind, code int, body []byte) error {
	h := &held{k: k}
	if k.Kind == v1alpha1.KindDeployable {
		var d v1alpha1.Deployable
		if err := json.Unmarshal(body, &d); err != nil {
			return fmt.Errorf("the deployable as written: %w", err)
		}
		h.meta, h.template, h.deployable = d.Metadata, d.Spec.Template, &d
	} else {
		var r v1alpha1.Runnable
		if err := json.Unmarshal(body, &r); err != nil {
			return fmt.Errorf("the runnable as written: %w", err)
		}
		h.meta, h.template, h.runnable = r.Metadata, r.Spec.Template, &r
	}
	obj, err := n.view(h)
	if err != nil {
		return err
	}
	return writeJSON(n.w, code, obj)
}

// create makes what the object becomes; a name held by anything is
// AlreadyExists, a cancelled runnable's too (its object deleted through
// here), until that runnable is removed: its record is not someone's to
// lose by a create, and a name that never comes back to an earlier
// version keeps an approval of the one before from approving the next.
func (n *nativeCall) create() error {
	obj, err := n.object()
	if err != nil {
		return err
	}
	cur, taken, err := n.current()
	if err != nil {
		return err
	}
	if taken {
		return n.taken(cur)
	}
	return n.createAs(obj, func(o *ownCall) (func(), error) { return o.ownership(obj, nil) })
}

// taken refuses a create of a name something holds: cur, when it is of
// the native kind.
func (n *nativeCall) taken(cur *held) error {
	if cur != nil && cur.gone() {
		se := newStatus(http.StatusConflict, metav1.StatusReasonAlreadyExists, fmt.Sprintf(
			"%s %q was deleted, and its runnable %s/%s stays, Cancelled, until it is removed: delete the object once more (kubectl delete) to remove it, then create it again",
			n.what(), n.name, n.ns, n.name))
		se.st.Details = &metav1.StatusDetails{Name: n.name, Group: n.res.gvk.Group, Kind: n.res.plural}
		return se
	}
	return n.alreadyExistsNative()
}

// createAs creates what obj becomes under the policy that selects it,
// through the handlers of the kind the policy makes it, with the
// ownership record record adds to that write.
func (n *nativeCall) createAs(obj map[string]any, record func(*ownCall) (func(), error)) error {
	p, err := n.policyFor(obj)
	if err != nil {
		return err
	}
	k, body, err := n.holderOf(p, obj)
	if err != nil {
		return err
	}
	o := n.on(k)
	restore, err := record(o)
	if err != nil {
		return err
	}
	defer restore()
	raw, _ := json.Marshal(body)
	var code int
	var out []byte
	if o.k.Create != nil {
		code, out, err = o.call(o.k.Create, http.MethodPost, nil, raw)
	} else {
		// A deployable is put: PUT creates, and the name was found free.
		code, out, err = o.call(o.k.Update, http.MethodPut, nil, raw)
	}
	var se *statusError
	if errors.As(err, &se) && se.st.Code == http.StatusConflict {
		return n.alreadyExistsNative()
	}
	if err != nil {
		return err
	}
	if code == http.StatusOK && o.k.Create != nil {
		return n.alreadyExistsNative()
	}
	return n.answer(o.k, http.StatusCreated, out)
}

func (n *nativeCall) alreadyExistsNative() error {
	se := newStatus(http.StatusConflict, metav1.StatusReasonAlreadyExists, fmt.Sprintf("%s %q already exists", n.what(), n.name))
	se.st.Details = &metav1.StatusDetails{Name: n.name, Group: n.res.gvk.Group, Kind: n.res.plural}
	return se
}

// update replaces the object: what holds it is written through its
// kind's PUT, which changes it in place or refuses with the reason,
// exactly as a PUT of it does. Its version is the object's
// (metadata.resourceVersion; the current one when unset).
func (n *nativeCall) update() error {
	obj, err := n.object()
	if err != nil {
		return err
	}
	h, was, err := n.heldAsRead()
	if err != nil {
		return err
	}
	o := n.on(h.k)
	restore, err := o.ownership(obj, was)
	if err != nil {
		return err
	}
	defer restore()
	return n.replaceAs(o, obj, h)
}

// heldAsRead is what holds the object and the object as a write starts
// from; unheld when nothing does.
func (n *nativeCall) heldAsRead() (*held, []byte, error) {
	h, err := n.held()
	if err != nil {
		return nil, nil, err
	}
	if h == nil {
		return nil, nil, n.unheld()
	}
	was, err := n.asRead(h)
	return h, was, err
}

// asRead is the object h holds as a write starts from: purser's view of
// it without the copy's status and purser's annotations, JSON.
func (n *nativeCall) asRead(h *held) ([]byte, error) {
	view, err := n.view(h)
	if err != nil {
		return nil, err
	}
	delete(view, "status")
	if md, ok := view["metadata"].(map[string]any); ok {
		if ann, ok := md["annotations"].(map[string]any); ok {
			for _, k := range native.ViewAnnotations {
				delete(ann, k)
			}
			if len(ann) == 0 {
				delete(md, "annotations")
			}
		}
	}
	return json.Marshal(view)
}

// replaceAs writes what obj becomes through o, the kind that holds it as
// h: a runnable stays a runnable and a deployable a deployable (a policy
// that would now make it the other is refused with the reason).
func (n *nativeCall) replaceAs(o *ownCall, obj map[string]any, h *held) error {
	p, err := n.policyFor(obj)
	if err != nil {
		return err
	}
	k, body, err := n.holderOf(p, obj)
	if err != nil {
		return err
	}
	if k != h.k {
		why := fmt.Sprintf("%s would make it a %s, but it is a %s: delete the object and create it again to change what it is",
			p.Ref(), strings.ToLower(k.Kind), strings.ToLower(h.k.Kind))
		return n.invalidNative(why, []FieldCause{{Field: "metadata", Message: why}})
	}
	md, _ := obj["metadata"].(map[string]any)
	rv, _ := md["resourceVersion"].(string)
	if rv == "" {
		rv = h.meta.ResourceVersion
	}
	body["metadata"].(map[string]any)["resourceVersion"] = rv
	raw, _ := json.Marshal(body)
	_, out, err := o.call(o.k.Update, http.MethodPut, nil, raw)
	if err != nil {
		return err
	}
	return n.answer(o.k, http.StatusOK, out)
}

// patch applies a JSON merge patch or a JSON patch to the object as read
// back, then replaces it, optimistic on what was read. kubectl apply
// sends a merge patch for a custom resource; a strategic merge patch
// (kubectl's for the kinds it has built in) is refused with a pointer to
// --server-side or --type=merge.
func (n *nativeCall) patch() error {
	mt, _, _ := mime.ParseMediaType(n.req.r.Header.Get("Content-Type"))
	var typed runtime.Object
	switch mt {
	case applyPatch:
		return applyTo(n, n.req.r, n.body)
	case strategicPatch:
		// By the Go type of a built-in kind, whose fields say how their
		// lists merge (what kubectl apply sends for a Job or a
		// ConfigMap); a custom resource has none, and the kube-apiserver
		// refuses it there too.
		var err error
		if typed, err = clientscheme.Scheme.New(n.res.gvk); err != nil {
			return statusErr(http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType,
				"a strategic merge patch is not served for "+n.what()+", a custom resource: use a merge or JSON patch (kubectl patch --type=merge), or kubectl apply --server-side")
		}
	}
	pd, err := decodePatch(mt, n.body, typed)
	if err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		h, was, err := n.heldAsRead()
		if err != nil {
			return err
		}
		obj, err := pd.applyTo(was, n.what()+" "+strconvQuote(n.name))
		if err != nil {
			return err
		}
		if err := n.fitNative(obj); err != nil {
			return err
		}
		o := n.on(h.k)
		restore, err := o.ownership(obj, was)
		if err != nil {
			return err
		}
		err = n.replaceAs(o, obj, h)
		restore()
		if pd.again(err, attempt) {
			continue
		}
		return err
	}
}

// delete cancels the object's runnable (its copy is removed from its
// cluster; a runnable that ended is removed), or deletes its deployable
// (removed from every cluster); the object reads as gone from then on.
// Deleted once more, a cancelled runnable is removed, which frees the
// name.
func (n *nativeCall) delete() error {
	if err := n.deleteOptions(n.what()); err != nil {
		return err
	}
	h, _, err := n.current()
	if err != nil {
		return err
	}
	if h == nil {
		return n.unheld()
	}
	if _, _, err := n.on(h.k).call(h.k.Delete, http.MethodDelete, nil, nil); err != nil {
		return err
	}
	return writeJSON(n.w, http.StatusOK, metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess,
		Details: &metav1.StatusDetails{Name: n.name, Group: n.res.gvk.Group, Kind: n.res.plural, UID: types.UID(h.meta.UID)}})
}

// Server-side apply of a native object (applyTarget): applied to the
// object as read back, with the ownership record kept under the native
// kind and the runnable's uid; the result is written as a create or a
// PUT of the object would be.

func (n *nativeCall) served() error {
	if n.a.cfg.InTx == nil {
		return statusErr(http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType, "server-side apply is not served for "+n.what())
	}
	return nil
}

func (n *nativeCall) fieldManager() (*managedfields.FieldManager, error) {
	return n.a.nativeFieldManager(n.res.gvk)
}

func (n *nativeCall) fit(obj map[string]any) error { return n.fitNative(obj) }

func (n *nativeCall) describe() string { return fmt.Sprintf("%s %q", n.what(), n.name) }

func (n *nativeCall) invalid(msg string, causes []FieldCause) error {
	return n.invalidNative(msg, causes)
}

func (n *nativeCall) live(ctx context.Context) (*unstructured.Unstructured, bool, error) {
	h, err := n.held()
	if err != nil {
		return nil, false, err
	}
	live := &unstructured.Unstructured{}
	if h == nil {
		live.SetGroupVersionKind(n.res.gvk)
		live.SetName(n.name)
		live.SetNamespace(n.ns)
		return live, false, nil
	}
	was, err := n.asRead(h)
	if err != nil {
		return nil, false, err
	}
	if err := json.Unmarshal(was, &live.Object); err != nil {
		return nil, false, err
	}
	entries, err := n.on(h.k).readManaged(ctx, h.meta.UID)
	if err != nil {
		return nil, false, err
	}
	live.SetManagedFields(entries)
	return live, true, nil
}

func (n *nativeCall) write(obj map[string]any, exists bool, entries []metav1.ManagedFieldsEntry) error {
	cur, taken, err := n.current()
	if err != nil {
		return err
	}
	if exists != (cur != nil && !cur.gone()) {
		// Created or removed between the read and the write: apply again.
		return statusErr(http.StatusConflict, metav1.StatusReasonConflict, fmt.Sprintf("%s %q changed while it was applied", n.what(), n.name))
	}
	if !exists && taken {
		return n.taken(cur)
	}
	if exists {
		o := n.on(cur.k)
		restore, err := o.storeWith(entries)
		if err != nil {
			return err
		}
		defer restore()
		return n.replaceAs(o, obj, cur)
	}
	return n.createAs(obj, func(o *ownCall) (func(), error) { return o.storeWith(entries) })
}

// nativeFieldManager is the field manager of a native kind: its schema is
// deduced from the objects (every field kept, lists atomic), as the
// kube-apiserver's for a custom resource that preserves unknown fields.
func (a *API) nativeFieldManager(gvk schema.GroupVersionKind) (*managedfields.FieldManager, error) {
	if fm, ok := a.nativeManagers.Load(gvk); ok {
		return fm.(*managedfields.FieldManager), nil
	}
	fm, err := managedfields.NewDefaultCRDFieldManager(managedfields.NewDeducedTypeConverter(), sameVersion{}, sameVersion{}, sameVersion{},
		gvk, gvk.GroupVersion(), "", nil)
	if err != nil {
		return nil, err
	}
	got, _ := a.nativeManagers.LoadOrStore(gvk, fm)
	return got.(*managedfields.FieldManager), nil
}
