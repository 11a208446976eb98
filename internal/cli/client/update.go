package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"sigs.k8s.io/yaml"
)

// updateRunnable sends a changed spec of an existing runnable as PUT,
// against the resourceVersion read just before (unless the manifest names
// one, which then binds the change to what its author read). conflict is
// the submit's answer, returned when the runnable is gone meanwhile.
func (c *Client) updateRunnable(ctx context.Context, r Resource, ns, name string, body []byte, conflict error) (Applied, error) {
	out := Applied{Resource: r, Namespace: ns, Name: name}
	before, err := c.resourceVersion(ctx, r, ns, name)
	if err != nil {
		return out, err
	}
	if before == "" {
		return out, conflict
	}
	// Through JSON with json.Number, so that the template's integers
	// reach the API digit for digit.
	js, err := yaml.YAMLToJSON(body)
	if err != nil {
		return out, fmt.Errorf("read the runnable to update: %w", err)
	}
	var obj map[string]any
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	if err := dec.Decode(&obj); err != nil {
		return out, fmt.Errorf("read the runnable to update: %w", err)
	}
	md, _ := obj["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		obj["metadata"] = md
	}
	if rv, _ := md["resourceVersion"].(string); rv == "" {
		md["resourceVersion"] = before
	}
	data, err := json.Marshal(obj)
	if err != nil {
		return out, err
	}
	var ans answer
	if _, err := c.Do(ctx, http.MethodPut, r.Path(ns, name), nil, data, "application/json", &ans); err != nil {
		return out, err
	}
	out.Verb = changeVerb(before, ans.Metadata.ResourceVersion, VerbSubmitted)
	out.Detail = ans.Status.Phase
	return out, nil
}
