package submission_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/admission"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/domain/submission"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
)

func runnable(name string, image string) *v1alpha1.Runnable {
	return &v1alpha1.Runnable{
		TypeMeta: v1alpha1.TypeMeta{APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindRunnable},
		Metadata: v1alpha1.ObjectMeta{Name: name, Namespace: "team-a"},
		Spec: v1alpha1.RunnableSpec{Template: map[string]any{"apiVersion": "batch/v1", "kind": "Job",
			"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"restartPolicy": "Never",
				"containers": []any{map[string]any{"name": "c", "image": image}}}}}}},
	}
}

// TestOneWayToCreate: what the API and the scheduler both rely on. A
// name is one runnable: created once, found again with its spec, or with
// another; an author without write, or a template refused, stores nothing.
func TestOneWayToCreate(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, storetest.Engines()[0].NewDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	pol, err := policy.NewPolicy(policy.PolicyFile{Namespaces: map[string]policy.NamespacePolicy{
		"team-a": {Roles: map[policy.Role][]string{policy.RoleEditor: {"alice"}, policy.RoleViewer: {"bob"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	gate := &submission.Gate{Policy: pol, Store: st, Pods: admission.DefaultChecker(), Now: time.Now}
	create := func(req *submission.Request) (*submission.Outcome, error) {
		if err := gate.Prepare(ctx, req); err != nil {
			return nil, err
		}
		var out *submission.Outcome
		err := st.Tx(ctx, func(tx *store.Tx) error {
			var err error
			out, err = submission.Create(ctx, tx, req)
			return err
		})
		return out, err
	}
	alice := policy.User{Name: "alice"}
	out, err := create(&submission.Request{Runnable: runnable("r", "busybox"), Author: alice, Via: "a test"})
	if err != nil || !out.Created || out.Rec.Phase != string(v1alpha1.PhaseQueued) {
		t.Fatalf("create: %+v, %v", out, err)
	}
	out, err = create(&submission.Request{Runnable: runnable("r", "busybox"), Author: alice})
	if err != nil || out.Created || !out.SameSpec {
		t.Fatalf("the same again: %+v, %v", out, err)
	}
	out, err = create(&submission.Request{Runnable: runnable("r", "alpine"), Author: alice})
	if err != nil || out.Created || out.SameSpec {
		t.Fatalf("another spec under the name: %+v, %v", out, err)
	}
	var refusal *v1alpha1.Status
	if _, err := create(&submission.Request{Runnable: runnable("s", "busybox"), Author: policy.User{Name: "bob"}}); !errors.As(err, &refusal) || refusal.Code != http.StatusForbidden {
		t.Fatalf("a viewer's runnable: %v", err)
	}
	priv := runnable("p", "busybox")
	priv.Spec.Template["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"] =
		[]any{map[string]any{"name": "c", "image": "busybox", "securityContext": map[string]any{"privileged": true}}}
	if _, err := create(&submission.Request{Runnable: priv, Author: alice}); !errors.As(err, &refusal) || refusal.Code != http.StatusUnprocessableEntity {
		t.Fatalf("a privileged pod: %v", err)
	}
	if err := st.Read(ctx, func(tx *store.Tx) error {
		recs, _, err := tx.Runnables().List(ctx, store.RunnableFilter{Namespace: "team-a"})
		if len(recs) != 1 {
			t.Errorf("%d runnables stored, want 1", len(recs))
		}
		entries, err2 := tx.Audit().List(ctx, store.AuditFilter{Namespace: "team-a", Action: "create"})
		if len(entries) != 1 || entries[0].Actor != "alice" || entries[0].Summary != "submitted Job team-a/r (a test)" {
			t.Errorf("audit of the create: %+v", entries)
		}
		return errors.Join(err, err2)
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := submission.Create(ctx, nil, &submission.Request{Runnable: runnable("x", "busybox"), Author: alice}); err == nil {
		t.Fatal("Create of a request Prepare did not see")
	}
}
