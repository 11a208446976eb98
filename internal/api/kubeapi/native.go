package kubeapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"

	jsonpatch "github.com/evanphx/json-patch/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/native"
)

// Native objects written to /k8s. A FlinkDeployment applied with kubectl
// to purser (POST, PUT, a merge or JSON patch, DELETE in a namespace of
// the farm-wide /k8s) is not stored as itself: the placement policy that
// selects it (internal/domain/native) makes it a runnable named after it,
// the object as its template, and that runnable is written through the
// runnables' own handlers (the Runnable kind of Own), so that the write is
// authorized, admitted, approved and audited as the writer's POST or PUT
// of that runnable would be. Read back by name, the object is the
// runnable's template with the runnable's identity and version, purser's
// view of it as annotations, and the live copy's status, read from the
// inventory of the cluster it runs on. Lists and watches of the kind stay
// the inventory's: the live copies on the member clusters.

// Annotations of a native object read back from its runnable (among
// native.ViewAnnotations, which a write drops from the template).
const (
	// RunnableAnnotation names the runnable the object is.
	RunnableAnnotation = "purser.io/runnable"
	// PhaseAnnotation and AttemptAnnotation are the runnable's phase and
	// attempt count; ClusterAnnotation names its current cluster.
	PhaseAnnotation   = "purser.io/phase"
	AttemptAnnotation = "purser.io/attempt"
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

// current is the runnable of the path's name as the writer reads it, when
// it holds an object of the native kind (a Cancelled one included: its
// object is gone); nil when there is none.
func (n *nativeCall) current() (*v1alpha1.Runnable, error) {
	_, body, err := n.call(n.k.Get, http.MethodGet, nil, nil)
	var se *statusError
	if errors.As(err, &se) && se.st.Code == http.StatusNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r v1alpha1.Runnable
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("the runnable as read: %w", err)
	}
	if templateGVK(r.Spec.Template) != n.res.gvk {
		return nil, nil
	}
	return &r, nil
}

func templateGVK(t map[string]any) schema.GroupVersionKind {
	apiVersion, _ := t["apiVersion"].(string)
	kind, _ := t["kind"].(string)
	gv, _ := schema.ParseGroupVersion(apiVersion)
	return gv.WithKind(kind)
}

// unheld refuses a change of an object no live runnable holds: what the
// inventory shows of the member clusters is read-only here.
func (n *nativeCall) unheld() error {
	n.w.Header().Set("Allow", "GET, HEAD, POST")
	return statusErr(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed,
		fmt.Sprintf("%s %q is held by no runnable of namespace %s: what the inventory shows of the member clusters is read-only through /k8s; "+
			"create the object here (a placement policy makes it a runnable), or change what runs through purser's API, /api/v1", n.what(), n.name, n.ns))
}

// get answers the object a live runnable holds; a name no runnable of the
// kind holds (or one cancelled, whose object was deleted) is the
// inventory's to answer.
func (n *nativeCall) get() (bool, error) {
	if n.k.MayRead != nil && n.k.MayRead(n.req.user, n.ns) != nil {
		return false, nil // the inventory's read refuses in its own words
	}
	r, err := n.current()
	if err != nil || r == nil || r.Status.Phase == v1alpha1.PhaseCancelled {
		return false, err
	}
	if asTable(n.req.r) != "" {
		return false, nil // kubectl get's table: the live copy's columns
	}
	obj, err := n.view(r)
	if err != nil {
		return true, err
	}
	entries, err := n.readManaged(n.req.r.Context(), r.Metadata.UID)
	if err != nil {
		return true, err
	}
	if len(entries) > 0 {
		u := unstructured.Unstructured{Object: obj}
		u.SetManagedFields(entries)
	}
	return true, writeJSON(n.w, http.StatusOK, obj)
}

