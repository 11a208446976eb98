package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/operate"
	"github.com/purser-io/purser/internal/domain/drill"
	"github.com/purser-io/purser/internal/domain/lifecycle"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/store"
)

// A real drill (docs/drills.md): the what-if is run, and unless its
// verdict is Absorbed or the admin forces it, nothing happens. Then, in
// one transaction, the target's clusters are cordoned as purser cordon
// cordons them, the drill is recorded with the plan, and a planned move
// of each runnable the plan moves is asked, to the cluster the plan
// chose, in the plan's order; the failover controller does the moves as
// it does any planned move, and the drill follower
// (internal/control/drill) records how each ended. Every write is
// audited as the admin who started the drill, with its id in the details.

// startDrill serves POST /api/v1/drills without dryRun (admins only,
// checked by createDrill).
func (s *Server) startDrill(r *http.Request, u policy.User, req v1alpha1.DrillRequest) (int, any, error) {
	ctx := r.Context()
	farm, rep, err := s.planDrill(r, req.Target)
	if err != nil {
		return 0, nil, err
	}
	if rep.Verdict != drill.Absorbed && !req.Force {
		// The verdict is the reason, the shortage the message: a client
		// tells a refusal of the plan from any other conflict.
		return 0, nil, &APIError{Code: http.StatusConflict, Reason: rep.Verdict,
			Message: rep.Message + "; the drill was not started and nothing was changed: start it with force to move what fits and leave the rest where it is",
			Details: []v1alpha1.FieldError{{Field: "force", Message: "the what-if's verdict is " + rep.Verdict + ", not Absorbed"}}}
	}
	lost, err := drill.Lost(req.Target, farm.Clusters, farm.ZoneLabel)
	if err != nil {
		return 0, nil, err
	}
	names := make([]string, 0, len(lost))
	for n := range lost {
		names = append(names, n)
	}
	slices.Sort(names)
	planned, err := json.Marshal(rep)
	if err != nil {
		return 0, nil, err
	}
	var d *store.Drill
	err = s.txFresh(ctx, func(tx *store.Tx) error {
		running, err := tx.Drills().List(ctx, store.DrillFilter{State: store.DrillRunning, Limit: 1})
		if err != nil {
			return err
		}
		if len(running) > 0 {
			return errConflict("drill %s (%s %s, started by %s) is still running; one drill runs at a time. Nothing was changed",
				running[0].Name(), running[0].TargetKind, running[0].TargetName, running[0].Actor)
		}
		now := s.now()
		d = &store.Drill{TargetKind: req.Target.Kind, TargetName: req.Target.Name, Force: req.Force, Actor: u.Name,
			State: store.DrillRunning, StartedAt: now, Planned: planned}
		if err := tx.Drills().Create(ctx, d); err != nil {
			return err
		}
		about := map[string]any{"drill": d.ID}
		rec := drill.Record{Cordoned: []string{}}
		for _, name := range names {
			changed, err := s.setCordon(ctx, tx, u, name, corev1.TaintEffectNoSchedule, "cordoned by drill "+d.Name(), about)
			if err != nil {
				return err
			}
			if changed {
				rec.Cordoned = append(rec.Cordoned, name)
			}
		}
		for _, m := range rep.Moves {
			o := drill.Planned(m)
			ns, name, _ := strings.Cut(m.Runnable, "/")
			move, refused, err := s.askMove(ctx, tx, u, ns, name, m.To, fmt.Sprintf("drill %s", d.Name()), about)
			if err != nil {
				return err
			}
			if refused != "" {
				o.Error = "its planned move was refused: " + refused
			} else {
				o.Step, o.To, o.AskedAt = move.Step, move.To, &move.At
			}
			rec.Runnables = append(rec.Runnables, o)
		}
		for _, left := range rep.Unplaceable {
			ns, name, _ := strings.Cut(left.Runnable, "/")
			from := ""
			if cur, err := tx.Runnables().Get(ctx, ns, name); err == nil {
				from = cur.Cluster
			} else if !errors.Is(err, store.ErrNotFound) {
				return err
			}
			rec.Runnables = append(rec.Runnables, drill.Left(left, from))
		}
		if drill.Settled(&rec) {
			// Nothing to follow: no move planned, or every one refused.
			d.State, d.EndedAt = drill.Done(&rec), &now
		}
		rec.Message = drill.Summary(&rec, d.State)
		if d.Actual, err = json.Marshal(rec); err != nil {
			return err
		}
		if err := tx.Drills().Update(ctx, d); err != nil {
			return err
		}
		verb := "started"
		if req.Force {
			verb = "forced"
		}
		return appendAudit(ctx, tx, u, "drill-start", v1alpha1.KindDrill, "", d.Name(),
			fmt.Sprintf("drill %s %s: losing %s (what-if %s); cordoned %s; %d planned moves asked, %d left where they are",
				d.Name(), verb, req.Target, rep.Verdict, orNone(rec.Cordoned), len(rep.Moves), len(rep.Unplaceable)), "Started",
			map[string]any{"drill": d.ID, "target": req.Target, "force": req.Force, "verdict": rep.Verdict, "cordoned": rec.Cordoned})
	})
	if err != nil {
		return 0, nil, err
	}
	out, err := drillFromRecord(d, s.now())
	return http.StatusCreated, out, err
}

