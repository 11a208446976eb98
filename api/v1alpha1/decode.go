package v1alpha1

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"reflect"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Decode reads one purser object from a request body, JSON or YAML as
// contentType says (sniffed when empty), and returns a *Runnable,
// *Deployable or *Cluster according to its kind. Every error is a
// *DecodeError.
//
// Decoding is strict, unlike encoding/json: keys match field names
// case-sensitively, and unknown fields are refused by path, because a
// misspelt field that is silently dropped (say, failover) changes what
// purser does without telling anyone. spec.template and status.result are
// free-form.
func Decode(data []byte, contentType string) (any, error) {
	return decode(data, contentType, "")
}

// DecodeRunnable is Decode for an endpoint that takes only Runnables.
func DecodeRunnable(data []byte, contentType string) (*Runnable, error) {
	obj, err := decode(data, contentType, KindRunnable)
	if err != nil {
		return nil, err
	}
	return obj.(*Runnable), nil
}

// DecodeDeployable is Decode for an endpoint that takes only Deployables.
func DecodeDeployable(data []byte, contentType string) (*Deployable, error) {
	obj, err := decode(data, contentType, KindDeployable)
	if err != nil {
		return nil, err
	}
	return obj.(*Deployable), nil
}

// DecodeCluster is Decode for an endpoint that takes only Clusters.
func DecodeCluster(data []byte, contentType string) (*Cluster, error) {
	obj, err := decode(data, contentType, KindCluster)
	if err != nil {
		return nil, err
	}
	return obj.(*Cluster), nil
}

func decode(data []byte, contentType, wantKind string) (any, error) {
	js, derr := toJSON(data, contentType)
	if derr != nil {
		return nil, derr
	}

	// Read apiVersion and kind first: checking the rest of the body against
	// the schema of a kind it does not claim would only produce noise.
	var tm TypeMeta
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(js, &tm); err != nil {
		return nil, fromJSONError(err)
	}
	var problems FieldErrors
	if tm.APIVersion != GroupVersion {
		problems = append(problems, FieldError{Field: "apiVersion", Message: "must be " + GroupVersion})
	}
	var obj any
	switch {
	case wantKind != "" && tm.Kind != wantKind:
	case tm.Kind == KindRunnable:
		obj = &Runnable{}
	case tm.Kind == KindDeployable:
		obj = &Deployable{}
	case tm.Kind == KindCluster:
		obj = &Cluster{}
	case tm.Kind == KindQuota:
		obj = &Quota{}
	case tm.Kind == KindSchedule:
		obj = &Schedule{}
	case tm.Kind == KindTrigger:
		obj = &Trigger{}
	case tm.Kind == KindPlacementPolicy, tm.Kind == KindClusterPlacementPolicy:
		obj = &PlacementPolicy{}
	}
	if obj == nil {
		allowed := wantKind
		if allowed == "" {
			allowed = "Runnable, Deployable, Cluster, Quota, Schedule, Trigger, PlacementPolicy or ClusterPlacementPolicy"
		}
		problems = append(problems, FieldError{Field: "kind", Message: "must be " + allowed})
	}
	if len(problems) > 0 {
		return nil, newDecodeError(false, problems)
	}

	strictErrs, err := sigsjson.UnmarshalStrict(js, obj)
	if err != nil {
		return nil, fromJSONError(err)
	}
	if len(strictErrs) > 0 {
		return nil, fromStrictErrors(strictErrs)
	}
	if derr := normalize(obj); derr != nil {
		return nil, derr
	}
	return obj, nil
}

// toJSON returns the body as the JSON text of one object.
func toJSON(data []byte, contentType string) ([]byte, *DecodeError) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, malformed("", "the body is empty; send one purser object")
	}
	isJSON, err := isJSONMedia(contentType, trimmed)
	if err != nil {
		return nil, malformed("", "%v", err)
	}
	if !isJSON {
		doc, derr := singleYAMLDocument(data)
		if derr != nil {
			return nil, derr
		}
		// Measured before the aliases are expanded, which is what would
		// cost the memory and the time.
		if n, err := expandedSize(doc, MaxObjectBytes); err != nil {
			return nil, malformed("", "invalid YAML: %v", err)
		} else if n > MaxObjectBytes {
			return nil, tooLarge(n, true)
		}
		if trimmed, err = yaml.YAMLToJSONStrict(doc); err != nil {
			return nil, malformed("", "invalid YAML: %v", err)
		}
	}
	if trimmed[0] != '{' {
		return nil, malformed("", "the body must be one object with apiVersion and kind")
	}
	if len(trimmed) > MaxObjectBytes {
		return nil, tooLarge(len(trimmed), false)
	}
	if depth := nesting(trimmed); depth > MaxNesting {
		return nil, newDecodeError(false, FieldErrors{{Field: "spec.template", Message: fmt.Sprintf(
			"nests objects and lists %d levels deep; at most %d are accepted, far more than any Kubernetes object needs", depth, MaxNesting)}})
	}
	return trimmed, nil
}

