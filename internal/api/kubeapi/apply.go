package kubeapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/hub/store"
)

// Server-side apply of purser's kinds: apimachinery's field manager (the
// kube-apiserver's own) merges the applied configuration into the object
// as read, by the OpenAPI schema of openapi.go through structured-merge-
// diff, and says which manager owns which field; the result is written
// through the REST API's handlers as any other write, and the ownership
// record is stored in the same transaction (store.ManagedFields).

// InTx is how /k8s adds a step to the transaction of the REST API's
// write it calls: the server runs fn in that transaction after the
// write's own steps, and rolls the whole back if fn fails.
type InTx func(ctx context.Context, fn func(ctx context.Context, tx *store.Tx) error) context.Context

// Identity names the object an ownership record is for: its uid (a
// quota's creation time), read in tx; "" when the object does not exist.
type Identity func(ctx context.Context, tx *store.Tx, namespace, name string) (string, error)

// maxFieldManager is the longest field manager name, as the
// kube-apiserver bounds it.
const maxFieldManager = 128

// managers holds the field manager of each kind, made once from the
// schema.
type managers struct {
	once sync.Once
	err  error
	by   map[string]*managedfields.FieldManager
}

func (a *API) fieldManager(k *OwnKind) (*managedfields.FieldManager, error) {
	a.managers.once.Do(func() {
		schemas := map[string]*spec.Schema{}
		for i := range a.cfg.Own {
			s := kindSchema(&a.cfg.Own[i])
			schemas[definitionName(a.cfg.Own[i].Kind)] = &s
		}
		tc, err := managedfields.NewTypeConverter(schemas, false)
		if err != nil {
			a.managers.err = fmt.Errorf("the schema of purser's kinds: %w", err)
			return
		}
		a.managers.by = map[string]*managedfields.FieldManager{}
		for i := range a.cfg.Own {
			gvk := schema.GroupVersionKind{Group: OwnGroup, Version: OwnVersion, Kind: a.cfg.Own[i].Kind}
			fm, err := managedfields.NewDefaultCRDFieldManager(tc, sameVersion{}, sameVersion{}, sameVersion{}, gvk, gvk.GroupVersion(), "", nil)
			if err != nil {
				a.managers.err = err
				return
			}
			a.managers.by[a.cfg.Own[i].Kind] = fm
		}
	})
	if a.managers.err != nil {
		return nil, a.managers.err
	}
	return a.managers.by[k.Kind], nil
}

// sameVersion is the conversion, defaulting and creation of objects of
// one version, unstructured: purser serves each kind at one version, so
// there is nothing to convert, and defaults are the REST API's to apply.
type sameVersion struct{}

func (sameVersion) Convert(in, out, _ any) error {
	u, ok := in.(*unstructured.Unstructured)
	o, ok2 := out.(*unstructured.Unstructured)
	if !ok || !ok2 {
		return fmt.Errorf("cannot convert %T to %T", in, out)
	}
	o.Object = runtime.DeepCopyJSON(u.Object)
	return nil
}

func (sameVersion) ConvertToVersion(in runtime.Object, _ runtime.GroupVersioner) (runtime.Object, error) {
	return in, nil
}

func (sameVersion) ConvertFieldLabel(_ schema.GroupVersionKind, label, value string) (string, string, error) {
	return label, value, nil
}

func (sameVersion) Default(runtime.Object) {}

