package kubeapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"

	jsonpatch "github.com/evanphx/json-patch/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/policy"
)

// OwnGroup is the group of purser's own kinds (Runnable, Deployable,
// Quota, Cluster), which /k8s serves for reading and writing.
const (
	OwnGroup   = "purser.io"
	OwnVersion = "v1alpha1"
)

// Handler is one of the REST API's handlers (internal/api/server), called
// by /k8s for a request on one of purser's kinds: the request carries the
// path's namespace and name as path values ("namespace", "name") and the
// object as its JSON body; the answer is the REST API's (status, object,
// error). A write through /k8s runs through it, so that it is authorized,
// admitted, audited, bounded and approved exactly as the same write
// through /api/v1 is.
type Handler func(r *http.Request, u policy.User) (int, any, error)

// OwnKind is one of purser's kinds served under purser.io/v1alpha1, by
// the REST API's handlers. A nil handler is a verb not served.
type OwnKind struct {
	Kind, Plural, Singular string
	ShortNames             []string
	// Object is a value of the kind's Go type, which its OpenAPI schema
	// describes (openapi.go); Description is what kubectl explain says
	// of the kind.
	Object      any
	Description string
	// Namespaced: the path's namespace is the "namespace" path value.
	// A cluster-scoped kind's name is the "name" path value, and also the
	// "namespace" one (a Quota is named after its namespace).
	Namespaced bool
	Get, List  Handler
	// Create answers 200, not 201 or 202, when the object existed: it is
	// refused as AlreadyExists. Nil: Update creates (PUT creates or
	// replaces), and a create first makes sure there is nothing there.
	Create Handler
	// Update replaces the object; it is optimistic when the body carries
	// metadata.resourceVersion.
	Update Handler
	Delete Handler
	// NeedsResourceVersion: Update refuses a body without
	// metadata.resourceVersion (428); a PUT through /k8s without one
	// replaces whatever is there, as the kube-apiserver's does, and
	// takes the version of the object's last read.
	NeedsResourceVersion bool
	// Columns are what kubectl get prints between NAME and AGE.
	Columns []OwnColumn
	// Identity names an object for its server-side apply record; nil:
	// server-side apply is not served for the kind.
	Identity Identity
	// MayWrite refuses a user who may not write the kind in the
	// namespace (a cluster-scoped kind: its name) before anything of the
	// write is computed, as the kube-apiserver authorizes before it
	// admits: a patch or an apply of someone else's object would
	// otherwise answer with what it found there (a field's owner, the
	// schema's complaint) before the handler's own check refuses it.
	// The handler checks again. Nil: the handler alone checks.
	MayWrite func(u policy.User, namespace string) error
	// MayRead refuses a user who may not read the kind in the namespace
	// (a cluster-scoped kind: its name): a watch tells a deletion, whose
	// object can no longer be read through Get, only to one it lets.
	// Nil: the kind has no change sequence, and is not watched.
	MayRead func(u policy.User, namespace string) error
}

func (k *OwnKind) verbs() []string {
	var out []string
	for _, v := range []struct {
		verb string
		h    Handler
	}{{"create", k.Update}, {"delete", k.Delete}, {"get", k.Get}, {"list", k.List}, {"patch", k.Update}, {"update", k.Update}} {
		if v.h != nil {
			out = append(out, v.verb)
		}
	}
	if k.MayRead != nil {
		out = append(out, "watch")
	}
	return out
}

func (k *OwnKind) resource() *resource {
	return &resource{gvk: schema.GroupVersionKind{Group: OwnGroup, Version: OwnVersion, Kind: k.Kind},
		plural: k.Plural, singular: k.Singular, shortNames: k.ShortNames, namespaced: k.Namespaced, own: k}
}

// Failure is a refusal of the REST API as /k8s answers it: the REST
// API's classification (code, reason, message, the fields it names), in
// a metav1.Status.
type Failure struct {
	Code    int
	Reason  string
	Message string
	Fields  []FieldCause
	// RetryAfter is the Retry-After header's value, "" for none.
	RetryAfter string
}

// FieldCause is one field a refusal names.
type FieldCause struct{ Field, Message string }

// writeVerbs are the verbs of a write of purser's kinds.
var writeVerbs = []string{"create", "delete", "patch", "update"}

// MaxBodyBytes bounds a write's body, as the REST API bounds its own.
const MaxBodyBytes = 1 << 20

