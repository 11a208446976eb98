package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/dependson"
	"github.com/purser-io/purser/internal/control/operate"
	"github.com/purser-io/purser/internal/domain/lifecycle"
	"github.com/purser-io/purser/internal/domain/placement"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/member/clusters"
)

// moveRunnable serves POST /api/v1/runnables/{ns}/{name}/move with an
// optional body {"to": CLUSTER}: a planned move of a Running runnable to
// that cluster, or to the one placement chooses among the others. 409
// when it is not Running or is being moved already, 422 when the target
// cannot take it (the reason named). The failover controller does the
// move (docs/operating.md, "Planned moves").
func (s *Server) moveRunnable(r *http.Request, u policy.User) (int, any, error) {
	req, err := optionalBody[v1alpha1.MoveRequest](r, `{"to": "CLUSTER"}`)
	if err != nil {
		return 0, nil, err
	}
	return s.operateRunnable(r, u, "move", func(ctx context.Context, tx *store.Tx, cur *lifecycle.Runnable, doc *storedRunnable, attempts []*store.Attempt) (*lifecycle.Transition, error) {
		apiVersion, _ := doc.Spec.Template["apiVersion"].(string)
		kind, _ := doc.Spec.Template["kind"].(string)
		gv, err := schema.ParseGroupVersion(apiVersion)
		if err != nil {
			return nil, errInvalid("the runnable's template has no valid apiVersion", nil)
		}
		cs, err := placementClusters(ctx, tx, cur.Rec.Namespace, doc.Spec.DependsOn)
		if err != nil {
			return nil, err
		}
		t, err := operate.Move(cur, &doc.Spec, gv.WithKind(kind), attempts, req.To, cs, u.Name, s.now())
		var refused *operate.IneligibleError
		if errors.As(err, &refused) {
			return nil, errInvalid(refused.Message, []v1alpha1.FieldError{{Field: "to", Message: refused.Message}})
		}
		return operated(t, err)
	})
}

// optionalBody reads the optional body of a verb: none (the zero T), or
// T as JSON or YAML with no unknown field, bounded as every body is
// (decodeBytes). want says what the body may be, in the error.
func optionalBody[T any](r *http.Request, want string) (T, error) {
	var req T
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return req, err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return req, nil
	}
	return decodeBytes(data, r.Header.Get("Content-Type"), func(js []byte, _ string) (T, error) {
		dec := json.NewDecoder(bytes.NewReader(js))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			return req, errBadRequest("request body is malformed: %v (want %s or nothing)", err, want)
		}
		return req, nil
	})
}

// placementClusters is every registered cluster as placement judges a
// move's target: its readiness, its taints (spec and those purser set),
// and what of deps it lacks.
func placementClusters(ctx context.Context, tx *store.Tx, namespace string, deps []v1alpha1.Dependency) ([]placement.Cluster, error) {
	rows, err := tx.Clusters().List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]placement.Cluster, 0, len(rows))
	names := make([]string, 0, len(rows))
	for _, row := range rows {
		// As the submitter describes a cluster to placement.
		c, err := clusters.Placement(row)
		if err != nil {
			return nil, fmt.Errorf("cluster %s: %w", row.Name, err)
		}
		out = append(out, c)
		names = append(names, row.Name)
	}
	lacks, err := dependson.Lacks(ctx, tx, namespace, deps, names)
	if err != nil {
		return nil, err
	}
	for i := range out {
		out[i].Lacks = lacks[out[i].Name]
	}
	return out, nil
}
