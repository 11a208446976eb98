package auth

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"
)

// AddToken creates a token for user (with groups) and adds its hash to the
// tokens file at path, creating the file if there is none. It returns the
// token, which is stored nowhere: the caller shows it once. The file keeps
// its comments and order (it is edited as a YAML node tree, not
// re-marshalled), and the result is checked as LoadTokens checks it before
// it replaces the file, so a file that would not load is never written.
func AddToken(path, user string, groups []string) (string, error) {
	if err := checkUserName(user); err != nil {
		return "", err
	}
	for _, g := range groups {
		if g == "" || strings.ContainsAny(g, " \t\n") {
			return "", fmt.Errorf("group %q: a group is a non-empty word", g)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("tokens file: %w", err)
	}
	token := NewToken()
	entry := TokenEntry{User: user, Groups: groups, SHA256: HashToken(token)}
	out, err := appendToken(data, entry)
	if err != nil {
		return "", fmt.Errorf("tokens file %s: %w", path, err)
	}
	var check TokensFile
	if err := yaml.UnmarshalStrict(out, &check); err != nil {
		return "", fmt.Errorf("tokens file %s: %w", path, err)
	}
	if _, err := NewAuthenticator(check); err != nil {
		return "", fmt.Errorf("tokens file %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, out, 0o600); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", err
	}
	return token, nil
}

// checkUserName refuses names the policy could not tell from a group.
func checkUserName(user string) error {
	switch {
	case user == "":
		return errors.New("the user name is empty")
	case strings.HasPrefix(user, "group:"):
		return fmt.Errorf("user %q: a name starting with group: would read as a group in the policy", user)
	case strings.ContainsAny(user, " \t\n"):
		return fmt.Errorf("user %q: a user name is one word", user)
	}
	return nil
}

// appendToken adds entry to the tokens list of a tokens file's text.
func appendToken(data []byte, entry TokenEntry) ([]byte, error) {
	var doc yamlv3.Node
	if len(bytes.TrimSpace(data)) > 0 {
		if err := yamlv3.Unmarshal(data, &doc); err != nil {
			return nil, err
		}
	}
	if doc.Kind == 0 {
		doc = yamlv3.Node{Kind: yamlv3.DocumentNode, Content: []*yamlv3.Node{{Kind: yamlv3.MappingNode, Tag: "!!map"}}}
	}
	if doc.Kind != yamlv3.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yamlv3.MappingNode {
		return nil, errors.New("not a mapping with a tokens list")
	}
	root := doc.Content[0]
	var list *yamlv3.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "tokens" {
			list = root.Content[i+1]
		}
	}
	if list == nil {
		list = &yamlv3.Node{Kind: yamlv3.SequenceNode, Tag: "!!seq"}
		root.Content = append(root.Content, &yamlv3.Node{Kind: yamlv3.ScalarNode, Tag: "!!str", Value: "tokens"}, list)
	}
	if list.Kind == yamlv3.ScalarNode && list.Tag == "!!null" {
		*list = yamlv3.Node{Kind: yamlv3.SequenceNode, Tag: "!!seq"}
	}
	if list.Kind != yamlv3.SequenceNode {
		return nil, errors.New("tokens is not a list")
	}
	list.Style = 0 // a flow list `tokens: []` becomes a block list
	str := func(v string) *yamlv3.Node { return &yamlv3.Node{Kind: yamlv3.ScalarNode, Tag: "!!str", Value: v} }
	item := &yamlv3.Node{Kind: yamlv3.MappingNode, Tag: "!!map", HeadComment: "added by purser token create",
		Content: []*yamlv3.Node{str("user"), str(entry.User)}}
	if len(entry.Groups) > 0 {
		groups := &yamlv3.Node{Kind: yamlv3.SequenceNode, Tag: "!!seq", Style: yamlv3.FlowStyle}
		for _, g := range entry.Groups {
			groups.Content = append(groups.Content, str(g))
		}
		item.Content = append(item.Content, str("groups"), groups)
	}
	item.Content = append(item.Content, str("sha256"), str(entry.SHA256))
	list.Content = append(list.Content, item)
	var out bytes.Buffer
	enc := yamlv3.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	return out.Bytes(), enc.Close()
}