// endDrill serves POST /api/v1/drills/{id}/end with an optional body
// {"moveBack": true} (admins only): the clusters the drill cordoned are
// uncordoned and, with moveBack, each runnable it moved is asked to go
// back by a planned move, which the follower records. A drill whose moves
// are under way may be ended (its clusters uncordoned; the follower goes on
// until its moves ended), not moved back; one ended already is refused
// (409).
func (s *Server) endDrill(r *http.Request, u policy.User) (int, any, error) {
	if !s.policy().IsAdmin(u) {
		return 0, nil, errForbidden("user %q may not end drills; only admins may", u.Name)
	}
	id, err := drillID(r)
	if err != nil {
		return 0, nil, err
	}
	req, err := optionalBody[v1alpha1.DrillEndRequest](r, `{"moveBack": true|false}`)
	if err != nil {
		return 0, nil, err
	}
	ctx := r.Context()
	var d *store.Drill
	err = s.txFresh(ctx, func(tx *store.Tx) error {
		if d, err = tx.Drills().Get(ctx, id); err != nil {
			return err
		}
		var rec drill.Record
		if err := decodeRecord(d, &rec); err != nil {
			return err
		}
		if e := rec.End; e != nil {
			return errConflict("drill %d was ended already, by %s at %s; nothing was changed", id, e.By, e.At.UTC().Format(time.RFC3339))
		}
		if d.State == store.DrillRunning && req.MoveBack {
			t := drill.Totals(&rec)
			return errConflict("drill %d is Running: %d of its moves are under way; move the work back once it is Ended or Failed, or end it without moveBack to uncordon its clusters now. Nothing was changed", id, t.Moving)
		}
		now := s.now()
		about := map[string]any{"drill": d.ID}
		end := &v1alpha1.DrillEnd{By: u.Name, At: now, MoveBack: req.MoveBack, Uncordoned: []string{}}
		for _, name := range rec.Cordoned {
			changed, err := s.setCordon(ctx, tx, u, name, "", "uncordoned by the end of drill "+d.Name(), about)
			if errors.Is(err, store.ErrNotFound) {
				continue // removed since: nothing to uncordon
			}
			if err != nil {
				return err
			}
			if changed {
				end.Uncordoned = append(end.Uncordoned, name)
			}
		}
		asked := 0
		if req.MoveBack {
			// The moves back make the drill Running again, and one drill
			// runs at a time (the table's unique index says so too).
			running, err := tx.Drills().List(ctx, store.DrillFilter{State: store.DrillRunning, Limit: 1})
			if err != nil {
				return err
			}
			if len(running) > 0 {
				return errConflict("drill %s (%s %s) is running; the work of drill %d can be moved back once it ended, and one drill runs at a time. Nothing was changed",
					running[0].Name(), running[0].TargetKind, running[0].TargetName, id)
			}
			for i := range rec.Runnables {
				o := &rec.Runnables[i]
				if o.Step != v1alpha1.MoveDone {
					continue
				}
				ns, name, _ := strings.Cut(o.Runnable, "/")
				back := &v1alpha1.DrillMoveBack{To: o.From, Step: v1alpha1.DrillNotMoved}
				move, refused, err := s.askMove(ctx, tx, u, ns, name, o.From, "the end of drill "+d.Name(), about)
				switch {
				case errors.Is(err, store.ErrNotFound):
					back.Error = "the runnable was deleted"
				case err != nil:
					return err
				case refused != "":
					back.Error = "its move back was refused: " + refused
				default:
					back.Step, back.AskedAt = move.Step, &move.At
					asked++
				}
				o.Back = back
			}
		}
		rec.End, d.MoveBack = end, req.MoveBack
		if asked > 0 {
			// The follower follows the moves back as it followed the
			// drill's.
			d.State, d.EndedAt = store.DrillRunning, nil
		}
		rec.Message = drill.Summary(&rec, d.State)
		if d.Actual, err = json.Marshal(rec); err != nil {
			return err
		}
		if err := tx.Drills().Update(ctx, d); err != nil {
			return err
		}
		summary := fmt.Sprintf("drill %s ended: uncordoned %s", d.Name(), orNone(end.Uncordoned))
		if req.MoveBack {
			summary += fmt.Sprintf("; %d moves back asked", asked)
		}
		return appendAudit(ctx, tx, u, "drill-end", v1alpha1.KindDrill, "", d.Name(), summary, "Ended",
			map[string]any{"drill": d.ID, "moveBack": req.MoveBack, "uncordoned": end.Uncordoned})
	})
	if errors.Is(err, store.ErrNotFound) && d == nil {
		return 0, nil, errNotFound("drill %d not found", id)
	}
	if err != nil {
		return 0, nil, err
	}
	out, err := drillFromRecord(d, s.now())
	return http.StatusOK, out, err
}

