package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/store"
)

// ownKind is what the list and delete handlers need of one of purser's
// own namespaced kinds that start runnables (schedules, triggers): how to
// read, list and remove its records, and the object of a record.
type ownKind[R, O any] struct {
	kind   string // "Schedule", as audited
	plural string // "schedules", as in the path and the refusals
	get    func(ctx context.Context, tx *store.Tx, ns, name string) (R, error)
	list   func(ctx context.Context, tx *store.Tx, ns, cont string, limit int) ([]R, string, error)
	remove func(ctx context.Context, tx *store.Tx, ns, name string) error
	object func(R) (O, error)
}

// listOwn serves GET /api/v1/<plural>?namespace=: one page, by the
// readers of the namespace (of every namespace without one).
func listOwn[R, O any](s *Server, r *http.Request, u policy.User, k ownKind[R, O]) (int, any, error) {
	q := r.URL.Query()
	ns := q.Get("namespace")
	if err := s.authorizeList(u, ns, k.plural); err != nil {
		return 0, nil, err
	}
	limit, err := parseLimit(q.Get("limit"))
	if err != nil {
		return 0, nil, err
	}
	var recs []R
	var next string
	if err := s.cfg.Store.Read(r.Context(), func(tx *store.Tx) error {
		recs, next, err = k.list(r.Context(), tx, ns, q.Get("continue"), limit)
		return err
	}); err != nil {
		return 0, nil, err
	}
	out := List[O]{Items: make([]O, 0, len(recs)), Continue: next}
	for _, rec := range recs {
		obj, err := k.object(rec)
		if err != nil {
			return 0, nil, err
		}
		out.Items = append(out.Items, obj)
	}
	return http.StatusOK, out, nil
}

// deleteOwn removes one, by the writers of its namespace, audited with
// what becomes of what it started (stays), and returns its last state.
func deleteOwn[R, O any](s *Server, r *http.Request, u policy.User, k ownKind[R, O], stays string) (O, error) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	var out O
	if !s.policy().Allowed(u, ns, policy.VerbWrite) {
		return out, errForbidden("user %q may not delete %s in namespace %q", u.Name, k.plural, ns)
	}
	err := s.tx(r.Context(), func(tx *store.Tx) error {
		rec, err := k.get(r.Context(), tx, ns, name)
		if err != nil {
			return err
		}
		if out, err = k.object(rec); err != nil {
			return err
		}
		if err := k.remove(r.Context(), tx, ns, name); err != nil {
			return err
		}
		return appendAudit(r.Context(), tx, u, "delete", k.kind, ns, name,
			fmt.Sprintf("deleted %s %s/%s; %s", strings.ToLower(k.kind), ns, name, stays), "Removed", nil)
	})
	if errors.Is(err, store.ErrNotFound) {
		return out, errNotFound("%s %s/%s not found", strings.ToLower(k.kind), ns, name)
	}
	return out, err
}

// templateError names, in a refusal of the runnable a schedule or a
// trigger would start (as the runnable of what), the fields where they
// sit in it: a runnable's spec.x is its spec.template.x.
func templateError(err error, what string) error {
	var st *v1alpha1.Status
	if !errors.As(err, &st) {
		return err
	}
	out := *st
	out.Message = "the template, as the runnable of " + what + ": " + st.Message
	out.Details = make([]v1alpha1.FieldError, len(st.Details))
	for i, d := range st.Details {
		out.Details[i] = v1alpha1.FieldError{Field: v1alpha1.TemplateField(d.Field), Message: d.Message}
	}
	return &out
}