// MaxNesting bounds how deep objects and lists may nest in a request
// body. The JSON decoder would take 10,000 levels (k8s.io/apimachinery's
// util/json and sigs.k8s.io/json stop there); every later walk of a
// template (normalizing, hashing, redacting, failover mutations) recurses
// per level, and no real object comes near this.
const MaxNesting = 100

// nesting returns how deep objects and arrays nest in the JSON text js,
// without decoding it.
func nesting(js []byte) int {
	depth, deepest, inString, escaped := 0, 0, false, false
	for _, c := range js {
		switch {
		case inString && escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case inString && c == '"':
			inString = false
		case inString:
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}

func isJSONMedia(contentType string, body []byte) (bool, error) {
	if contentType == "" {
		// A YAML flow mapping also starts with '{'; only valid JSON takes
		// the JSON path, whose error messages are the more precise.
		return body[0] == '{' && json.Valid(body), nil
	}
	mediaType, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false, errors.New("unreadable Content-Type; use application/json or application/yaml")
	}
	switch {
	case mediaType == "application/json" || strings.HasSuffix(mediaType, "+json"):
		return true, nil
	case mediaType == "application/yaml" || mediaType == "application/x-yaml" ||
		mediaType == "text/yaml" || mediaType == "text/x-yaml" || strings.HasSuffix(mediaType, "+yaml"):
		return false, nil
	}
	return false, errors.New("unsupported Content-Type " + mediaType + "; use application/json or application/yaml")
}

// singleYAMLDocument refuses a multi-document stream, which the YAML
// parser would otherwise cut to its first document without a word. It
// splits on "---" the way kubectl and the purser CLI do, and also catches a
// document that follows an end marker ("...").
func singleYAMLDocument(data []byte) ([]byte, *DecodeError) {
	const several = "the body holds several YAML documents; send one object per request"
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var found []byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, malformed("", "invalid YAML: %v", err)
		}
		docs := yamlDocuments(doc)
		if docs == 0 {
			continue
		}
		if found != nil || docs > 1 {
			return nil, malformed("", several)
		}
		found = doc
	}
	if found == nil {
		return nil, malformed("", "the body holds no YAML document; send one purser object")
	}
	return found, nil
}

// yamlDocuments counts the documents with content in text that holds no
// "---" separator: 0 if it is only comments and directives, more than 1 if
// content follows a "..." end marker.
func yamlDocuments(text []byte) int {
	count, open := 0, false
	for line := range bytes.Lines(text) {
		if isYAMLMarker(line, "...") {
			open = false
			continue
		}
		trimmed := bytes.TrimSpace(line)
		if len(trimmed) == 0 || trimmed[0] == '#' || (!open && line[0] == '%') {
			continue
		}
		if !open {
			count++
			open = true
		}
	}
	return count
}

// isYAMLMarker reports whether line is marker at column 0, alone or
// followed by a space or comment.
func isYAMLMarker(line []byte, marker string) bool {
	rest, ok := bytes.CutPrefix(line, []byte(marker))
	return ok && (len(bytes.TrimSpace(rest)) == 0 || rest[0] == ' ' || rest[0] == '\t')
}

func fromJSONError(err error) *DecodeError {
	if ok, offset := sigsjson.SyntaxErrorOffset(err); ok {
		return malformed("", "invalid JSON at byte %d: %v", offset, err)
	}
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		if typeErr.Field == "" {
			return malformed("", "the body must be one object with apiVersion and kind")
		}
		return invalid(typeErr.Field, "must be %s, not %s", describeType(typeErr.Type), typeErr.Value)
	}
	var timeErr *time.ParseError
	if errors.As(err, &timeErr) {
		return invalid("", "%q is not a time; write times in RFC 3339, like 2026-12-01T06:00:00Z", strings.Trim(timeErr.Value, `"`))
	}
	// The remaining errors come from the UnmarshalJSON methods of embedded
	// Kubernetes types (times, quantities), which do not know the field.
	return invalid("", "%v", err)
}

func describeType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeFor[time.Time]() {
		return "an RFC 3339 time"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "a list"
	}
	return "a " + t.String()
}

// fromStrictErrors turns the unknown and duplicate fields found by the
// strict decoder into one error. A duplicate key makes the body ambiguous,
// so it is malformed; an unknown field is a body that reads fine but does not
// fit the schema.
func fromStrictErrors(errs []error) *DecodeError {
	details := make(FieldErrors, 0, len(errs))
	isMalformed := false
	for _, err := range errs {
		var fe sigsjson.FieldError
		if !errors.As(err, &fe) {
			details = append(details, FieldError{Message: err.Error()})
			continue
		}
		msg := "unknown field"
		if strings.HasPrefix(fe.Error(), "duplicate field") {
			msg = "duplicate field"
			isMalformed = true
		}
		details = append(details, FieldError{Field: fe.FieldPath(), Message: msg})
	}
	return newDecodeError(isMalformed, details)
}

