package failover

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"strings"

	"k8s.io/client-go/util/jsonpath"

	"github.com/purser-io/purser/api/v1alpha1"
)

// Preserve extracts each rule's jsonPath from status (the last observed
// .status of the attempt being left) and returns the preserved state of
// the next attempt: the newest extracted value wins, and a rule that finds
// nothing this time keeps the value an earlier failover preserved, so a
// job id survives a second failover of an attempt that never reported
// one. The notes say, per rule that found nothing, why.
func Preserve(rules []v1alpha1.StatePreservationRule, status map[string]any, previous map[string]string) (map[string]string, []string) {
	out := maps.Clone(previous)
	if out == nil {
		out = map[string]string{}
	}
	var notes []string
	for _, r := range rules {
		v, err := extract(r.JSONPath, status)
		if err != nil {
			kept := ""
			if old, ok := previous[r.AliasLabelName]; ok {
				kept = fmt.Sprintf("; keeping %q from before", old)
			}
			notes = append(notes, fmt.Sprintf("%s: %v%s", r.AliasLabelName, err, kept))
			continue
		}
		out[r.AliasLabelName] = v
	}
	if len(out) == 0 {
		return nil, notes
	}
	return out, notes
}

// extract evaluates a client-go JSONPath expression against status and
// returns its single, non-empty result as a string.
func extract(expr string, status map[string]any) (string, error) {
	if status == nil {
		return "", fmt.Errorf("no status was observed")
	}
	jp := jsonpath.New("statePreservation")
	if err := jp.Parse(expr); err != nil {
		return "", fmt.Errorf("jsonPath %s does not parse: %w", expr, err)
	}
	results, err := jp.FindResults(status)
	if err != nil {
		return "", fmt.Errorf("%s not found in the last observed status", expr)
	}
	var values []string
	for _, set := range results {
		for _, r := range set {
			if !r.IsValid() || (r.Kind() == reflect.Interface && r.IsNil()) {
				continue
			}
			s, err := valueString(r.Interface())
			if err != nil {
				return "", err
			}
			values = append(values, s)
		}
	}
	switch {
	case len(values) == 0 || (len(values) == 1 && values[0] == ""):
		return "", fmt.Errorf("%s is empty in the last observed status", expr)
	case len(values) > 1:
		return "", fmt.Errorf("%s gives %d values, not one", expr, len(values))
	}
	return values[0], nil
}

func valueString(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case json.Number:
		return x.String(), nil
	case bool, float64, int64, int:
		return fmt.Sprint(x), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}
