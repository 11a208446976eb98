package attempt

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"k8s.io/client-go/util/jsonpath"

	"github.com/purser-io/purser/api/v1alpha1"
)

// Carry is what an attempt being left hands to the next one, and what it
// reported, for its record.
type Carry struct {
	Preserved    map[string]string
	RestorePoint *v1alpha1.RestorePoint
	// Reported is what the attempt reported: each rule's value and, under
	// RestorePathKey, the restore point it wrote.
	Reported map[string]string
	// Notes say, per value, why it was not carried on.
	Notes []string
}

// Preserve decides what the attempt number (whose last observed status
// is status) carries to the next one. Only proven state travels: an
// attempt that never ran Healthy (proven false) carries nothing it
// reported, since a job that never ran has no state worth restoring (a
// new job id with no checkpoints replacing the one that had them is the
// loss Karmada #6232 describes); the earlier values are kept and the
// notes say why. A proven attempt's values replace the earlier ones, a
// rule that finds nothing keeps the earlier value, and a restore point
// replaces the earlier one only when it is newer. candidates are the
// restore points the attempt wrote, from wherever they were found.
func Preserve(rules []v1alpha1.StatePreservationRule, status map[string]any, previous map[string]string,
	previousPoint *v1alpha1.RestorePoint, candidates []v1alpha1.RestorePoint, number int, proven bool) Carry {
	c := Carry{Preserved: maps.Clone(previous), RestorePoint: previousPoint, Reported: map[string]string{}}
	if c.Preserved == nil {
		c.Preserved = map[string]string{}
	}
	extracted := map[string]string{}
	for _, r := range rules {
		v, err := extract(r.JSONPath, status)
		if err != nil {
			if proven {
				kept := ""
				if old, ok := previous[r.AliasLabelName]; ok {
					kept = fmt.Sprintf("; keeping %q from before", old)
				}
				c.Notes = append(c.Notes, fmt.Sprintf("%s: %v%s", r.AliasLabelName, err, kept))
			}
			continue
		}
		extracted[r.AliasLabelName] = v
		c.Reported[r.AliasLabelName] = v
	}
	newest := newestPoint(candidates)
	if newest != nil {
		c.Reported[RestorePathKey] = newest.Path
	}
	if !proven {
		what := "nothing"
		if len(c.Reported) > 0 {
			what = PreservedString(c.Reported)
		}
		kept := "nothing"
		if len(previous) > 0 || previousPoint != nil {
			kept = keptString(previous, previousPoint)
		}
		c.Notes = append(c.Notes, fmt.Sprintf("attempt %d never ran Healthy, so what it reported (%s) is not carried; keeping %s", number, what, kept))
	} else {
		maps.Copy(c.Preserved, extracted)
		switch {
		case newest == nil:
		case previousPoint != nil && previousPoint.TakenAt != nil && (newest.TakenAt == nil || !newest.TakenAt.After(*previousPoint.TakenAt)):
			c.Notes = append(c.Notes, fmt.Sprintf("restore point %s is not newer than %s; keeping it", newest.Path, previousPoint.Path))
		default:
			p := *newest
			p.Attempt = number
			c.RestorePoint = &p
		}
	}
	if len(c.Preserved) == 0 {
		c.Preserved = nil
	}
	if len(c.Reported) == 0 {
		c.Reported = nil
	}
	return c
}

// newestPoint is the candidate completed last; one without a time loses
// to any with one.
func newestPoint(candidates []v1alpha1.RestorePoint) *v1alpha1.RestorePoint {
	var best *v1alpha1.RestorePoint
	for i := range candidates {
		p := &candidates[i]
		if p.Path == "" {
			continue
		}
		if best == nil || (p.TakenAt != nil && (best.TakenAt == nil || p.TakenAt.After(*best.TakenAt))) {
			best = p
		}
	}
	return best
}

func keptString(p map[string]string, point *v1alpha1.RestorePoint) string {
	parts := []string{}
	if len(p) > 0 {
		parts = append(parts, PreservedString(p))
	}
	if point != nil {
		parts = append(parts, "restore point "+point.Path)
	}
	return strings.Join(parts, " and ")
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

// PreservedString renders preserved values for messages, sorted by name:
// "a=1, b=2".
func PreservedString(p map[string]string) string {
	keys := slices.Sorted(maps.Keys(p))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + p[k]
	}
	return strings.Join(parts, ", ")
}
