package health

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode"

	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/purser-io/purser/api/v1alpha1"
)

// EvaluateFile is `purser health -f FILE`: it judges every object in the
// YAML or JSON file at path and writes one line per object to w (see
// Evaluate).
func EvaluateFile(w io.Writer, path string, interp *Interpreter) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := Evaluate(w, f, interp); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// Evaluate judges every object in r, YAML documents separated by `---` (or
// JSON), where a document may also be a List whose items are the objects.
// For each it writes
//
//	<kind>/<name> <Healthy|Unhealthy|Unknown> <phase> <message>
//
// so that the same file gives the same lines the ingester would store. A
// document that cannot be read is reported by its number (counting only
// documents with content, as a reader counts them) and the rest are still
// judged: one typo should not hide the verdicts on everything else. The
// error joins every such problem.
func Evaluate(w io.Writer, r io.Reader, interp *Interpreter) error {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(r))
	var errs []error
	doc := 0
	for {
		chunk, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return errors.Join(append(errs, fmt.Errorf("after document %d: %w", doc, err))...)
		}
		data, err := yaml.YAMLToJSON(chunk)
		if err == nil && isEmptyDocument(data) {
			continue
		}
		doc++
		if err != nil {
			errs = append(errs, fmt.Errorf("document %d: not valid YAML: %w", doc, err))
			continue
		}
		objs, err := objectsOf(data)
		if err != nil {
			errs = append(errs, fmt.Errorf("document %d: %w", doc, err))
			continue
		}
		for _, obj := range objs {
			res, err := judge(interp, obj)
			if err != nil {
				errs = append(errs, fmt.Errorf("document %d: %w", doc, err))
				continue
			}
			if _, err := io.WriteString(w, line(obj, res)); err != nil {
				return err
			}
		}
	}
	return errors.Join(errs...)
}

// judge interprets one object. A purser Runnable or Deployable (say, the
// output of `purser get runnable X -o yaml`) has no health of its own: its
// template is judged, with the status the runnable last observed
// (status.result) when it has one, as the ingester judges the object on
// its cluster; the message says so.
func judge(interp *Interpreter, obj map[string]any) (Result, error) {
	kind := str(obj, "kind")
	if str(obj, "apiVersion") != v1alpha1.GroupVersion || (kind != v1alpha1.KindRunnable && kind != v1alpha1.KindDeployable) {
		return interp.Interpret(obj), nil
	}
	spec, _ := obj["spec"].(map[string]any)
	template, _ := spec["template"].(map[string]any)
	if str(template, "kind") == "" || str(template, "apiVersion") == "" {
		return Result{}, fmt.Errorf("%s %s has no spec.template with apiVersion and kind to judge", kind, str(obj, "metadata", "name"))
	}
	judged := make(map[string]any, len(template)+1)
	for k, v := range template {
		judged[k] = v
	}
	what := "its template, a " + str(template, "apiVersion") + " " + str(template, "kind")
	if st, _ := obj["status"].(map[string]any); st != nil {
		if result, ok := st["result"].(map[string]any); ok {
			judged["status"] = result
			what += ", with the status it last observed"
		} else {
			what += ", not yet observed"
		}
	}
	res := interp.Interpret(judged)
	res.Message = strings.TrimSpace("judged " + what + ": " + res.Message)
	return res, nil
}

// isEmptyDocument reports a document with nothing but comments or blank
// lines, such as what precedes a leading `---`.
func isEmptyDocument(data []byte) bool {
	data = bytes.TrimSpace(data)
	return len(data) == 0 || string(data) == "null"
}

// objectsOf decodes one document into the objects to judge: itself, or the
// items of a List.
func objectsOf(data []byte) ([]map[string]any, error) {
	var v any
	// apimachinery's decoder keeps whole numbers as int64, as the
	// Unstructured objects the ingester judges hold them.
	if err := utiljson.Unmarshal(data, &v); err != nil {
		return nil, err
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("not a Kubernetes object but %s", describeJSON(v))
	}
	kind, apiVersion := str(obj, "kind"), str(obj, "apiVersion")
	items, isList := obj["items"].([]any)
	if !strings.HasSuffix(kind, "List") || !isList {
		if kind == "" || apiVersion == "" {
			return nil, errors.New("not a Kubernetes object: apiVersion and kind are required")
		}
		return []map[string]any{obj}, nil
	}
	// `kubectl get -o yaml` writes kind: List with complete items; the API
	// itself answers JobList and the like, whose items leave out the kind
	// and apiVersion the list already says.
	itemKind := strings.TrimSuffix(kind, "List")
	objs := make([]map[string]any, 0, len(items))
	for i, it := range items {
		item, ok := it.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("items[%d]: not a Kubernetes object but %s", i, describeJSON(it))
		}
		if kind != "List" {
			if str(item, "kind") == "" {
				item["kind"] = itemKind
			}
			if str(item, "apiVersion") == "" {
				item["apiVersion"] = apiVersion
			}
		}
		if str(item, "kind") == "" || str(item, "apiVersion") == "" {
			return nil, fmt.Errorf("items[%d]: not a Kubernetes object: apiVersion and kind are required", i)
		}
		objs = append(objs, item)
	}
	return objs, nil
}

// line renders one verdict as API.md specifies. The message is already on
// one line (Interpret makes sure), so the line stays one record for grep
// and awk.
func line(obj map[string]any, res Result) string {
	name := str(obj, "metadata", "name")
	if name == "" {
		name = str(obj, "metadata", "generateName")
	}
	if name == "" {
		name = "<none>"
	}
	// "-" keeps the columns of a health or phase the object does not have.
	h, p := string(res.Health), res.Phase
	if h == "" {
		h = "-"
	}
	if p == "" {
		p = "-"
	}
	s := fmt.Sprintf("%s/%s %s %s %s", oneWord(str(obj, "kind")), oneWord(name), h, p, res.Message)
	return strings.TrimRight(s, " ") + "\n"
}

// oneWord keeps a kind or name from a file in its column: Kubernetes
// forbids spaces in both, but a hand-written file may not.
func oneWord(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return '?'
		}
		return r
	}, s)
}

func describeJSON(v any) string {
	switch v.(type) {
	case []any:
		return "a list"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return "a number"
}
