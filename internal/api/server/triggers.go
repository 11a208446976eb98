package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/triggers"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/guard"
	"github.com/purser-io/purser/internal/hub/store"
)

// Triggers create a runnable at each event of one source (docs/triggers.md).
// The API stores them and takes their webhook calls; the trigger loop,
// in the controller, reads the other events from the store. A trigger's
// writer is its author: each event's runnable is created with the
// author's rights as the policy stands at the event, so the template is
// checked here as the runnable of an event, and again at each event.

// Webhook limits: each trigger's calls (WebhookRate a second, WebhookBurst
// at once; past them 429 with Retry-After), and the size of a call's
// body, which purser reads and drops (413 past it).
const (
	WebhookRate     = 5
	WebhookBurst    = 20
	WebhookMaxBytes = 64 << 10
)

// HeaderIdempotencyKey names a webhook call's event: calls with the same
// key are one event.
const HeaderIdempotencyKey = "Idempotency-Key"

// putTrigger serves PUT /api/v1/triggers/{namespace}/{name}: create
// (201) or replace (200) the trigger's spec; its status is the loop's and
// stays. A new trigger with a webhook answers with its token, once.
func (s *Server) putTrigger(r *http.Request, u policy.User) (int, any, error) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if !s.policy().Allowed(u, ns, policy.VerbWrite) {
		return 0, nil, errForbidden("user %q may not write triggers in namespace %q", u.Name, ns)
	}
	obj, err := decodeBody(r, v1alpha1.DecodeTrigger)
	if err != nil {
		return 0, nil, err
	}
	if err := matchPath(&obj.Metadata, ns, name); err != nil {
		return 0, nil, err
	}
	obj.SetDefaults()
	now := s.now()
	if errs := v1alpha1.ValidateTrigger(obj, now); len(errs) > 0 {
		return 0, nil, errInvalid("Trigger is invalid", errs)
	}
	// The template as the runnable of an event, by the author: refused
	// now rather than at every event.
	req := triggers.Request(obj, u, triggers.Event{ID: "check", What: "the check of a PUT", Chain: v1alpha1.MaxTriggerChain - 1})
	if err := s.gate().Prepare(r.Context(), req); err != nil {
		return 0, nil, templateError(err, "an event")
	}
	var rec *store.Trigger
	var token string
	status := http.StatusOK
	err = s.tx(r.Context(), func(tx *store.Tx) error {
		status = http.StatusOK
		var did triggers.PutResult
		var err error
		if rec, did, token, err = triggers.Put(r.Context(), tx, obj, u, now); err != nil || did == triggers.PutUnchanged {
			return err
		}
		action, outcome, verb := "update", "Updated", "changed"
		if did == triggers.PutCreated {
			status, action, outcome, verb = http.StatusCreated, "create", "Created", "created"
		}
		summary := fmt.Sprintf("%s trigger %s/%s on %s", verb, ns, name, sourceName(&obj.Spec.Source))
		if token != "" {
			summary += "; a new webhook token was issued"
		}
		if obj.Spec.Suspend {
			summary += ", suspended"
		}
		return appendAudit(r.Context(), tx, u, action, v1alpha1.KindTrigger, ns, name, summary, outcome, obj.Spec)
	})
	switch {
	case errors.Is(err, store.ErrConflict):
		return 0, nil, errConflict("trigger %s/%s changed since resourceVersion %s; read it again and redo the change", ns, name, obj.Metadata.ResourceVersion)
	case errors.Is(err, store.ErrNotFound):
		return 0, nil, errNotFound("trigger %s/%s does not exist; drop metadata.resourceVersion to create it", ns, name)
	case err != nil:
		return 0, nil, err
	}
	out, err := triggerFromRecord(rec)
	if err != nil {
		return 0, nil, err
	}
	out.Status.Token = token
	return status, out, nil
}

// sourceName says which source a trigger watches.
func sourceName(on *v1alpha1.TriggerSource) string {
	switch {
	case on.RunnableEnded != nil:
		return "runnableEnded"
	case on.DeployableRolledOut != nil:
		return "deployableRolledOut"
	case on.Webhook != nil:
		return "webhook"
	}
	return "nothing"
}

func (s *Server) getTrigger(r *http.Request, u policy.User) (int, any, error) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if !s.policy().Allowed(u, ns, policy.VerbRead) {
		return 0, nil, errForbidden("user %q may not read namespace %q", u.Name, ns)
	}
	var rec *store.Trigger
	var runs []*store.Runnable
	err := s.cfg.Store.Read(r.Context(), func(tx *store.Tx) error {
		var err error
		if rec, err = tx.Triggers().Get(r.Context(), ns, name); err != nil {
			return err
		}
		runs, err = triggers.Runs(r.Context(), tx, ns, name)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil, errNotFound("trigger %s/%s not found", ns, name)
	}
	if err != nil {
		return 0, nil, err
	}
	out, err := triggerFromRecord(rec)
	if err != nil {
		return 0, nil, err
	}
	// One trigger shows its runs' phases as they are now.
	triggers.FillPhases(&out.Status, runs)
	return http.StatusOK, out, nil
}