// view is the native object runnable r holds: its template, with r's
// identity and version, purser's view as annotations, and the live copy's
// status.
func (n *nativeCall) view(r *v1alpha1.Runnable) (map[string]any, error) {
	raw, err := json.Marshal(r.Spec.Template)
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
	md["name"], md["namespace"] = r.Metadata.Name, r.Metadata.Namespace
	md["uid"], md["resourceVersion"] = r.Metadata.UID, r.Metadata.ResourceVersion
	md["creationTimestamp"] = r.Metadata.CreationTimestamp.UTC().Format("2006-01-02T15:04:05Z")
	ann, _ := md["annotations"].(map[string]any)
	if ann == nil {
		ann = map[string]any{}
	}
	ann[RunnableAnnotation] = r.Metadata.Namespace + "/" + r.Metadata.Name
	ann[PhaseAnnotation] = string(r.Status.Phase)
	ann[AttemptAnnotation] = strconv.Itoa(r.Status.AttemptCount)
	if r.Status.Cluster != "" {
		ann[ClusterAnnotation] = r.Status.Cluster
	}
	if p := r.Metadata.Annotations[native.AnnotationPolicy]; p != "" {
		ann[native.AnnotationPolicy] = p
	}
	md["annotations"] = ann
	if r.Status.Cluster != "" {
		q := sel{res: n.res, cluster: r.Status.Cluster, namespace: r.Metadata.Namespace, name: r.Metadata.Name}
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
	return obj, nil
}

// object reads the body as one native object of the path's kind, its
// namespace and name fitted to the path as the kube-apiserver does.
func (n *nativeCall) object() (map[string]any, error) {
	b, err := n.readBody()
	if err != nil {
		return nil, err
	}
	ct := n.req.r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || (mt != "application/json" && mt != "application/yaml") {
		return nil, statusErr(http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType,
			fmt.Sprintf("the body's media type %q is not served: send application/json or application/yaml", ct))
	}
	js, err := v1alpha1.BoundedJSON(b, ct)
	var de *v1alpha1.DecodeError
	switch {
	case errors.As(err, &de) && de.TooLarge:
		return nil, statusErr(http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge, de.Error())
	case err != nil:
		return nil, badRequest("the request body is malformed: " + err.Error())
	}
	var obj map[string]any
	if err := json.Unmarshal(js, &obj); err != nil || obj == nil {
		return nil, badRequest("the request body is not a JSON object")
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

// runnableFor is the runnable obj becomes: the policy that selects it now
// (refused, naming what is missing, when none does).
func (n *nativeCall) runnableFor(obj map[string]any) (*v1alpha1.Runnable, error) {
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
	return native.RunnableOf(p, obj), nil
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

// answer writes the native view of the runnable the REST API answered.
func (n *nativeCall) answer(code int, body []byte) error {
	var r v1alpha1.Runnable
	if err := json.Unmarshal(body, &r); err != nil {
		return fmt.Errorf("the runnable as written: %w", err)
	}
	obj, err := n.view(&r)
	if err != nil {
		return err
	}
	return writeJSON(n.w, code, obj)
}

// create makes the object's runnable. A cancelled runnable of the same
// name (its object deleted through here) is removed first, as a deleted
// object's name is free again; one that lives is AlreadyExists.
func (n *nativeCall) create() error {
	obj, err := n.object()
	if err != nil {
		return err
	}
	cur, err := n.current()
	if err != nil {
		return err
	}
	if cur != nil && cur.Status.Phase != v1alpha1.PhaseCancelled {
		return n.alreadyExistsNative()
	}
	restore, err := n.ownership(obj, nil)
	if err != nil {
		return err
	}
	defer restore()
	return n.createObj(obj, cur)
}

// createObj creates the runnable of obj, removing cur first (a cancelled
// runnable of the name, or nil).
func (n *nativeCall) createObj(obj map[string]any, cur *v1alpha1.Runnable) error {
	run, err := n.runnableFor(obj)
	if err != nil {
		return err
	}
	if cur != nil {
		if _, _, err := n.callWithout(n.k.Delete, http.MethodDelete); err != nil {
			return err
		}
	}
	body, _ := json.Marshal(run)
	code, out, err := n.call(n.k.Create, http.MethodPost, nil, body)
	var se *statusError
	if errors.As(err, &se) && se.st.Code == http.StatusConflict {
		return n.alreadyExistsNative()
	}
	if err != nil {
		return err
	}
	if code == http.StatusOK {
		return n.alreadyExistsNative()
	}
	return n.answer(http.StatusCreated, out)
}

func (n *nativeCall) alreadyExistsNative() error {
	se := newStatus(http.StatusConflict, metav1.StatusReasonAlreadyExists, fmt.Sprintf("%s %q already exists", n.what(), n.name))
	se.st.Details = &metav1.StatusDetails{Name: n.name, Group: n.res.gvk.Group, Kind: n.res.plural}
	return se
}

// update replaces the object: its runnable is written through the
// runnables' PUT, which changes it in place or refuses with the reason,
// exactly as a PUT of the runnable does. The runnable's version is the
// object's (metadata.resourceVersion; the current one when unset).
func (n *nativeCall) update() error {
	obj, err := n.object()
	if err != nil {
		return err
	}
	cur, err := n.current()
	if err != nil {
		return err
	}
	if cur == nil || cur.Status.Phase == v1alpha1.PhaseCancelled {
		return n.unheld()
	}
	was, err := n.asRead(cur)
	if err != nil {
		return err
	}
	restore, err := n.ownership(obj, was)
	if err != nil {
		return err
	}
	defer restore()
	return n.replaceNative(obj, cur)
}

// asRead is the object runnable r holds as a write starts from: purser's
// view of it without the copy's status, JSON.
func (n *nativeCall) asRead(r *v1alpha1.Runnable) ([]byte, error) {
	view, err := n.view(r)
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

func (n *nativeCall) replaceNative(obj map[string]any, cur *v1alpha1.Runnable) error {
	run, err := n.runnableFor(obj)
	if err != nil {
		return err
	}
	md, _ := obj["metadata"].(map[string]any)
	run.Metadata.ResourceVersion, _ = md["resourceVersion"].(string)
	if run.Metadata.ResourceVersion == "" {
		run.Metadata.ResourceVersion = cur.Metadata.ResourceVersion
	}
	body, _ := json.Marshal(run)
	_, out, err := n.call(n.k.Update, http.MethodPut, nil, body)
	if err != nil {
		return err
	}
	return n.answer(http.StatusOK, out)
}

// patch applies a JSON merge patch or a JSON patch to the object as read
// back, then replaces it, optimistic on what was read. kubectl apply
// sends a merge patch for a custom resource; a strategic merge patch
// (kubectl's for the kinds it has built in) is refused with a pointer to
// --server-side or --type=merge.
func (n *nativeCall) patch() error {
	mt, _, _ := mime.ParseMediaType(n.req.r.Header.Get("Content-Type"))
	switch mt {
	case mergePatch, jsonPatch:
	case applyPatch:
		return applyTo(n, n.req.r, n.body)
	case strategicPatch:
		return statusErr(http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType,
			"a strategic merge patch is not served for native objects written to purser ("+n.what()+"): use a merge or JSON patch (kubectl patch --type=merge), or kubectl apply --server-side")
	default:
		return statusErr(http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType,
			fmt.Sprintf("the patch's media type %q is not served: %s or %s", mt, mergePatch, jsonPatch))
	}
	p, err := n.readBody()
	if err != nil {
		return err
	}
	var decoded jsonpatch.Patch
	if mt == jsonPatch {
		if decoded, err = jsonpatch.DecodePatch(p); err != nil {
			return badRequest("the JSON patch cannot be read: " + err.Error())
		}
		if len(decoded) > maxPatchOperations {
			return statusErr(http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge,
				fmt.Sprintf("the JSON patch has %d operations, more than the %d served", len(decoded), maxPatchOperations))
		}
	} else if !json.Valid(p) {
		return badRequest("the merge patch is not JSON")
	}
	for attempt := 1; ; attempt++ {
		cur, err := n.current()
		if err != nil {
			return err
		}
		if cur == nil || cur.Status.Phase == v1alpha1.PhaseCancelled {
			return n.unheld()
		}
		was, err := n.asRead(cur)
		if err != nil {
			return err
		}
		var next []byte
		if mt == jsonPatch {
			next, err = decoded.ApplyWithOptions(was, &jsonpatch.ApplyOptions{SupportNegativeIndices: true, AccumulatedCopySizeLimit: MaxBodyBytes})
		} else {
			next, err = jsonpatch.MergePatch(was, p)
		}
		if err != nil {
			return statusErr(http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, "the patch does not apply to "+n.what()+" "+strconvQuote(n.name)+": "+err.Error())
		}
		if len(next) > MaxBodyBytes {
			return statusErr(http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge,
				fmt.Sprintf("the patched object is larger than %d bytes", MaxBodyBytes))
		}
		var obj map[string]any
		if err := json.Unmarshal(next, &obj); err != nil || obj == nil {
			return statusErr(http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, "the patch leaves no object")
		}
		if err := n.fitNative(obj); err != nil {
			return err
		}
		restore, err := n.ownership(obj, was)
		if err != nil {
			return err
		}
		err = n.replaceNative(obj, cur)
		restore()
		var se *statusError
		if errors.As(err, &se) && se.st.Code == http.StatusConflict && se.st.Reason == metav1.StatusReasonConflict && !patchNamesVersion(p, mt) && attempt < maxPatchRetries {
			continue
		}
		return err
	}
}

// delete cancels the object's runnable (its copy is removed from its
// cluster), or removes one that ended; the object reads as gone from
// then on.
func (n *nativeCall) delete() error {
	cur, err := n.current()
	if err != nil {
		return err
	}
	if cur == nil || cur.Status.Phase == v1alpha1.PhaseCancelled {
		return n.unheld()
	}
	if _, _, err := n.call(n.k.Delete, http.MethodDelete, nil, nil); err != nil {
		return err
	}
	return writeJSON(n.w, http.StatusOK, metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess,
		Details: &metav1.StatusDetails{Name: n.name, Group: n.res.gvk.Group, Kind: n.res.plural, UID: types.UID(cur.Metadata.UID)}})
}

// callWithout calls h with no body and without the ownership step of the
// write under way: the removal of a cancelled runnable before its name is
// taken again is not that write.
func (n *nativeCall) callWithout(h Handler, method string) (int, []byte, error) {
	src := n.req.r
	if n.a.cfg.InTx != nil {
		n.req.r = src.WithContext(n.a.cfg.InTx(src.Context(), nil))
	}
	defer func() { n.req.r = src }()
	return n.call(h, method, nil, nil)
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
	cur, err := n.current()
	if err != nil {
		return nil, false, err
	}
	live := &unstructured.Unstructured{}
	if cur == nil || cur.Status.Phase == v1alpha1.PhaseCancelled {
		live.SetGroupVersionKind(n.res.gvk)
		live.SetName(n.name)
		live.SetNamespace(n.ns)
		return live, false, nil
	}
	was, err := n.asRead(cur)
	if err != nil {
		return nil, false, err
	}
	if err := json.Unmarshal(was, &live.Object); err != nil {
		return nil, false, err
	}
	entries, err := n.readManaged(ctx, cur.Metadata.UID)
	if err != nil {
		return nil, false, err
	}
	live.SetManagedFields(entries)
	return live, true, nil
}

func (n *nativeCall) write(obj map[string]any, exists bool, entries []metav1.ManagedFieldsEntry) error {
	cur, err := n.current()
	if err != nil {
		return err
	}
	if exists != (cur != nil && cur.Status.Phase != v1alpha1.PhaseCancelled) {
		// Created or removed between the read and the write: apply again.
		return statusErr(http.StatusConflict, metav1.StatusReasonConflict, fmt.Sprintf("%s %q changed while it was applied", n.what(), n.name))
	}
	restore, err := n.storeWith(entries)
	if err != nil {
		return err
	}
	defer restore()
	if !exists {
		return n.createObj(obj, cur)
	}
	return n.replaceNative(obj, cur)
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