// maxPatchRetries is how often a patch is applied again to a fresh read
// when the object moved between its read and its write, as the
// kube-apiserver retries a patch that names no resourceVersion.
const maxPatchRetries = 3

// ownKind finds one of purser's kinds by its plural.
func (a *API) ownKind(plural string) *OwnKind {
	for i := range a.cfg.Own {
		if a.cfg.Own[i].Plural == plural {
			return &a.cfg.Own[i]
		}
	}
	return nil
}

// serveOwn serves what follows purser.io/v1alpha1: [namespaces/NS/]PLURAL[/NAME].
// Purser's kinds are the farm's, not any one cluster's: under
// /k8s/clusters/{cluster} they are not served.
func (a *API) serveOwn(w http.ResponseWriter, req *request, p []string) error {
	ns := ""
	if len(p) >= 3 && p[0] == "namespaces" {
		ns, p = p[1], p[2:]
	}
	if len(p) == 0 || len(p) > 2 || req.cluster != "" {
		return notFound(req)
	}
	k := a.ownKind(p[0])
	if k == nil {
		return statusErr(http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource ("+p[0]+"."+OwnGroup+")")
	}
	if ns != "" && !k.Namespaced {
		return notFound(req)
	}
	o := &ownCall{a: a, w: w, req: req, k: k, ns: ns}
	if len(p) == 2 {
		o.name = p[1]
	}
	r := req.r
	if isTrue(r.URL.Query().Get("watch")) {
		if r.Method != http.MethodGet {
			return badRequest("a watch is a GET")
		}
		return o.watch()
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead && k.MayWrite != nil {
		// Refused before the body is read: the connection closes after
		// the answer, so that a body trickled in holds nothing.
		if err := k.MayWrite(req.user, nsOrName(k, ns, o.name)); err != nil {
			w.Header().Set("Connection", "close")
			return o.refusal(err)
		}
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if err := o.readWhole(); err != nil {
			return err
		}
	}
	if err := o.dryRun(); err != nil {
		return err
	}
	switch {
	case r.Method == http.MethodGet && o.name == "":
		return o.list()
	case r.Method == http.MethodGet:
		return o.get()
	case r.Method == http.MethodPost && o.name == "":
		return o.create()
	case r.Method == http.MethodPut && o.name != "":
		return o.update()
	case r.Method == http.MethodPatch && o.name != "":
		return o.patch()
	case r.Method == http.MethodDelete && o.name != "":
		return o.delete()
	}
	w.Header().Set("Allow", "GET, POST, PUT, PATCH, DELETE")
	return statusErr(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed,
		fmt.Sprintf("%s is not served on %s", r.Method, r.URL.Path))
}

// ownCall is one request on one of purser's kinds.
type ownCall struct {
	a        *API
	w        http.ResponseWriter
	req      *request
	k        *OwnKind
	ns, name string
	// body is the request's, read whole (bounded) before anything else.
	body []byte
	// native is the native kind written through the runnables' handlers
	// (native.go); nil for a call on purser's kind k.
	native *resource
}

// readWhole reads the request's body whole, bounded, before any other
// answer: what is refused from there on is answered on a connection that
// stays usable.
func (o *ownCall) readWhole() error {
	b, err := io.ReadAll(http.MaxBytesReader(o.w, o.req.r.Body, MaxBodyBytes))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return statusErr(http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge,
			fmt.Sprintf("the request body is larger than %d bytes", MaxBodyBytes))
	}
	if err != nil {
		return badRequest("reading the request body: " + err.Error())
	}
	o.body = b
	return nil
}

// dryRun accepts dryRun=All, which the REST API's transactions honour by
// rolling back (DryRun), and refuses any other value as the
// kube-apiserver does.
func (o *ownCall) dryRun() error {
	for _, v := range o.req.r.URL.Query()["dryRun"] {
		if v != metav1.DryRunAll {
			return o.invalid(fmt.Sprintf("Invalid dry run value %q: the only value is %q", v, metav1.DryRunAll),
				[]FieldCause{{Field: "dryRun", Message: "Unsupported value: " + strconvQuote(v) + ": supported values: \"All\""}})
		}
	}
	return nil
}

func (o *ownCall) isDryRun() bool { return len(o.req.r.URL.Query()["dryRun"]) > 0 }

func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

// call runs h on a request of the REST shape: the path's namespace and
// name as path values, query the REST query, body the JSON object.
func (o *ownCall) call(h Handler, method string, query url.Values, body []byte) (int, []byte, error) {
	src := o.req.r
	r := src.Clone(src.Context())
	r.Method = method
	r.URL = &url.URL{Path: src.URL.Path, RawQuery: query.Encode()}
	r.Body, r.ContentLength = http.NoBody, 0
	r.Header.Del("Content-Type")
	if body != nil {
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		r.Header.Set("Content-Type", "application/json")
	}
	if o.k.Namespaced {
		r.SetPathValue("namespace", o.ns)
	} else {
		r.SetPathValue("namespace", o.name)
	}
	r.SetPathValue("name", o.name)
	if o.isDryRun() && o.a.cfg.DryRun != nil {
		r = r.WithContext(o.a.cfg.DryRun(r.Context()))
	}
	code, out, err := h(r, o.req.user)
	if err != nil {
		return 0, nil, o.refusal(err)
	}
	b, err := json.Marshal(out)
	return code, b, err
}

// refusal turns the REST API's error into a Status: its code and
// message, the reason in the kube-apiserver's words, the fields as
// causes, and the object it is about in details, as kubectl prints it.
func (o *ownCall) refusal(err error) error {
	if o.a.cfg.Failure == nil {
		return err
	}
	f := o.a.cfg.Failure(err)
	if f.RetryAfter != "" {
		o.w.Header().Set("Retry-After", f.RetryAfter)
	}
	se := newStatus(f.Code, metav1.StatusReason(f.Reason), f.Message)
	se.st.Details = &metav1.StatusDetails{Name: o.name, Group: OwnGroup, Kind: o.k.Plural}
	for _, c := range f.Fields {
		se.st.Details.Causes = append(se.st.Details.Causes, metav1.StatusCause{Type: metav1.CauseTypeFieldValueInvalid, Field: c.Field, Message: c.Message})
	}
	switch f.Code {
	case http.StatusUnprocessableEntity:
		se.st.Reason = metav1.StatusReasonInvalid
		se.st.Message = fmt.Sprintf("%s.%s %q is invalid: %s", o.k.Kind, OwnGroup, o.name, f.Message)
	case http.StatusForbidden:
		se.st.Reason = metav1.StatusReasonForbidden
		se.st.Message = fmt.Sprintf("%s.%s %q is forbidden: %s", o.k.Plural, OwnGroup, o.name, f.Message)
	case http.StatusNotFound:
		se.st.Reason = metav1.StatusReasonNotFound
		se.st.Message = fmt.Sprintf("%s.%s %q not found: %s", o.k.Plural, OwnGroup, o.name, f.Message)
	case http.StatusConflict:
		se.st.Reason = metav1.StatusReasonConflict
		se.st.Message = fmt.Sprintf("Operation cannot be fulfilled on %s.%s %q: %s", o.k.Plural, OwnGroup, o.name, f.Message)
	case http.StatusPreconditionRequired:
		se.st.Reason = metav1.StatusReasonConflict
	}
	return se
}

func (o *ownCall) invalid(msg string, causes []FieldCause) error {
	return o.refusal(&failureError{Failure{Code: http.StatusUnprocessableEntity, Reason: string(metav1.StatusReasonInvalid), Message: msg, Fields: causes}})
}

// failureError is a refusal made here, classified already.
type failureError struct{ f Failure }

func (e *failureError) Error() string { return e.f.Message }

// AsFailure says whether err is a refusal made by /k8s itself, for the
// Failure function to pass through.
func AsFailure(err error) (Failure, bool) {
	var fe *failureError
	if errors.As(err, &fe) {
		return fe.f, true
	}
	return Failure{}, false
}

func (o *ownCall) list() error {
	q := url.Values{}
	if o.k.Namespaced {
		q.Set("namespace", o.ns)
	}
	if v := o.req.r.URL.Query().Get("limit"); v != "" {
		q.Set("limit", v)
	}
	if v := o.req.r.URL.Query().Get("continue"); v != "" {
		q.Set("continue", v)
	}
	// Selectors are applied to each page the REST API answers: a page
	// may hold fewer items than the limit, and the continue token goes on
	// from where the REST API's page ended, as a kube-apiserver's does.
	var sq sel
	if err := parseSelectors(o.req.r, &sq); err != nil {
		return err
	}
	lm := metav1.ListMeta{}
	if o.a.watchable(o.k) {
		h, err := o.a.ownHead(o.req.r)
		if err != nil {
			return err
		}
		lm.ResourceVersion = strconv.FormatInt(h.Seq, 10)
	}
	_, body, err := o.call(o.k.List, http.MethodGet, q, nil)
	if err != nil {
		return err
	}
	var page struct {
		Items    []json.RawMessage `json:"items"`
		Continue string            `json:"continue"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		return fmt.Errorf("list %s: %w", o.k.Plural, err)
	}
	if sq.labels != nil || sq.fields != nil || sq.none {
		kept := page.Items[:0]
		for _, raw := range page.Items {
			var m struct {
				Metadata struct {
					Name      string            `json:"name"`
					Namespace string            `json:"namespace"`
					Labels    map[string]string `json:"labels"`
				} `json:"metadata"`
			}
			if err := json.Unmarshal(raw, &m); err != nil {
				return fmt.Errorf("a %s as listed: %w", o.k.Kind, err)
			}
			md := m.Metadata
			if sq.none || (sq.labels != nil && !sq.labels.Matches(labels.Set(md.Labels))) ||
				(sq.fields != nil && !sq.fields.Matches(fields.Set{"metadata.name": md.Name, "metadata.namespace": md.Namespace})) {
				continue
			}
			kept = append(kept, raw)
		}
		page.Items = kept
	}
	if page.Items == nil {
		page.Items = []json.RawMessage{}
	}
	if v := asTable(o.req.r); v != "" {
		lm.Continue = page.Continue
		t, err := o.a.ownTable(o.k, o.req.r, v, page.Items, lm)
		if err != nil {
			return err
		}
		return writeJSON(o.w, http.StatusOK, t)
	}
	return writeJSON(o.w, http.StatusOK, map[string]any{
		"apiVersion": OwnGroup + "/" + OwnVersion, "kind": o.k.Kind + "List",
		"metadata": metav1.ListMeta{ResourceVersion: lm.ResourceVersion, Continue: page.Continue}, "items": page.Items,
	})
}

// get answers the object as the REST API reads it, with its server-side
// apply record as metadata.managedFields.
func (o *ownCall) get() error {
	_, body, err := o.call(o.k.Get, http.MethodGet, nil, nil)
	if err != nil {
		return err
	}
	if v := asTable(o.req.r); v != "" {
		t, err := o.a.ownTable(o.k, o.req.r, v, []json.RawMessage{body}, metav1.ListMeta{})
		if err != nil {
			return err
		}
		return writeJSON(o.w, http.StatusOK, t)
	}
	if o.k.Identity == nil {
		return writeRaw(o.w, http.StatusOK, body)
	}
	obj := &unstructured.Unstructured{}
	if err := json.Unmarshal(body, &obj.Object); err != nil {
		return fmt.Errorf("the %s as read: %w", o.k.Kind, err)
	}
	entries, err := o.readManaged(o.req.r.Context(), identityOf(obj))
	if err != nil {
		return err
	}
	obj.SetManagedFields(entries)
	return writeJSON(o.w, http.StatusOK, obj.Object)
}

// readBody is the request's body, bounded as the REST API bounds it.
func (o *ownCall) readBody() ([]byte, error) {
	if len(o.body) == 0 {
		return nil, badRequest("the request body is empty")
	}
	return o.body, nil
}

// object reads the body as one object of the kind, JSON or YAML (the REST
// API's decoder bounds what YAML expands to, BoundedJSON), and checks its
// apiVersion, kind, namespace and name against the path as the
// kube-apiserver does.
func (o *ownCall) object() (map[string]any, error) {
	obj, err := o.bodyObject()
	if err != nil {
		return nil, err
	}
	return obj, o.fitPath(obj)
}

// bodyObject reads the body as one JSON object, JSON or YAML, of a media
// type a web page cannot send to another origin without asking first.
func (o *ownCall) bodyObject() (map[string]any, error) {
	b, err := o.readBody()
	if err != nil {
		return nil, err
	}
	// The media type is required, and one a web page cannot send to
	// another origin without asking first (CORS): through `purser
	// kubeconfig --proxy`, which adds the user's credential on the
	// loopback, a page's plain POST (text/plain, a form, or no type at
	// all) must not become the user's write.
	ct := o.req.r.Header.Get("Content-Type")
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
	return obj, nil
}

// fitPath fills the object's namespace (and, on a PUT, its name) from the
// path where it has none, and refuses one that names another.
func (o *ownCall) fitPath(obj map[string]any) error {
	if v, _ := obj["apiVersion"].(string); v != OwnGroup+"/"+OwnVersion {
		return o.invalid(fmt.Sprintf("apiVersion must be %s/%s", OwnGroup, OwnVersion), []FieldCause{{Field: "apiVersion", Message: fmt.Sprintf("Invalid value: %q", v)}})
	}
	if v, _ := obj["kind"].(string); v != o.k.Kind {
		return o.invalid(fmt.Sprintf("kind must be %s on %s", o.k.Kind, o.k.Plural), []FieldCause{{Field: "kind", Message: fmt.Sprintf("Invalid value: %q", v)}})
	}
	md, _ := obj["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		obj["metadata"] = md
	}
	if o.k.Namespaced {
		switch got, _ := md["namespace"].(string); {
		case got == "":
			md["namespace"] = o.ns
		case got != o.ns:
			return badRequest(fmt.Sprintf("the namespace of the provided object (%s) does not match the namespace sent on the request (%s)", got, o.ns))
		}
	}
	name, _ := md["name"].(string)
	switch {
	case o.name == "" && name == "":
		if gn, _ := md["generateName"].(string); gn == "" || !o.k.Namespaced {
			return o.invalid("name or generateName is required", []FieldCause{{Field: "metadata.name", Message: "Required value: name or generateName is required"}})
		}
	case o.name == "":
		o.name = name
	case name == "":
		md["name"] = o.name
	case name != o.name:
		return badRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", name, o.name))
	}
	return nil
}

func (o *ownCall) create() error {
	obj, err := o.object()
	if err != nil {
		return err
	}
	restore, err := o.ownership(obj, nil)
	if err != nil {
		return err
	}
	defer restore()
	return o.createFrom(obj)
}

// createFrom creates obj, which fits the path, through the kind's Create
// (or its Update, where nothing is).
func (o *ownCall) createFrom(obj map[string]any) error { return o.create1(obj, false) }

// create1 is createFrom; absent says the caller found nothing there just
// now (an apply's read), which spares a second look: PUT creates or
// replaces, and an apply is create-or-update anyway.
func (o *ownCall) create1(obj map[string]any, absent bool) error {
	body, _ := json.Marshal(obj)
	if o.k.Create == nil {
		// PUT creates or replaces: make sure it creates.
		if !absent {
			_, _, err := o.call(o.k.Get, http.MethodGet, nil, nil)
			var se *statusError
			switch {
			case err == nil:
				return o.alreadyExists()
			case !errors.As(err, &se) || se.st.Code != http.StatusNotFound:
				return err
			}
		}
		_, out, err := o.call(o.k.Update, http.MethodPut, nil, body)
		if err != nil {
			return err
		}
		return writeRaw(o.w, http.StatusCreated, out)
	}
	code, out, err := o.call(o.k.Create, http.MethodPost, nil, body)
	var se *statusError
	if errors.As(err, &se) && se.st.Code == http.StatusConflict {
		return o.alreadyExists()
	}
	if err != nil {
		return err
	}
	if code == http.StatusOK {
		// The same object submitted again: the REST API answers with the
		// one stored; a create through /k8s is refused, as kubectl
		// create expects.
		return o.alreadyExists()
	}
	return writeRaw(o.w, http.StatusCreated, out)
}

func (o *ownCall) alreadyExists() error {
	se := newStatus(http.StatusConflict, metav1.StatusReasonAlreadyExists, fmt.Sprintf("%s.%s %q already exists", o.k.Plural, OwnGroup, o.name))
	se.st.Details = &metav1.StatusDetails{Name: o.name, Group: OwnGroup, Kind: o.k.Plural}
	return se
}

func (o *ownCall) update() error {
	obj, err := o.object()
	if err != nil {
		return err
	}
	_, cur, err := o.call(o.k.Get, http.MethodGet, nil, nil)
	var se *statusError
	if errors.As(err, &se) && se.st.Code == http.StatusNotFound {
		cur, err = nil, nil
	}
	if err != nil {
		return err
	}
	restore, err := o.ownership(obj, cur)
	if err != nil {
		return err
	}
	defer restore()
	return o.replace(obj, true)
}

// replace writes obj through the kind's Update. Without a
// resourceVersion, where the REST API requires one, the object's
// current one is taken: a PUT without one is unconditional.
func (o *ownCall) replace(obj map[string]any, creates bool) error {
	md := obj["metadata"].(map[string]any)
	if rv, _ := md["resourceVersion"].(string); rv == "" && o.k.NeedsResourceVersion {
		_, cur, err := o.call(o.k.Get, http.MethodGet, nil, nil)
		var se *statusError
		if creates && o.k.Create != nil && errors.As(err, &se) && se.st.Code == http.StatusNotFound {
			o.name = ""
			body, _ := json.Marshal(obj)
			_, out, err := o.call(o.k.Create, http.MethodPost, nil, body)
			if err != nil {
				return err
			}
			return writeRaw(o.w, http.StatusCreated, out)
		}
		if err != nil {
			return err
		}
		var c struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
			} `json:"metadata"`
		}
		_ = json.Unmarshal(cur, &c)
		md["resourceVersion"] = c.Metadata.ResourceVersion
	}
	body, _ := json.Marshal(obj)
	code, out, err := o.call(o.k.Update, http.MethodPut, nil, body)
	if err != nil {
		return err
	}
	if code != http.StatusCreated {
		code = http.StatusOK
	}
	return writeRaw(o.w, code, out)
}