func (s *Server) listTriggers(r *http.Request, u policy.User) (int, any, error) {
	return listOwn(s, r, u, triggerKind)
}

// triggerKind is how the list and delete handlers read and remove
// triggers.
var triggerKind = ownKind[*store.Trigger, *v1alpha1.Trigger]{
	kind: v1alpha1.KindTrigger, plural: "triggers",
	get: func(ctx context.Context, tx *store.Tx, ns, name string) (*store.Trigger, error) {
		return tx.Triggers().Get(ctx, ns, name)
	},
	list: func(ctx context.Context, tx *store.Tx, ns, cont string, limit int) ([]*store.Trigger, string, error) {
		return tx.Triggers().List(ctx, store.TriggerFilter{Namespace: ns, Continue: cont, Limit: limit})
	},
	remove: func(ctx context.Context, tx *store.Tx, ns, name string) error {
		return tx.Triggers().Delete(ctx, ns, name)
	},
	object: triggerFromRecord,
}

// deleteTrigger serves DELETE: the trigger goes, its webhook token with
// it; its runnables stay.
func (s *Server) deleteTrigger(r *http.Request, u policy.User) (int, any, error) {
	out, err := deleteOwn(s, r, u, triggerKind, "its runnables stay")
	if err != nil {
		return 0, nil, err
	}
	out.Status.Message = "deleted; its runnables stay"
	return http.StatusOK, out, nil
}

