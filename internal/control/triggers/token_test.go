package triggers_test

import (
	"errors"
	"testing"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/triggers"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
)

// TestEventOfATriggerReplaced: the API lets a webhook call in on one
// read of the trigger and fires on another, as the loop reads an end on
// one and fires on another. A trigger deleted and made again under the
// same name meanwhile (by another author, with another template), or its
// token rotated, must not take the call (the token the call held no
// longer opens it) nor the end read for the trigger that was.
func TestEventOfATriggerReplaced(t *testing.T) {
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			st := open(t, eng.NewDSN(t))
			pol := testPolicy(t)
			fire := triggers.NewFirer(triggers.Config{Store: st, Policy: func() *policy.Policy { return pol }})
			hook := v1alpha1.TriggerSource{Webhook: &v1alpha1.WebhookSource{}}
			get := func() *store.Trigger {
				t.Helper()
				var rec *store.Trigger
				if err := st.Read(t.Context(), func(tx *store.Tx) (err error) {
					rec, err = tx.Triggers().Get(t.Context(), "team-a", "hook")
					return err
				}); err != nil {
					t.Fatal(err)
				}
				return rec
			}
			call := func(rec *store.Trigger, key string) (*triggers.Outcome, error) {
				return fire.Fire(t.Context(), "team-a", "hook", triggers.Event{ID: v1alpha1.WebhookEvent(rec.UID, key),
					What: "call " + key, TriggerUID: rec.UID, TokenHash: rec.TokenHash})
			}
			runs := func() int {
				t.Helper()
				var n int
				if err := st.Read(t.Context(), func(tx *store.Tx) error {
					rs, err := triggers.Runs(t.Context(), tx, "team-a", "hook")
					n = len(rs)
					return err
				}); err != nil {
					t.Fatal(err)
				}
				return n
			}

			putTrigger(t, st, "hook", hook, nil)
			first := get()
			if out, err := call(first, "a"); err != nil || !out.Created {
				t.Fatalf("a call with the trigger's token: %+v, %v (the control)", out, err)
			}
			// Rotated since the call was let in.
			if err := st.Tx(t.Context(), func(tx *store.Tx) error {
				_, _, err := triggers.Rotate(t.Context(), tx, "team-a", "hook", "", alice)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if out, err := call(first, "b"); !errors.Is(err, triggers.ErrReplaced) {
				t.Errorf("a call let in with the token rotated away fired: %+v, %v", out, err)
			}
			// Deleted and made again under the name.
			if err := st.Tx(t.Context(), func(tx *store.Tx) error { return tx.Triggers().Delete(t.Context(), "team-a", "hook") }); err != nil {
				t.Fatal(err)
			}
			putTrigger(t, st, "hook", hook, nil)
			if out, err := call(first, "c"); !errors.Is(err, triggers.ErrReplaced) {
				t.Errorf("a call let in by the deleted trigger fired the one made again: %+v, %v", out, err)
			}
			// An end read by the trigger loop for the deleted trigger: not
			// the new one's to fire on.
			if out, err := fire.Fire(t.Context(), "team-a", "hook", triggers.Event{ID: v1alpha1.RunnableEndedEvent("some-uid", 1),
				What: "an end read for the old trigger", TriggerUID: first.UID}); !errors.Is(err, triggers.ErrReplaced) {
				t.Errorf("an event read for the deleted trigger fired the one made again: %+v, %v", out, err)
			}
			if n := runs(); n != 1 {
				t.Errorf("%d runs; only the control's should be", n)
			}
			if out, err := call(get(), "d"); err != nil || !out.Created {
				t.Fatalf("a call with the new trigger's token: %+v, %v", out, err)
			}
		})
	}
}
