package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/purser-io/purser/api/v1alpha1"
)

// DrillDryRun asks the what-if of losing target (POST /api/v1/drills,
// dryRun) and returns the report. raw is the answer as the API gave it,
// for -o json and yaml.
func (c *Client) DrillDryRun(ctx context.Context, target v1alpha1.DrillTarget) (rep *v1alpha1.DrillReport, raw map[string]any, err error) {
	body, err := json.Marshal(map[string]any{"target": target, "dryRun": true})
	if err != nil {
		return nil, nil, err
	}
	var msg json.RawMessage
	if _, err := c.Do(ctx, http.MethodPost, "/api/v1/drills", url.Values{"dryRun": {"All"}}, body, "application/json", &msg); err != nil {
		return nil, nil, err
	}
	if err := json.Unmarshal(msg, &rep); err != nil {
		return nil, nil, err
	}
	if err := json.Unmarshal(msg, &raw); err != nil {
		return nil, nil, err
	}
	return rep, raw, nil
}

// StartDrill starts a real drill of losing target (POST /api/v1/drills);
// force starts it although the what-if's verdict is not Absorbed.
func (c *Client) StartDrill(ctx context.Context, target v1alpha1.DrillTarget, force bool) (*v1alpha1.Drill, error) {
	body, err := json.Marshal(v1alpha1.DrillRequest{Target: target, Force: force})
	if err != nil {
		return nil, err
	}
	var d v1alpha1.Drill
	if _, err := c.Do(ctx, http.MethodPost, "/api/v1/drills", nil, body, "application/json", &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// GetDrill reads drill id's report; raw is the answer as the API gave
// it, for -o json and yaml.
func (c *Client) GetDrill(ctx context.Context, id string) (d *v1alpha1.Drill, raw map[string]any, err error) {
	var msg json.RawMessage
	if _, err := c.Do(ctx, http.MethodGet, "/api/v1/drills/"+url.PathEscape(id), nil, nil, "", &msg); err != nil {
		return nil, nil, err
	}
	if err := json.Unmarshal(msg, &d); err != nil {
		return nil, nil, err
	}
	if err := json.Unmarshal(msg, &raw); err != nil {
		return nil, nil, err
	}
	return d, raw, nil
}

// ListDrills lists the drills, newest first (every page).
func (c *Client) ListDrills(ctx context.Context) ([]v1alpha1.Drill, error) {
	var out []v1alpha1.Drill
	q := url.Values{}
	for {
		var page struct {
			Items    []v1alpha1.Drill `json:"items"`
			Continue string           `json:"continue"`
		}
		if _, err := c.Do(ctx, http.MethodGet, "/api/v1/drills", q, nil, "", &page); err != nil {
			return nil, err
		}
		out = append(out, page.Items...)
		if page.Continue == "" {
			return out, nil
		}
		q.Set("continue", page.Continue)
	}
}

// EndDrill ends drill id (POST /api/v1/drills/{id}/end): its clusters
// uncordoned and, with moveBack, the work it moved asked back.
func (c *Client) EndDrill(ctx context.Context, id string, moveBack bool) (*v1alpha1.Drill, error) {
	body, err := json.Marshal(v1alpha1.DrillEndRequest{MoveBack: moveBack})
	if err != nil {
		return nil, err
	}
	var d v1alpha1.Drill
	if _, err := c.Do(ctx, http.MethodPost, "/api/v1/drills/"+url.PathEscape(id)+"/end", nil, body, "application/json", &d); err != nil {
		return nil, err
	}
	return &d, nil
}