// Patch media types, as the kube-apiserver names them.
const (
	mergePatch     = "application/merge-patch+json"
	jsonPatch      = "application/json-patch+json"
	strategicPatch = "application/strategic-merge-patch+json"
	applyPatch     = "application/apply-patch+yaml"
)

// patch applies a JSON merge patch or a JSON patch to the object as read,
// and writes the result through Update, optimistic on what was read: when
// the object moved meanwhile, the patch is applied again to a fresh read,
// unless the patch itself names a resourceVersion.
func (o *ownCall) patch() error {
	mt, _, _ := mime.ParseMediaType(o.req.r.Header.Get("Content-Type"))
	switch mt {
	case strategicPatch:
		// kubectl sends one only for the kinds it knows as built in.
		return statusErr(http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType,
			"strategic merge patch is not supported for "+o.k.Plural+"."+OwnGroup+": use --type=merge or --type=json")
	case applyPatch:
		return o.apply()
	}
	pd, err := decodePatch(mt, o.body, nil)
	if err != nil {
		return err
	}
	what := o.k.Plural + "." + OwnGroup + " " + strconvQuote(o.name)
	for attempt := 1; ; attempt++ {
		_, cur, err := o.call(o.k.Get, http.MethodGet, nil, nil)
		if err != nil {
			return err
		}
		obj, err := pd.applyTo(cur, what)
		if err != nil {
			return err
		}
		if err := o.fitPath(obj); err != nil {
			return err
		}
		restore, err := o.ownership(obj, cur)
		if err != nil {
			return err
		}
		err = o.replace(obj, false)
		restore()
		if pd.again(err, attempt) {
			continue
		}
		return err
	}
}