// rotateTriggerToken serves POST .../rotate-token: a new webhook token,
// shown once in the answer; the old one stops working at once.
func (s *Server) rotateTriggerToken(r *http.Request, u policy.User) (int, any, error) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if !s.policy().Allowed(u, ns, policy.VerbWrite) {
		return 0, nil, errForbidden("user %q may not rotate the tokens of triggers in namespace %q", u.Name, ns)
	}
	// The rotator becomes the author (triggers.Rotate): the template is
	// judged first as the runnable of an event by her, as at a PUT, so
	// that no one takes over the firing of a trigger whose runs she may
	// not create herself.
	var was *store.Trigger
	err := s.cfg.Store.Read(r.Context(), func(tx *store.Tx) error {
		var err error
		was, err = tx.Triggers().Get(r.Context(), ns, name)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil, errNotFound("trigger %s/%s not found", ns, name)
	} else if err != nil {
		return 0, nil, err
	}
	obj, err := triggerFromRecord(was)
	if err != nil {
		return 0, nil, err
	}
	if obj.Spec.Source.Webhook != nil {
		req := triggers.Request(obj, u, triggers.Event{ID: "check", What: "the check of a token's rotation", Chain: v1alpha1.MaxTriggerChain - 1})
		if err := s.gate().Prepare(r.Context(), req); err != nil {
			return 0, nil, templateError(err, "an event")
		}
	}
	var rec *store.Trigger
	var token string
	err = s.tx(r.Context(), func(tx *store.Tx) error {
		var err error
		if rec, token, err = triggers.Rotate(r.Context(), tx, ns, name, obj.Metadata.ResourceVersion, u); err != nil {
			return err
		}
		return appendAudit(r.Context(), tx, u, "rotate-token", v1alpha1.KindTrigger, ns, name,
			fmt.Sprintf("issued a new webhook token for trigger %s/%s; the old one no longer works; %s is its author now", ns, name, u.Name), "Updated", nil)
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return 0, nil, errNotFound("trigger %s/%s not found", ns, name)
	case errors.Is(err, store.ErrConflict):
		return 0, nil, errConflict("trigger %s/%s changed while its token was rotated; rotate again", ns, name)
	case errors.Is(err, triggers.ErrNoWebhook):
		return 0, nil, errConflict("trigger %s/%s: %v, so it has no token", ns, name, err)
	case err != nil:
		return 0, nil, err
	}
	out, err := triggerFromRecord(rec)
	if err != nil {
		return 0, nil, err
	}
	out.Status.Token = token
	return http.StatusOK, out, nil
}

// webhook serves POST /api/v1/triggers/{namespace}/{name}/webhook, the
// one path a trigger's token opens, and the one no API token opens: its
// caller is an outside system that holds this trigger's token only.
// Each call is one event (the Idempotency-Key header, when given, names
// it: calls with the same key are one event), and creates at most one
// runnable, as the trigger's author.
func (s *Server) webhook(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	early := func(err error) {
		w.Header().Set("Connection", "close")
		writeError(w, err)
		if r.ContentLength != 0 {
			closeNow(w)
		}
	}
	token := bearer(r)
	var rec *store.Trigger
	// A token not of a webhook token's shape opens no trigger: refused
	// without reading the store, so that calls without one (the API's
	// authenticators read nothing either) cost no read of the database.
	if triggers.WellFormedToken(token) {
		err := s.cfg.Store.Read(r.Context(), func(tx *store.Tx) error {
			var err error
			rec, err = tx.Triggers().Get(r.Context(), ns, name)
			return err
		})
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			early(err)
			return
		}
	}
	// An unknown trigger and a wrong token answer alike: the path tells
	// a caller without the token nothing.
	if rec == nil || !triggers.TokenMatches(token, rec.TokenHash) {
		if allowed, wait := s.failed.allow(clientAddress(r), time.Now()); !allowed {
			early(errTooManyRequests(wait, "too many requests without a valid token from this address; wait before trying again"))
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="purser-webhook"`)
		early(newError(http.StatusUnauthorized, "Unauthorized", "this path takes the webhook token of trigger %s/%s only (Authorization: Bearer <token>)", ns, name))
		return
	}
	if allowed, wait := s.webhooks.allow(rec.UID, time.Now()); !allowed {
		early(errTooManyRequests(wait, "trigger %s/%s's webhook is called more than %d times a second (bursts of %d); wait before calling again", ns, name, WebhookRate, WebhookBurst))
		return
	}
	if err := s.cfg.Guard.Err(); errors.Is(err, guard.ErrNoPrimary) {
		early(errUnreached(err))
		return
	}
	// The body is not used; it is read, to its cap, so that a caller
	// learns of a body too large rather than of a cut connection.
	if _, err := io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, WebhookMaxBytes)); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			early(newError(http.StatusRequestEntityTooLarge, "RequestEntityTooLarge", "a webhook call's body is at most %d bytes", WebhookMaxBytes))
			return
		}
		early(errBadRequest("reading the body: %v", err))
		return
	}
	key := r.Header.Get(HeaderIdempotencyKey)
	if len(key) > v1alpha1.MaxIdempotencyKeyLen || strings.ContainsFunc(key, func(c rune) bool { return c < 0x21 || c > 0x7e }) {
		writeError(w, errBadRequest("the %s header is at most %d printable ASCII characters without spaces", HeaderIdempotencyKey, v1alpha1.MaxIdempotencyKeyLen))
		return
	}
	what := fmt.Sprintf("webhook call with %s %q", HeaderIdempotencyKey, key)
	if key == "" {
		key = "call-" + uuid.NewString() // each call its own event
		what = "webhook call " + key + " (no " + HeaderIdempotencyKey + ")"
	}
	// As every write: a caller that goes away does not cut it short.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), writeTimeout)
	defer cancel()
	fire := triggers.NewFirer(triggers.Config{Store: s.cfg.Store, Policy: s.policy, Pods: s.pods, Now: s.now, Notify: s.notifyOutbox})
	out, err := fire.Fire(ctx, ns, name, triggers.Event{ID: v1alpha1.WebhookEvent(rec.UID, key), What: what,
		TriggerUID: rec.UID, TokenHash: rec.TokenHash})
	switch {
	case errors.Is(err, triggers.ErrReplaced):
		// Rotated or deleted between the check above and the event: the
		// token no longer opens the trigger, and this call fires nothing.
		w.Header().Set("WWW-Authenticate", `Bearer realm="purser-webhook"`)
		writeError(w, newError(http.StatusUnauthorized, "Unauthorized", "this path takes the webhook token of trigger %s/%s only (Authorization: Bearer <token>)", ns, name))
		return
	case errors.Is(err, triggers.ErrSuspended):
		writeError(w, errConflict("trigger %s/%s is suspended (spec.suspend); the call started nothing", ns, name))
		return
	case errors.Is(err, store.ErrNotFound):
		writeError(w, errNotFound("trigger %s/%s was deleted", ns, name))
		return
	case err != nil:
		writeError(w, forTheCaller(err, ns, name))
		return
	}
	status := http.StatusAccepted
	if !out.Created {
		status = http.StatusOK // the same event, dealt with before
	}
	body := map[string]any{"runnable": out.RunName, "created": out.Created, "event": what}
	if out.Run != nil {
		body["phase"] = out.Run.Phase
	} else if !out.Created {
		// Dealt with before, and no run holds the name: the author was
		// refused then (the trigger's status.message said why), or the
		// run was deleted since. The same key does not try again.
		body["message"] = "this event was dealt with before and created no runnable that exists now; see the trigger's status.message, or send a new " + HeaderIdempotencyKey
	}
	writeJSON(w, status, body)
}

// forTheCaller is a refusal of a webhook call's run as its caller is
// told it: the code the author's POST would get, but not why. The caller
// is an outside system holding one token, not a user of purser: what the
// policy says of the author (her name, the namespaces that may use a
// priority class) is for the author, in the trigger's status.message.
func forTheCaller(err error, ns, name string) error {
	var st *v1alpha1.Status
	if !errors.As(err, &st) {
		return err
	}
	return newError(st.Code, st.Reason, "trigger %s/%s's author may not create its run now; the trigger's status.message says why", ns, name)
}

// bearer is the request's bearer token, "" when none.
func bearer(r *http.Request) string {
	const scheme = "Bearer "
	h := r.Header.Get("Authorization")
	if len(h) <= len(scheme) || !strings.EqualFold(h[:len(scheme)], scheme) {
		return ""
	}
	return strings.TrimSpace(h[len(scheme):])
}

// triggerFromRecord is the API object of a stored trigger.
func triggerFromRecord(rec *store.Trigger) (*v1alpha1.Trigger, error) {
	t, err := triggers.Decode(rec)
	if err != nil {
		return nil, err
	}
	return t.Obj, nil
}