// getDrill serves GET /api/v1/drills/{id} (admins only: the report
// names every tenant's work).
func (s *Server) getDrill(r *http.Request, u policy.User) (int, any, error) {
	if !s.policy().IsAdmin(u) {
		return 0, nil, errForbidden("user %q may not read drills; only admins may", u.Name)
	}
	id, err := drillID(r)
	if err != nil {
		return 0, nil, err
	}
	var d *store.Drill
	err = s.cfg.Store.Read(r.Context(), func(tx *store.Tx) error {
		d, err = tx.Drills().Get(r.Context(), id)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil, errNotFound("drill %d not found", id)
	}
	if err != nil {
		return 0, nil, err
	}
	out, err := drillFromRecord(d, s.now())
	return http.StatusOK, out, err
}

// listDrills serves GET /api/v1/drills (admins only), newest first;
// ?state= keeps one state, ?limit= and ?continue= page.
func (s *Server) listDrills(r *http.Request, u policy.User) (int, any, error) {
	if !s.policy().IsAdmin(u) {
		return 0, nil, errForbidden("user %q may not read drills; only admins may", u.Name)
	}
	q := r.URL.Query()
	f := store.DrillFilter{State: q.Get("state")}
	if f.State != "" && !slices.Contains([]string{v1alpha1.DrillRunning, v1alpha1.DrillEnded, v1alpha1.DrillFailed}, f.State) {
		return 0, nil, errBadRequest("state=%s: a drill is Running, Ended or Failed", f.State)
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return 0, nil, errBadRequest("limit=%s: want a positive number", v)
		}
		f.Limit = n
	}
	if v := q.Get("continue"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return 0, nil, errBadRequest("continue=%s: want the token of the previous page", v)
		}
		f.Before = n
	}
	var recs []*store.Drill
	err := s.cfg.Store.Read(r.Context(), func(tx *store.Tx) error {
		var err error
		f.Limit++ // one more tells whether a next page exists
		recs, err = tx.Drills().List(r.Context(), f)
		f.Limit--
		return err
	})
	if err != nil {
		return 0, nil, err
	}
	out := List[*v1alpha1.Drill]{Items: []*v1alpha1.Drill{}}
	limit := f.Limit
	if limit <= 0 {
		limit = 500
	}
	if len(recs) > limit {
		recs = recs[:limit]
		out.Continue = recs[limit-1].Name()
	}
	now := s.now()
	for _, d := range recs {
		obj, err := drillFromRecord(d, now)
		if err != nil {
			return 0, nil, err
		}
		out.Items = append(out.Items, obj)
	}
	return http.StatusOK, out, nil
}

func drillID(r *http.Request) (int64, error) {
	v := r.PathValue("id")
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id < 1 {
		return 0, errNotFound("drill %q not found: a drill's id is a number (purser drill list)", v)
	}
	return id, nil
}

func decodeRecord(d *store.Drill, rec *drill.Record) error {
	if len(d.Actual) == 0 {
		return nil
	}
	if err := json.Unmarshal(d.Actual, rec); err != nil {
		return fmt.Errorf("drill %d: stored record: %w", d.ID, err)
	}
	return nil
}

// drillFromRecord is the report of d as of now.
func drillFromRecord(d *store.Drill, now time.Time) (*v1alpha1.Drill, error) {
	var planned v1alpha1.DrillReport
	if err := json.Unmarshal(d.Planned, &planned); err != nil {
		return nil, fmt.Errorf("drill %d: stored plan: %w", d.ID, err)
	}
	var rec drill.Record
	if err := decodeRecord(d, &rec); err != nil {
		return nil, err
	}
	st := v1alpha1.DrillStatus{State: d.State, StartedBy: d.Actor, StartedAt: d.StartedAt, EndedAt: d.EndedAt,
		Planned: &planned, Runnables: rec.Runnables, Totals: drill.Totals(&rec), DurationSeconds: rec.DurationSeconds,
		PlannedDurationSeconds: planned.DurationSeconds, Cordoned: rec.Cordoned, End: rec.End, Message: rec.Message}
	if st.Runnables == nil {
		st.Runnables = []v1alpha1.DrillOutcome{}
	}
	if st.Cordoned == nil {
		st.Cordoned = []string{}
	}
	if st.DurationSeconds == 0 && d.State == store.DrillRunning {
		st.DurationSeconds = now.Sub(d.StartedAt).Round(10 * time.Millisecond).Seconds()
	}
	return &v1alpha1.Drill{Kind: v1alpha1.KindDrill,
		Metadata: v1alpha1.ObjectMeta{Name: d.Name(), CreationTimestamp: d.StartedAt, ResourceVersion: strconv.FormatInt(d.ResourceVersion, 10)},
		Spec:     v1alpha1.DrillSpec{Target: v1alpha1.DrillTarget{Kind: d.TargetKind, Name: d.TargetName}, Force: d.Force},
		Status:   st}, nil
}