// patchDoc is a patch of one of the media types served, read and checked
// before any object is.
type patchDoc struct {
	mt  string
	raw []byte
	ops jsonpatch.Patch // a JSON patch's operations
	// typed is the Go type a strategic merge patch merges by.
	typed runtime.Object
}

// decodePatch reads a merge patch, a JSON patch (bounded in operations)
// or, with typed, a strategic merge patch.
func decodePatch(mt string, raw []byte, typed runtime.Object) (*patchDoc, error) {
	pd := &patchDoc{mt: mt, raw: raw, typed: typed}
	switch {
	case mt != mergePatch && mt != jsonPatch && (mt != strategicPatch || typed == nil):
		return nil, statusErr(http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType,
			fmt.Sprintf("the patch's media type %q is not served: %s or %s", mt, mergePatch, jsonPatch))
	case len(raw) == 0:
		return nil, badRequest("the request body is empty")
	case mt == jsonPatch:
		var err error
		if pd.ops, err = jsonpatch.DecodePatch(raw); err != nil {
			return nil, badRequest("the JSON patch cannot be read: " + err.Error())
		}
		if len(pd.ops) > maxPatchOperations {
			return nil, statusErr(http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge,
				fmt.Sprintf("the JSON patch has %d operations, more than the %d served", len(pd.ops), maxPatchOperations))
		}
	case !json.Valid(raw):
		return nil, badRequest("the merge patch is not JSON")
	}
	return pd, nil
}

