// Package manifest reads the objects a user hands the command line with
// -f: files, folders (and with -R their subfolders), standard input; each
// a stream of YAML documents or JSON values, where a document may also be
// a List of objects. Every object keeps where it came from (file and
// document number), so that a message about it points at the text to fix,
// and every problem in the input is reported, not only the first.
package manifest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Stdin is the name that reads standard input, as for kubectl.
const Stdin = "-"

// Content types of Object.Body.
const (
	ContentYAML = "application/yaml"
	ContentJSON = "application/json"
)

// Object is one object of the input.
type Object struct {
	// Source is the file it was read from, or "<stdin>".
	Source string
	// Document is its document's number in Source, counting from 1 the
	// documents that hold something (a leading "---" or a document of
	// comments only is not counted), as a reader of the file counts them.
	Document int
	// Item is its index in the items of a List document, or -1.
	Item int
	// Body is the object as written (a YAML document keeps its comments
	// and the server's strict decoder sees its duplicate keys), or as
	// JSON when it was an item of a List; ContentType says which.
	Body        []byte
	ContentType string
	// Fields is the object decoded, whole numbers as int64 as in
	// Kubernetes' unstructured objects.
	Fields map[string]any
}

// Where says where the object is written: "a.yaml, document 2", with the
// item of a List when it is one.
func (o *Object) Where() string {
	s := fmt.Sprintf("%s, document %d", o.Source, o.Document)
	if o.Item >= 0 {
		s += fmt.Sprintf(", items[%d]", o.Item)
	}
	return s
}

// Str reads a string field of the object such as ("metadata", "name"); ""
// when it is missing or not a string.
func (o *Object) Str(path ...string) string {
	v, _, _ := unstructured.NestedFieldNoCopy(o.Fields, path...)
	s, _ := v.(string)
	return s
}

// Kind is the object's kind.
func (o *Object) Kind() string { return o.Str("kind") }

// Name is the object's metadata.name.
func (o *Object) Name() string { return o.Str("metadata", "name") }

// Namespace is the object's metadata.namespace.
func (o *Object) Namespace() string { return o.Str("metadata", "namespace") }

// Config change how Read finds its input.
type Config struct {
	// Recursive also reads the subfolders of a folder (kubectl's -R).
	Recursive bool
	// Stdin is what "-" reads; nil: os.Stdin.
	Stdin io.Reader
}

// Extensions are the files a folder is read for, as kubectl reads them.
var Extensions = []string{".json", ".yaml", ".yml"}

// Read reads every object of paths, in order: a file, a folder's files of
// the Extensions in lexical order, or "-" for standard input. It reads
// everything before returning, and returns every problem found (each with
// its file and document) joined in one error, so that nothing is applied
// from input that is partly wrong.
func Read(paths []string, opts Config) ([]*Object, error) {
	if len(paths) == 0 {
		return nil, errors.New("no input: give -f FILE, -f DIR or -f - for standard input")
	}
	var files []string
	stdinSeen := false
	for _, p := range paths {
		if p == Stdin {
			if stdinSeen {
				return nil, errors.New("-f - is given twice; standard input can be read once")
			}
			stdinSeen = true
			files = append(files, p)
			continue
		}
		found, err := expand(p, opts.Recursive)
		if err != nil {
			return nil, err
		}
		files = append(files, found...)
	}
	var objs []*Object
	var errs []error
	for _, f := range files {
		got, err := readOne(f, opts.Stdin)
		objs = append(objs, got...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return objs, nil
}

func readOne(path string, stdin io.Reader) ([]*Object, error) {
	if path == Stdin {
		if stdin == nil {
			stdin = os.Stdin
		}
		return Decode(stdin, "<stdin>")
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Decode(f, path)
}

// expand lists the files a path names: itself, or the files of a folder.
func expand(path string, recursive bool) ([]string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return []string{path}, nil
	}
	var files []string
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != path && !recursive {
				return filepath.SkipDir
			}
			return nil
		}
		if slices.Contains(Extensions, strings.ToLower(filepath.Ext(p))) {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		hint := ""
		if !recursive {
			hint = " (add -R to read its subfolders)"
		}
		return nil, fmt.Errorf("%s holds no %s file%s", path, strings.Join(Extensions, ", "), hint)
	}
	return files, nil
}

// Decode reads the objects of one stream, named source in messages. It
// uses apimachinery's readers, as kubectl does: GuessJSONStream tells a
// JSON stream from YAML, and the YAML reader cuts documents at "---". A
// YAML document that does not parse is reported and the next one read; a
// JSON stream cannot be read past a syntax error.
func Decode(r io.Reader, source string) ([]*Object, error) {
	rd, _, isJSON := utilyaml.GuessJSONStream(r, 4096)
	if isJSON {
		return decodeJSON(rd, source)
	}
	return decodeYAML(rd, source)
}

func decodeYAML(r io.Reader, source string) ([]*Object, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(r))
	var objs []*Object
	var errs []error
	doc := 0
	for {
		chunk, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: after document %d: %w", source, doc, err))
			break
		}
		// Strict: a key written twice would otherwise lose one of its
		// values without a word.
		js, err := yaml.YAMLToJSONStrict(chunk)
		if err == nil && isEmpty(js) {
			continue
		}
		doc++
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: document %d: not valid YAML: %w", source, doc, err))
			continue
		}
		got, err := objectsOf(source, doc, chunk, ContentYAML, js)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		objs = append(objs, got...)
	}
	return objs, errors.Join(errs...)
}

