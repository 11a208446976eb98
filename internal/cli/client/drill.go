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