func (sameVersion) New(gvk schema.GroupVersionKind) (runtime.Object, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// readManaged returns the ownership record of the object as read (its
// identity id), nil when there is none or it is of another object of the
// same name, since deleted.
func (o *ownCall) readManaged(ctx context.Context, id string) ([]metav1.ManagedFieldsEntry, error) {
	var entries []metav1.ManagedFieldsEntry
	err := o.a.cfg.Store.Read(ctx, func(tx *store.Tx) error {
		entries = nil
		got, raw, err := tx.ManagedFields().Get(ctx, o.recordKind(), o.ns, o.name)
		if errors.Is(err, store.ErrNotFound) || (err == nil && got != id) {
			return nil
		}
		if err != nil {
			return err
		}
		return json.Unmarshal(raw, &entries)
	})
	return entries, err
}

// identityOf is the identity of an object as the REST API answered it.
func identityOf(obj *unstructured.Unstructured) string {
	if uid := string(obj.GetUID()); uid != "" {
		return uid
	}
	return obj.GetCreationTimestamp().UTC().Format("2006-01-02T15:04:05Z")
}

// applyTarget is what server-side apply needs of the object it applies
// to: purser's own kinds (ownCall) and native objects held by a runnable
// (nativeCall) are applied by the same steps.
type applyTarget interface {
	// served refuses an apply the target cannot take.
	served() error
	fieldManager() (*managedfields.FieldManager, error)
	// fit checks the applied configuration against the path, as a create
	// would.
	fit(obj map[string]any) error
	// live is the object as read, with its ownership record, or an empty
	// one of the path's kind, namespace and name (exists false).
	live(ctx context.Context) (live *unstructured.Unstructured, exists bool, err error)
	// write stores the result and its ownership record together.
	write(obj map[string]any, exists bool, entries []metav1.ManagedFieldsEntry) error
	// describe names the object in messages: Runnable.purser.io "x".
	describe() string
	invalid(msg string, causes []FieldCause) error
}

// apply serves a PATCH of application/apply-patch+yaml.
func (o *ownCall) apply() error { return applyTo(o, o.req.r, o.body) }

// applyTo serves a PATCH of application/apply-patch+yaml to t.
func applyTo(t applyTarget, r *http.Request, body []byte) error {
	if len(body) == 0 {
		return badRequest("the request body is empty")
	}
	q := r.URL.Query()
	manager := q.Get("fieldManager")
	switch {
	case manager == "":
		return t.invalid("PatchOptions.meta.k8s.io is invalid: fieldManager: Required value: is required for apply patch",
			[]FieldCause{{Field: "fieldManager", Message: "Required value: is required for apply patch"}})
	case len(manager) > maxFieldManager:
		return t.invalid(fmt.Sprintf("PatchOptions.meta.k8s.io is invalid: fieldManager: Too long: may not be longer than %d", maxFieldManager),
			[]FieldCause{{Field: "fieldManager", Message: fmt.Sprintf("Too long: may not be longer than %d", maxFieldManager)}})
	}
	force := false
	if v := q.Get("force"); v != "" {
		var err error
		if force, err = strconv.ParseBool(v); err != nil {
			return badRequest("force must be true or false, not " + strconv.Quote(v))
		}
	}
	if err := t.served(); err != nil {
		return err
	}
	fm, err := t.fieldManager()
	if err != nil {
		return err
	}
	js, err := v1alpha1.BoundedJSON(body, "application/yaml")
	var de *v1alpha1.DecodeError
	switch {
	case errors.As(err, &de) && de.TooLarge:
		return statusErr(http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge, de.Error())
	case err != nil:
		return badRequest("the applied configuration is malformed: " + err.Error())
	}
	applied := &unstructured.Unstructured{}
	if err := json.Unmarshal(js, &applied.Object); err != nil || applied.Object == nil {
		return badRequest("the applied configuration is not an object")
	}
	if err := t.fit(applied.Object); err != nil {
		return err
	}
	if len(applied.GetManagedFields()) > 0 {
		return t.invalid("metadata.managedFields must be nil in an applied configuration",
			[]FieldCause{{Field: "metadata.managedFields", Message: "Invalid value: must be nil"}})
	}
	for attempt := 1; ; attempt++ {
		live, exists, err := t.live(r.Context())
		if err != nil {
			return err
		}
		out, err := fm.Apply(live, applied.DeepCopy(), manager, force)
		var status apierrors.APIStatus
		if errors.As(err, &status) {
			st := status.Status()
			st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
			return &statusError{st: st}
		}
		if err != nil {
			return statusErr(http.StatusUnprocessableEntity, metav1.StatusReasonInvalid,
				fmt.Sprintf("%s: the applied configuration does not fit the schema: %v", t.describe(), err))
		}
		result := out.(*unstructured.Unstructured)
		entries := result.GetManagedFields()
		result.SetManagedFields(nil)
		if !exists {
			// The REST API names what it creates.
			unstructured.RemoveNestedField(result.Object, "metadata", "resourceVersion")
		}
		err = t.write(result.Object, exists, entries)
		var se *statusError
		if errors.As(err, &se) && se.st.Code == http.StatusConflict && se.st.Reason == metav1.StatusReasonConflict && attempt < maxPatchRetries {
			continue // moved between the read and the write: apply again to a fresh read
		}
		return err
	}
}

func (o *ownCall) served() error {
	if o.a.cfg.InTx == nil || o.k.Identity == nil {
		return statusErr(http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType, "server-side apply is not served for "+o.k.Plural+"."+OwnGroup)
	}
	return nil
}

func (o *ownCall) fieldManager() (*managedfields.FieldManager, error) { return o.a.fieldManager(o.k) }

// recordKind, recordGVK and recordManager are the kind the ownership
// record of the call's writes is kept under, the kind written, and its
// field manager: the call's own kind's, or, for a native object written
// through its runnable's handlers, the native kind's (native.go).
func (o *ownCall) recordKind() string {
	if o.native != nil {
		return o.native.gvk.GroupKind().String()
	}
	return o.k.Kind
}

func (o *ownCall) recordGVK() schema.GroupVersionKind {
	if o.native != nil {
		return o.native.gvk
	}
	return schema.GroupVersionKind{Group: OwnGroup, Version: OwnVersion, Kind: o.k.Kind}
}

func (o *ownCall) recordManager() (*managedfields.FieldManager, error) {
	if o.native != nil {
		return o.a.nativeFieldManager(o.native.gvk)
	}
	return o.a.fieldManager(o.k)
}

func (o *ownCall) fit(obj map[string]any) error { return o.fitPath(obj) }

func (o *ownCall) describe() string { return fmt.Sprintf("%s.%s %q", o.k.Kind, OwnGroup, o.name) }

func (o *ownCall) live(ctx context.Context) (*unstructured.Unstructured, bool, error) {
	live := &unstructured.Unstructured{}
	_, cur, err := o.call(o.k.Get, http.MethodGet, nil, nil)
	var se *statusError
	switch {
	case errors.As(err, &se) && se.st.Code == http.StatusNotFound:
		live.SetGroupVersionKind(schema.GroupVersionKind{Group: OwnGroup, Version: OwnVersion, Kind: o.k.Kind})
		live.SetName(o.name)
		if o.k.Namespaced {
			live.SetNamespace(o.ns)
		}
		return live, false, nil
	case err != nil:
		return nil, false, err
	}
	if err := json.Unmarshal(cur, &live.Object); err != nil {
		return nil, false, fmt.Errorf("the %s as read: %w", o.k.Kind, err)
	}
	entries, err := o.readManaged(ctx, identityOf(live))
	if err != nil {
		return nil, false, err
	}
	live.SetManagedFields(entries)
	return live, true, nil
}

// write stores obj through the REST API's create (when it did not exist)
// or update, and the ownership record with it in the same transaction.
func (o *ownCall) write(obj map[string]any, exists bool, entries []metav1.ManagedFieldsEntry) error {
	restore, err := o.storeWith(entries)
	if err != nil {
		return err
	}
	defer restore()
	if !exists {
		return o.create1(obj, true)
	}
	return o.replace(obj, false)
}

// nsOrName is the namespace the REST API's path names: a cluster-scoped
// quota's is its name.
func nsOrName(k *OwnKind, ns, name string) string {
	if k.Namespaced {
		return ns
	}
	return name
}

// storeWith has the ownership record stored in the transaction of the
// write that follows, until restore.
func (o *ownCall) storeWith(entries []metav1.ManagedFieldsEntry) (restore func(), err error) {
	raw, err := json.Marshal(entries)
	if err != nil {
		return nil, err
	}
	k, kind, ns, name := o.k, o.recordKind(), o.ns, o.name
	if !k.Namespaced {
		ns = ""
	}
	src := o.req.r
	o.req.r = src.WithContext(o.a.cfg.InTx(src.Context(), func(ctx context.Context, tx *store.Tx) error {
		id, err := k.Identity(ctx, tx, nsOrName(k, ns, name), name)
		if err != nil || id == "" {
			return err
		}
		return tx.ManagedFields().Put(ctx, kind, ns, name, id, raw)
	}))
	return func() { o.req.r = src }, nil
}

// ownership records a write that is not an apply (a create, an update, a
// patch) as the kube-apiserver does: the fields it changes become its
// manager's (fieldManager, else the client's name from its User-Agent,
// kubectl-patch say), so that an applier who owned them meets a conflict
// at its next apply rather than undoing the change unawares. cur is the
// object as read (nil: none). Managed fields in obj are accepted only as
// they are stored (an object read and written back); to change them is
// refused.
func (o *ownCall) ownership(obj map[string]any, cur []byte) (restore func(), err error) {
	if o.a.cfg.InTx == nil || o.k.Identity == nil {
		return func() {}, nil
	}
	manager := o.req.r.URL.Query().Get("fieldManager")
	if manager == "" {
		manager, _, _ = strings.Cut(o.req.r.UserAgent(), "/")
	}
	if len(manager) > maxFieldManager {
		return nil, o.invalid(fmt.Sprintf("PatchOptions.meta.k8s.io is invalid: fieldManager: Too long: may not be longer than %d", maxFieldManager),
			[]FieldCause{{Field: "fieldManager", Message: fmt.Sprintf("Too long: may not be longer than %d", maxFieldManager)}})
	}
	fm, err := o.recordManager()
	if err != nil {
		return nil, err
	}
	live := &unstructured.Unstructured{}
	if cur == nil {
		live.SetGroupVersionKind(o.recordGVK())
		live.SetName(o.name)
		if o.k.Namespaced {
			live.SetNamespace(o.ns)
		}
	} else {
		if err := json.Unmarshal(cur, &live.Object); err != nil {
			return nil, fmt.Errorf("the %s as read: %w", o.k.Kind, err)
		}
		entries, err := o.readManaged(o.req.r.Context(), identityOf(live))
		if err != nil {
			return nil, err
		}
		live.SetManagedFields(entries)
	}
	next := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(obj)}
	if given, found, _ := unstructured.NestedFieldNoCopy(obj, "metadata", "managedFields"); found {
		stored, _ := json.Marshal(live.GetManagedFields())
		sent, _ := json.Marshal(given)
		var a, b any
		_ = json.Unmarshal(stored, &a)
		_ = json.Unmarshal(sent, &b)
		if !equality.Semantic.DeepEqual(a, b) && (len(live.GetManagedFields()) > 0 || given != nil) {
			return nil, o.invalid("metadata.managedFields may not be written: they are kept by the server, from the writes it takes",
				[]FieldCause{{Field: "metadata.managedFields", Message: "Forbidden: may not be changed"}})
		}
		unstructured.RemoveNestedField(obj, "metadata", "managedFields")
		unstructured.RemoveNestedField(next.Object, "metadata", "managedFields")
	}
	next.SetManagedFields(live.GetManagedFields())
	out, err := fm.Update(live, next, manager)
	if err != nil {
		// It does not fit the schema: the REST API's handler refuses it,
		// in its own words, the same as through /api/v1.
		return func() {}, nil //nolint:nilerr // the handler refuses it
	}
	return o.storeWith(out.(*unstructured.Unstructured).GetManagedFields())
}