// setCordon sets purser's maintenance taint of cluster name to effect
// ("" removes it) in tx: the cluster's row and audit entry as PUT
// /api/v1/clusters/{name} writes them when purser cordon or uncordon
// changes the taint, with about added to the details. It reports whether
// the taint changed; ErrNotFound when the cluster is not registered.
func (s *Server) setCordon(ctx context.Context, tx *store.Tx, u policy.User, name string, effect corev1.TaintEffect, why string, about map[string]any) (bool, error) {
	old, err := tx.Clusters().Get(ctx, name)
	if err != nil {
		return false, err
	}
	obj, err := clusterFromRecord(old)
	if err != nil {
		return false, err
	}
	taints, changed := v1alpha1.Cordon(obj.Spec.Taints, effect)
	if !changed {
		return false, nil
	}
	obj.Spec.Taints = taints
	rec, err := s.clusterRecord(obj, old)
	if err != nil {
		return false, err
	}
	if err := tx.Clusters().Update(ctx, rec); err != nil {
		return false, err
	}
	details := map[string]any{}
	if d, ok := clusterDetails(obj).(map[string]any); ok {
		details = d
	}
	for k, v := range about {
		details[k] = v
	}
	return true, appendAudit(ctx, tx, u, "update", v1alpha1.KindCluster, "", name,
		fmt.Sprintf("updated cluster %s (labels %s, %d taints): %s", name, formatLabels(rec.Labels), len(taints), why), "Updated", details)
}

// askMove asks a planned move of runnable ns/name to cluster to in tx,
// as POST .../move does (operate.Move), audited as u with about in the
// details and for says on whose behalf. refused is why the move cannot be
// asked (the runnable not Running, being moved, or the target unable to
// take it); err is any other failure, ErrNotFound when it is gone.
func (s *Server) askMove(ctx context.Context, tx *store.Tx, u policy.User, ns, name, to, forWhom string, about map[string]any) (move *v1alpha1.Move, refused string, err error) {
	rec, err := tx.Runnables().Get(ctx, ns, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, "the runnable was deleted", nil
	}
	if err != nil {
		return nil, "", err
	}
	cur, err := lifecycle.Decode(rec)
	if err != nil {
		return nil, "", err
	}
	var doc storedRunnable
	if err := json.Unmarshal(rec.Spec, &doc); err != nil {
		return nil, "", fmt.Errorf("runnable %s/%s: stored spec: %w", ns, name, err)
	}
	apiVersion, _ := doc.Spec.Template["apiVersion"].(string)
	kind, _ := doc.Spec.Template["kind"].(string)
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, "the runnable's template has no valid apiVersion", nil
	}
	attempts, err := tx.Attempts().List(ctx, rec.UID)
	if err != nil {
		return nil, "", err
	}
	cs, err := placementClusters(ctx, tx, ns, doc.Spec.DependsOn)
	if err != nil {
		return nil, "", err
	}
	t, err := operate.Move(cur, &doc.Spec, gv.WithKind(kind), attempts, to, cs, u.Name, s.now())
	var state *operate.StateError
	var ineligible *operate.IneligibleError
	switch {
	case errors.As(err, &state):
		return nil, state.Message, nil
	case errors.As(err, &ineligible):
		return nil, ineligible.Message, nil
	case err != nil:
		return nil, "", err
	}
	t.By, t.Actor = lifecycle.ByAPI, u.Name
	t.Message += " (for " + forWhom + ")"
	if t.Audit != nil {
		t.Audit.Summary += " (for " + forWhom + ")"
		if t.Audit.Details, err = json.Marshal(about); err != nil {
			return nil, "", err
		}
	}
	next, err := lifecycle.Apply(ctx, tx, cur, *t)
	if err != nil {
		return nil, "", err
	}
	return next.Status.Move, "", nil
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "no cluster"
	}
	return strings.Join(names, ", ")
}
