package printer

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"k8s.io/client-go/util/jsonpath"
	"sigs.k8s.io/yaml"
)

// Output formats of -o.
const (
	OutputTable    = ""
	OutputWide     = "wide"
	OutputYAML     = "yaml"
	OutputJSON     = "json"
	OutputName     = "name"
	OutputJSONPath = "jsonpath"
)

// Format is a parsed -o value.
type Format struct {
	Name     string // one of the Output constants
	template string // of jsonpath
	jp       *jsonpath.JSONPath
}

// ParseFormat reads -o: wide, yaml, json, name or jsonpath=TEMPLATE, of
// which a command offers those in allowed (the table is always offered).
func ParseFormat(s string, allowed ...string) (Format, error) {
	name, template, hasTemplate := strings.Cut(s, "=")
	if !slices.Contains(allowed, name) && name != OutputTable {
		return Format{}, fmt.Errorf("unknown output format %q: use %s", s, describeFormats(allowed))
	}
	f := Format{Name: name}
	if name != OutputJSONPath {
		if hasTemplate {
			return Format{}, fmt.Errorf("output format %s takes no template", name)
		}
		return f, nil
	}
	if template == "" {
		return Format{}, fmt.Errorf("-o jsonpath needs a template, as in -o jsonpath='{.items[*].metadata.name}'")
	}
	// kubectl prints nothing for a key an object lacks rather than
	// failing (its --allow-missing-template-keys defaults to true).
	f.template = template
	f.jp = jsonpath.New("output").AllowMissingKeys(true)
	if err := f.jp.Parse(template); err != nil {
		return Format{}, fmt.Errorf("-o jsonpath: %w", err)
	}
	return f, nil
}

func describeFormats(allowed []string) string {
	var parts []string
	for _, a := range allowed {
		if a == OutputJSONPath {
			a = "jsonpath=TEMPLATE"
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, ", ")
}

// Table reports whether the format is a table (plain or wide).
func (f Format) Table() bool { return f.Name == OutputTable || f.Name == OutputWide }

// Group is objects of one kind.
type Group struct {
	Kind  string
	Items []Object
}

// Print writes groups of objects in the format. single says that one object
// was asked for by name: yaml, json and jsonpath then see that object, and
// otherwise a List of every item, as kubectl builds one.
func (f Format) Print(w io.Writer, groups []Group, single bool, opts TableOptions) error {
	var all []Object
	for _, g := range groups {
		all = append(all, g.Items...)
	}
	var v any = ListOf(all)
	if single && len(all) == 1 {
		v = all[0]
	}
	switch f.Name {
	case OutputTable, OutputWide:
		opts.Wide = f.Name == OutputWide
		first := true
		for _, g := range groups {
			if len(g.Items) == 0 {
				continue
			}
			if !first {
				fmt.Fprintln(w)
			}
			first = false
			if err := Table(w, g.Kind, g.Items, opts); err != nil {
				return err
			}
		}
		return nil
	case OutputName:
		for _, o := range all {
			if _, err := fmt.Fprintln(w, Name(o)); err != nil {
				return err
			}
		}
		return nil
	case OutputJSONPath:
		return f.JSONPath(w, v)
	default:
		return Structured(w, f.Name, v)
	}
}

// ListOf is what kubectl prints for several objects: a List.
func ListOf(items []Object) Object {
	if items == nil {
		items = []Object{}
	}
	return Object{"apiVersion": "v1", "kind": "List", "items": items}
}

// Name is an object as `-o name` prints it, kind/name, which every command
// that takes KIND NAME also takes.
func Name(o Object) string {
	return strings.ToLower(Field(o, "kind")) + "/" + Field(o, "metadata", "name")
}

// JSONPath evaluates the template on v and ends the output with a newline.
func (f Format) JSONPath(w io.Writer, v any) error {
	if err := f.jp.Execute(w, plain(v)); err != nil {
		return fmt.Errorf("-o jsonpath=%s: %w", f.template, err)
	}
	_, err := fmt.Fprintln(w)
	return err
}

// Structured writes v as yaml or json.
func Structured(w io.Writer, format string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if format == OutputYAML {
		if data, err = yaml.JSONToYAML(data); err != nil {
			return err
		}
	} else {
		data = append(data, '\n')
	}
	_, err = w.Write(data)
	return err
}

// relaxed matches what kubectl accepts for --sort-by (and custom
// columns): {.a.b}, .a.b or a.b, all meaning {.a.b}. The rule is kubectl's
// RelaxedJSONPathExpression (k8s.io/kubectl/pkg/cmd/get/customcolumn.go).
var relaxed = regexp.MustCompile(`^\{\.?([^{}]+)\}$|^\.?([^{}]+)$`)

// RelaxedJSONPath turns a relaxed expression into a template.
func RelaxedJSONPath(expr string) (string, error) {
	m := relaxed.FindStringSubmatch(expr)
	if m == nil {
		return "", fmt.Errorf("%q is not a field path such as .metadata.name or {.status.phase}", expr)
	}
	path := m[1]
	if path == "" {
		path = m[2]
	}
	return "{." + path + "}", nil
}
