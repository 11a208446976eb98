package server

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/drill"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/store"
)

// DrillSnapshot reads the farm in tx as the drills' what-if weighs it:
// the failover controller's zone label and rates, the submitter's score
// and figures, each namespace's fair share by pol; only the runnables
// target takes away when it is set. internal/control/drill builds it
// (controldrill.Snapshotter) and whoever composes the API hands it over,
// so that the API links no component's code (the submitter's figures).
type DrillSnapshot func(ctx context.Context, tx *store.Tx, target *drill.Target, pol *policy.Policy) (drill.Farm, error)

func decodeDrillRequest(data []byte, _ string) (v1alpha1.DrillRequest, error) {
	var req v1alpha1.DrillRequest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, err
	}
	return req, nil
}

// createDrill serves POST /api/v1/drills (admins only). With dryRun it
// answers the what-if of losing the target: it reads a snapshot and
// changes nothing, so it writes no audit entry, as no other read does.
// Without it, a real drill starts (startDrill).
func (s *Server) createDrill(r *http.Request, u policy.User) (int, any, error) {
	if !s.policy().IsAdmin(u) {
		return 0, nil, errForbidden("user %q may not run drills; only admins may", u.Name)
	}
	req, err := decodeBody(r, decodeDrillRequest)
	if err != nil {
		return 0, nil, err
	}
	switch v := r.URL.Query().Get("dryRun"); v {
	case "":
	case "All":
		req.DryRun = true
	default:
		return 0, nil, errInvalid(fmt.Sprintf("dryRun=%s: the only value is All", v),
			[]v1alpha1.FieldError{{Field: "dryRun", Message: "the only value is All"}})
	}
	if field, why := targetProblem(req.Target); field != "" {
		return 0, nil, errInvalid("target "+req.Target.String()+": "+why, []v1alpha1.FieldError{{Field: field, Message: why}})
	}
	if !req.DryRun {
		return s.startDrill(r, u, req)
	}
	if req.Force {
		return 0, nil, errInvalid("force is for a real drill; a dry run changes nothing",
			[]v1alpha1.FieldError{{Field: "force", Message: "only without dryRun"}})
	}
	_, rep, err := s.planDrill(r, req.Target)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, rep, nil
}

// planDrill is the what-if of losing target on a snapshot of the farm
// read now, with the snapshot; a target that names nothing the farm has
// is a 422 naming it.
func (s *Server) planDrill(r *http.Request, target drill.Target) (drill.Farm, *drill.Report, error) {
	farm, err := s.drillSnapshot(r, &target)
	var rep *drill.Report
	if err == nil {
		rep, err = drill.Plan(farm, target)
	}
	var te *drill.TargetError
	if errors.As(err, &te) {
		return farm, nil, errInvalid("target "+te.Error(), []v1alpha1.FieldError{{Field: "target.name", Message: te.Why}})
	}
	return farm, rep, err
}

// targetProblem says which field of t is wrong and why, before the farm
// is read.
func targetProblem(t drill.Target) (field, why string) {
	switch {
	case !slices.Contains([]string{drill.TargetDC, drill.TargetCluster, drill.TargetSelector}, t.Kind):
		return "target.kind", fmt.Sprintf("%q is not a kind of target: dc, cluster or selector", t.Kind)
	case t.Name == "":
		return "target.name", "is required: the DC, the cluster or the label selector"
	}
	return "", ""
}

// drillSnapshot reads the farm; with target, only the runnables it
// moves.
func (s *Server) drillSnapshot(r *http.Request, target *drill.Target) (drill.Farm, error) {
	return s.readDrillSnapshot(r.Context(), target)
}

func (s *Server) readDrillSnapshot(ctx context.Context, target *drill.Target) (drill.Farm, error) {
	if s.cfg.DrillSnapshot == nil {
		return drill.Farm{}, newError(http.StatusServiceUnavailable, "ServiceUnavailable", "drills are not configured on this server")
	}
	var farm drill.Farm
	err := s.cfg.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		farm, err = s.cfg.DrillSnapshot(ctx, tx, target, s.policy())
		return err
	})
	return farm, err
}

