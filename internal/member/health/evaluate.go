package health

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/cli/manifest"
	"github.com/purser-io/purser/internal/platform/fields"
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
	return evaluate(w, f, path, interp)
}

// Evaluate judges every object in r, YAML documents separated by `---` (or
// JSON), where a document may also be a List whose items are the objects;
// they are read as `purser apply` reads its files (internal/cli/manifest). For
// each it writes
//
//	<kind>/<name> <Healthy|Unhealthy|Unknown> <phase> <message>
//
// so that the same file gives the same lines the ingester would store. A
// document that cannot be read is reported by its number (counting only
// documents with content, as a reader counts them) and the rest are still
// judged: one typo should not hide the verdicts on everything else. The
// error joins every such problem.
func Evaluate(w io.Writer, r io.Reader, interp *Interpreter) error {
	return evaluate(w, r, "<stdin>", interp)
}

func evaluate(w io.Writer, r io.Reader, source string, interp *Interpreter) error {
	objs, err := manifest.Decode(r, source)
	errs := []error{err}
	for _, o := range objs {
		if o.Str("apiVersion") == "" {
			errs = append(errs, fmt.Errorf("%s: not a Kubernetes object: apiVersion and kind are required", o.Where()))
			continue
		}
		res, err := judge(interp, o.Fields)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", o.Where(), err))
			continue
		}
		if _, err := io.WriteString(w, line(o.Fields, res)); err != nil {
			return err
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
	kind := fields.String(obj, "kind")
	if fields.String(obj, "apiVersion") != v1alpha1.GroupVersion || (kind != v1alpha1.KindRunnable && kind != v1alpha1.KindDeployable) {
		return interp.Interpret(obj), nil
	}
	spec, _ := obj["spec"].(map[string]any)
	template, _ := spec["template"].(map[string]any)
	if fields.String(template, "kind") == "" || fields.String(template, "apiVersion") == "" {
		return Result{}, fmt.Errorf("%s %s has no spec.template with apiVersion and kind to judge", kind, fields.String(obj, "metadata", "name"))
	}
	judged := make(map[string]any, len(template)+1)
	for k, v := range template {
		judged[k] = v
	}
	what := "its template, a " + fields.String(template, "apiVersion") + " " + fields.String(template, "kind")
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

// line renders one verdict as docs/api.md specifies. The message is already on
// one line (Interpret makes sure), so the line stays one record for grep
// and awk.
func line(obj map[string]any, res Result) string {
	name := fields.String(obj, "metadata", "name")
	if name == "" {
		name = fields.String(obj, "metadata", "generateName")
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
	s := fmt.Sprintf("%s/%s %s %s %s", oneWord(fields.String(obj, "kind")), oneWord(name), h, p, res.Message)
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
