package v1alpha1

import (
	yamlv3 "go.yaml.in/yaml/v3"
)

// MaxObjectBytes bounds an object as JSON, after a YAML body's aliases
// are expanded: the body's own limit (1 MiB) says nothing of what one
// anchor referenced a thousand times becomes, and every copy of the
// object (database row, audit entry, history answers) would pay for it.
const MaxObjectBytes = 1 << 20

// BoundedJSON is the one bound every request body purser decodes goes
// through, whatever decodes it next (the REST API's kinds and small
// requests, the Kubernetes-shaped API's reviews): a JSON or YAML body, as
// contentType says (sniffed when empty), becomes the JSON text of one
// object, refused before any YAML alias is expanded when it would exceed
// MaxObjectBytes (a *DecodeError with TooLarge, which the APIs answer
// 413), and refused when it nests deeper than MaxNesting. The limit on
// the bytes read comes first, from each server; this is the limit on
// what they become.
func BoundedJSON(data []byte, contentType string) ([]byte, error) {
	js, derr := toJSON(data, contentType)
	if derr != nil {
		return nil, derr
	}
	return js, nil
}

// expandedSize estimates, without expanding anything, how many bytes of
// JSON the YAML document doc becomes: every alias counts the size of its
// anchor's node, each node measured once. It stops counting once past
// limit.
func expandedSize(doc []byte, limit int) (int, error) {
	var root yamlv3.Node
	if err := yamlv3.Unmarshal(doc, &root); err != nil {
		return 0, err
	}
	sizes := map[*yamlv3.Node]int{}
	var size func(n *yamlv3.Node) int
	size = func(n *yamlv3.Node) int {
		if n == nil {
			return 0
		}
		if s, ok := sizes[n]; ok {
			return s
		}
		sizes[n] = limit + 1 // an alias cycle counts as too large
		var s int
		switch n.Kind {
		case yamlv3.AliasNode:
			s = size(n.Alias)
		case yamlv3.ScalarNode:
			s = len(n.Value) + 3 // quotes and a separator
		default: // documents, mappings, sequences
			s = 2
			for _, c := range n.Content {
				s += size(c)
				if s > limit {
					break
				}
			}
		}
		sizes[n] = s
		return s
	}
	return size(&root), nil
}

// tooLarge is the error of an object larger than MaxObjectBytes.
func tooLarge(size int, expanded bool) *DecodeError {
	how := ""
	if expanded {
		how = " once its YAML aliases are expanded"
	}
	e := malformed("", "the object is %d bytes or more as JSON%s; at most %d are accepted", size, how, MaxObjectBytes)
	e.TooLarge = true
	return e
}