// normalize gives each value the one form it has after being stored and
// read back, so that a decoded object equals itself after a round trip and
// a spec hashes the same before and after. Free-form numbers: 3.0 is
// written back as 3, so whole numbers become int64, which is also what
// readers such as unstructured.NestedInt64 expect. Times: see utcTimes.
func normalize(obj any) *DecodeError {
	var times []timeField
	switch o := obj.(type) {
	case *Runnable:
		normalizeMap(o.Spec.Template)
		normalizeMap(o.Status.Result)
		times = append(times,
			timeField{"metadata.creationTimestamp", &o.Metadata.CreationTimestamp},
			timeField{"spec.deadline", o.Spec.Deadline},
			timeField{"status.endedAt", o.Status.EndedAt},
			timeField{"status.removeAfter", o.Status.RemoveAfter})
		if c := o.Status.ConfirmedStopped; c != nil {
			times = append(times, timeField{"status.confirmedStopped.at", &c.At})
		}
		for i := range o.Status.Attempts {
			a := &o.Status.Attempts[i]
			times = append(times,
				timeField{fmt.Sprintf("status.attempts[%d].startedAt", i), a.StartedAt},
				timeField{fmt.Sprintf("status.attempts[%d].endedAt", i), a.EndedAt})
		}
	case *Schedule:
		normalizeMap(o.Spec.Template.Template)
		times = append(times,
			timeField{"metadata.creationTimestamp", &o.Metadata.CreationTimestamp},
			timeField{"spec.template.deadline", o.Spec.Template.Deadline},
			timeField{"status.lastScheduleTime", o.Status.LastScheduleTime},
			timeField{"status.nextScheduleTime", o.Status.NextScheduleTime})
	case *Deployable:
		normalizeMap(o.Spec.Template)
		times = append(times, timeField{"metadata.creationTimestamp", &o.Metadata.CreationTimestamp})
		for i := range o.Status.Clusters {
			times = append(times, timeField{fmt.Sprintf("status.clusters[%d].lastSyncedAt", i), o.Status.Clusters[i].LastSyncedAt})
		}
	case *Cluster:
		times = append(times, timeField{"metadata.creationTimestamp", &o.Metadata.CreationTimestamp})
		times = append(times, taintTimes("spec.taints", o.Spec.Taints)...)
		times = append(times, taintTimes("status.taints", o.Status.Taints)...)
		for i := range o.Status.Conditions {
			times = append(times, timeField{fmt.Sprintf("status.conditions[%d].lastTransitionTime", i), &o.Status.Conditions[i].LastTransitionTime})
		}
		if a := o.Status.Agent; a != nil {
			times = append(times,
				timeField{"status.agent.lastHeartbeat", a.LastHeartbeat},
				timeField{"status.agent.lastSnapshot", a.LastSnapshot},
				timeField{"status.agent.lastEvent", a.LastEvent})
		}
	}
	if derr := utcTimes(times); derr != nil {
		return derr
	}
	if c, ok := obj.(*Cluster); ok {
		dropZeroTaintTimes(c.Spec.Taints)
		dropZeroTaintTimes(c.Status.Taints)
	}
	return nil
}

type timeField struct {
	path string
	t    *time.Time // nil when the field is unset
}

// utcTimes moves every time to UTC, the one zone purser stores and returns.
// A time that UTC cannot write back as RFC 3339 (a year outside 0000-9999,
// as "0000-01-01T00:00:00+01:00" gives) is refused here rather than
// stored and then found unreadable.
func utcTimes(times []timeField) *DecodeError {
	for _, f := range times {
		if f.t == nil {
			continue
		}
		utc := f.t.UTC()
		if y := utc.Year(); y < 0 || y > 9999 {
			return invalid(f.path, "must lie between years 0000 and 9999 in UTC")
		}
		*f.t = utc
	}
	return nil
}

// taintTimes also cuts timeAdded to the second, since metav1.Time, the
// Kubernetes type it has, is written to the second.
func taintTimes(field string, taints []corev1.Taint) []timeField {
	var times []timeField
	for i := range taints {
		if t := taints[i].TimeAdded; t != nil {
			t.Time = t.Truncate(time.Second)
			times = append(times, timeField{fmt.Sprintf("%s[%d].timeAdded", field, i), &t.Time})
		}
	}
	return times
}

// dropZeroTaintTimes unsets a zero timeAdded, which metav1.Time writes as
// null.
func dropZeroTaintTimes(taints []corev1.Taint) {
	for i := range taints {
		if t := taints[i].TimeAdded; t != nil && t.IsZero() {
			taints[i].TimeAdded = nil
		}
	}
}

func normalizeMap(m map[string]any) {
	for k, v := range m {
		m[k] = normalizeValue(v)
	}
}

func normalizeValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		normalizeMap(x)
	case []any:
		for i := range x {
			x[i] = normalizeValue(x[i])
		}
	case float64:
		// The bounds, -2^63 inclusive and 2^63 exclusive, are exact in
		// float64; outside them int64 would overflow.
		if x >= -(1<<63) && x < 1<<63 && x == math.Trunc(x) {
			return int64(x)
		}
	}
	return v
}