// applyTo is the object the patch makes of cur (JSON), bounded in size;
// what names the object in a refusal.
func (pd *patchDoc) applyTo(cur []byte, what string) (map[string]any, error) {
	var next []byte
	var err error
	switch pd.mt {
	case jsonPatch:
		next, err = pd.ops.ApplyWithOptions(cur, &jsonpatch.ApplyOptions{SupportNegativeIndices: true, AccumulatedCopySizeLimit: MaxBodyBytes, EnsurePathExistsOnAdd: false})
	case strategicPatch:
		next, err = strategicpatch.StrategicMergePatch(cur, pd.raw, pd.typed)
	default:
		next, err = jsonpatch.MergePatch(cur, pd.raw)
	}
	if err != nil {
		return nil, statusErr(http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, "the patch does not apply to "+what+": "+err.Error())
	}
	if len(next) > MaxBodyBytes {
		return nil, statusErr(http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge,
			fmt.Sprintf("the patched object is larger than %d bytes", MaxBodyBytes))
	}
	var obj map[string]any
	if err := json.Unmarshal(next, &obj); err != nil || obj == nil {
		return nil, statusErr(http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, "the patch leaves no object")
	}
	return obj, nil
}

// again says whether a patch's write that err refused is to be applied
// again to a fresh read: the object moved meanwhile, and the patch itself
// named no resourceVersion.
func (pd *patchDoc) again(err error, attempt int) bool {
	var se *statusError
	return errors.As(err, &se) && se.st.Code == http.StatusConflict && se.st.Reason == metav1.StatusReasonConflict &&
		!patchNamesVersion(pd.raw, pd.mt) && attempt < maxPatchRetries
}