func decodeJSON(r io.Reader, source string) ([]*Object, error) {
	dec := json.NewDecoder(r)
	var objs []*Object
	var errs []error
	for doc := 1; ; doc++ {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: document %d: not valid JSON (at byte %d): %w", source, doc, dec.InputOffset(), err))
			break
		}
		got, err := objectsOf(source, doc, raw, ContentJSON, raw)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		objs = append(objs, got...)
	}
	return objs, errors.Join(errs...)
}

func isEmpty(js []byte) bool {
	js = bytes.TrimSpace(js)
	return len(js) == 0 || string(js) == "null"
}

// objectsOf turns one document into its objects: itself, or the items of
// a List (what `purser get -o yaml` and `kubectl get -o yaml` write for
// several objects).
func objectsOf(source string, doc int, body []byte, contentType string, js []byte) ([]*Object, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%s: document %d: %s", source, doc, fmt.Sprintf(format, args...))
	}
	var v any
	if err := utiljson.Unmarshal(js, &v); err != nil {
		return nil, fail("%v", err)
	}
	fields, ok := v.(map[string]any)
	if !ok {
		return nil, fail("not an object but %s", describe(v))
	}
	items, isList := fields["items"].([]any)
	kind, _ := fields["kind"].(string)
	if !isList || (kind != "" && !strings.HasSuffix(kind, "List")) {
		if kind == "" {
			return nil, fail("the object has no kind")
		}
		return []*Object{{Source: source, Document: doc, Item: -1, Body: body, ContentType: contentType, Fields: fields}}, nil
	}
	// The API answers a typed list (JobList) whose items leave out the
	// kind and apiVersion the list already says: an item without either
	// gets both from the list, as apimachinery's unstructured decoder does
	// (unstructuredJSONScheme.decodeToList). `kubectl get -o yaml` writes
	// kind: List with complete items.
	apiVersion, _ := fields["apiVersion"].(string)
	itemKind := ""
	if kind != "List" {
		itemKind = strings.TrimSuffix(kind, "List")
	}
	objs := make([]*Object, 0, len(items))
	for i, it := range items {
		item, ok := it.(map[string]any)
		if !ok {
			return nil, fail("items[%d]: not an object but %s", i, describe(it))
		}
		k, _ := item["kind"].(string)
		if v, _ := item["apiVersion"].(string); k == "" && v == "" && itemKind != "" {
			item["kind"], item["apiVersion"] = itemKind, apiVersion
		}
		if k, _ := item["kind"].(string); k == "" {
			return nil, fail("items[%d]: the object has no kind", i)
		}
		data, err := json.Marshal(item)
		if err != nil {
			return nil, fail("items[%d]: %v", i, err)
		}
		objs = append(objs, &Object{Source: source, Document: doc, Item: i, Body: data, ContentType: ContentJSON, Fields: item})
	}
	return objs, nil
}

func describe(v any) string {
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