// DC is one data center of the farm: its clusters (those whose zone
// label names it) and whether the farm could absorb losing it now.
type DC struct {
	Kind     string              `json:"kind"`
	Metadata v1alpha1.ObjectMeta `json:"metadata"`
	Status   DCStatus            `json:"status"`
}

// DCStatus is what the DC list says of a DC.
type DCStatus struct {
	Clusters []string `json:"clusters"`
	Headroom Headroom `json:"headroom"`
	// Message names the shortage (the first runnable left and why): for
	// admins only, as it names a tenant's work.
	Message string `json:"message,omitempty"`
}

// Headroom is the what-if of losing the DC, as of the answer.
type Headroom struct {
	Absorbable bool `json:"absorbable"`
	// Verdict is the what-if's (Absorbed, Partial, NotAbsorbed).
	Verdict string       `json:"verdict"`
	Short   *drill.Short `json:"short,omitempty"`
}

// DCHeadroomTTL is how long the DC list's headroom is kept: every what-if
// of a DC reads every runnable (about 2 s at 10,000), and every user may
// list the DCs, so a list is computed at most once in that period, whoever
// asks and however often, rather than once per request.
const DCHeadroomTTL = 10 * time.Second

// dcCache is the DC list last computed, with the admins' messages; one
// computation at a time, the others waiting for it.
type dcCache struct {
	mu    sync.Mutex
	at    time.Time
	items []DC
}

// listDCs serves GET /api/v1/dcs: each DC with its standing headroom,
// computed by the drill's what-if on one snapshot, as of at most
// DCHeadroomTTL ago. Every user sees the DCs and how much would be short;
// which runnables, for admins alone.
func (s *Server) listDCs(r *http.Request, u policy.User) (int, any, error) {
	items, err := s.dcHeadroom(r.Context())
	if err != nil {
		return 0, nil, err
	}
	admin := s.policy().IsAdmin(u)
	out := List[DC]{Items: make([]DC, len(items))}
	for i, dc := range items {
		dc.Status.Clusters = slices.Clone(dc.Status.Clusters)
		if !admin {
			dc.Status.Message = ""
		}
		out.Items[i] = dc
	}
	return http.StatusOK, out, nil
}

// dcHeadroom is every DC's headroom, from the cache while it is fresh
// (the DC list and the metrics read it).
func (s *Server) dcHeadroom(ctx context.Context) ([]DC, error) {
	c := &s.dcs
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.items != nil && s.now().Sub(c.at) < DCHeadroomTTL {
		return c.items, nil
	}
	at := s.now()
	farm, err := s.readDrillSnapshot(ctx, nil)
	if err != nil {
		return nil, err
	}
	label := cmp.Or(farm.ZoneLabel, "dc")
	byDC := map[string][]string{}
	for _, cl := range farm.Clusters {
		if v, ok := cl.Labels[label]; ok {
			byDC[v] = append(byDC[v], cl.Name)
		}
	}
	names := make([]string, 0, len(byDC))
	for n := range byDC {
		names = append(names, n)
	}
	slices.Sort(names)
	items := make([]DC, 0, len(names))
	for _, n := range names {
		rep, err := drill.Plan(farm, drill.Target{Kind: drill.TargetDC, Name: n})
		if err != nil {
			return nil, err
		}
		dc := DC{Kind: "DC", Metadata: v1alpha1.ObjectMeta{Name: n}, Status: DCStatus{Clusters: byDC[n],
			Headroom: Headroom{Absorbable: rep.Verdict == drill.Absorbed, Verdict: rep.Verdict, Short: rep.Short}, Message: rep.Message}}
		slices.Sort(dc.Status.Clusters)
		items = append(items, dc)
	}
	c.items, c.at = items, at
	return items, nil
}
