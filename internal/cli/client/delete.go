package client

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/purser-io/purser/api/v1alpha1"
)

// Delete deletes one object and says what became of it, in the line
// `purser delete` prints. A runnable that is still live is cancelled; one
// that has ended is removed (the server answers both with the runnable's
// state, so a read afterwards tells them apart).
func (c *Client) Delete(ctx context.Context, r Resource, ns, name string) (string, error) {
	ref := Applied{Resource: r, Namespace: ns, Name: name}.Ref()
	var out Object
	if _, err := c.Do(ctx, http.MethodDelete, r.Path(ns, name), nil, nil, "", &out); err != nil {
		return "", err
	}
	status, _ := out["status"].(map[string]any)
	phase, _ := status["phase"].(string)
	switch r.Kind {
	case v1alpha1.KindRunnable:
		_, err := c.Get(ctx, r, ns, name)
		if IsNotFound(err) {
			return fmt.Sprintf("%s deleted (it had ended: %s); its history stays in the audit log", ref, phase), nil
		}
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%s %s", ref, strings.ToLower(phase)), nil
	case v1alpha1.KindDeployable:
		if phase == string(v1alpha1.PhasePendingApproval) {
			return ref + " deletion waits for approval", nil
		}
		return ref + " deleted; it is being removed from every cluster", nil
	}
	return ref + " removed", nil
}