// maxPatchOperations bounds a JSON patch: each operation copies the
// document, so a long one costs its length times the object's size.
const maxPatchOperations = 1000

// patchNamesVersion says whether the patch sets metadata.resourceVersion,
// a precondition of the client's.
func patchNamesVersion(p []byte, mt string) bool {
	if mt == jsonPatch {
		return bytes.Contains(p, []byte("/metadata/resourceVersion"))
	}
	var m struct {
		Metadata struct {
			ResourceVersion *string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	return json.Unmarshal(p, &m) == nil && m.Metadata.ResourceVersion != nil
}

// deleteOptions reads a DELETE's body, DeleteOptions: only dryRun is
// honoured (moved to the query, where the REST API's handlers read it);
// a precondition would be silently ignored, so it is refused.
func (o *ownCall) deleteOptions(what string) error {
	b := o.body
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	var opts metav1.DeleteOptions
	if json.Unmarshal(b, &opts) != nil {
		return badRequest("the DeleteOptions body cannot be read")
	}
	if opts.Preconditions != nil {
		return badRequest("delete preconditions are not served on " + what)
	}
	if len(opts.DryRun) > 0 {
		q := o.req.r.URL.Query()
		q["dryRun"] = opts.DryRun
		o.req.r.URL.RawQuery = q.Encode()
		return o.dryRun()
	}
	return nil
}

func (o *ownCall) delete() error {
	if err := o.deleteOptions(o.k.Plural + "." + OwnGroup); err != nil {
		return err
	}
	_, out, err := o.call(o.k.Delete, http.MethodDelete, nil, nil)
	if err != nil {
		return err
	}
	var tm metav1.TypeMeta
	if json.Unmarshal(out, &tm) == nil && tm.Kind != "" {
		return writeRaw(o.w, http.StatusOK, out) // the object, as it was or as it is now (a runnable cancelled)
	}
	// The REST API answers some deletes with a note, not the object: a
	// Status of success, as the kube-apiserver answers an object gone.
	return writeJSON(o.w, http.StatusOK, metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess,
		Details: &metav1.StatusDetails{Name: o.name, Group: OwnGroup, Kind: o.k.Plural}})
}

func writeRaw(w http.ResponseWriter, code int, b []byte) error {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(code)
	_, _ = w.Write(b)
	return nil
}

// ownPrefix says whether the path under /k8s names purser's group.
func ownPrefix(p []string) bool {
	return len(p) >= 3 && p[0] == "apis" && p[1] == OwnGroup && p[2] == OwnVersion
}
