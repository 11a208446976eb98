package kinds

import (
	"errors"
	"fmt"
	"io"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// maxDocuments bounds how many objects one manifest may hold; the body
// limits of the API bound their size.
const maxDocuments = 100

// manifestDocuments reads every document of a manifest as kubectl reads
// a file given to -f (its StreamVisitor: a stream of YAML documents, or
// of JSON objects, decoded one by one; empty documents are skipped), so
// that a second document is judged as the first is.
func manifestDocuments(path, manifest string) ([]Nested, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	var out []Nested
	for i := 0; ; i++ {
		var doc any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d of the manifest does not parse, so what it creates cannot be checked: %w", path, i+1, err)
		}
		if i >= maxDocuments {
			return nil, fmt.Errorf("%s: the manifest has more than %d documents", path, maxDocuments)
		}
		switch x := doc.(type) {
		case nil:
			continue
		case map[string]any:
			if len(x) == 0 {
				continue
			}
			p := path
			if i > 0 {
				p = fmt.Sprintf("%s (document %d)", path, i+1)
			}
			out = append(out, Nested{Path: p, Object: x, InString: true})
		default:
			return nil, fmt.Errorf("%s: document %d of the manifest is not an object", path, i+1)
		}
	}
}
