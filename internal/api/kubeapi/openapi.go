package kubeapi

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"time"

	apiresource "k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// The OpenAPI schema of purser's kinds is made from their Go types, the
// ones the REST API decodes strictly, so that what kubectl explain shows,
// what kubectl validates against and what server-side apply merges by is
// the shape the REST API accepts, and cannot drift from it.

// Extensions of the schema, as the kube-apiserver's OpenAPI names them.
const (
	extGVK             = "x-kubernetes-group-version-kind"
	extPreserveUnknown = "x-kubernetes-preserve-unknown-fields"
	extIntOrString     = "x-kubernetes-int-or-string"
	extListType        = "x-kubernetes-list-type"
	extMapType         = "x-kubernetes-map-type"
)

// definitionName is the schema's name of a kind, as the kube-apiserver
// names a group's definitions (reversed group, version, kind).
func definitionName(kind string) string { return "io.purser." + OwnVersion + "." + kind }

var (
	timeType     = reflect.TypeFor[time.Time]()
	quantityType = reflect.TypeFor[apiresource.Quantity]()
	rawType      = reflect.TypeFor[json.RawMessage]()
	marshaler    = reflect.TypeFor[json.Marshaler]()
)

// schemaOf describes the JSON of a Go type. A list is atomic (replaced
// whole by an apply, as a list without merge keys is in Kubernetes); a
// map of strings is granular (each key owned on its own, as labels are);
// a struct is granular by field. Anything untyped (a template, a patch)
// keeps its fields unchecked, as a CRD's preserve-unknown-fields does:
// the REST API's admission judges it.
func schemaOf(t reflect.Type, depth int) spec.Schema {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var s spec.Schema
	switch {
	case depth > 20:
		s.AddExtension(extPreserveUnknown, true)
		return s
	case t == timeType:
		s.Type, s.Format = spec.StringOrArray{"string"}, "date-time"
		return s
	case t == quantityType:
		s.AddExtension(extIntOrString, true)
		return s
	case t == rawType || t.Kind() == reflect.Interface:
		s.AddExtension(extPreserveUnknown, true)
		return s
	case t.Kind() != reflect.Struct && t.Implements(marshaler), t.Kind() == reflect.Struct && reflect.PointerTo(t).Implements(marshaler):
		// Its JSON is its own (an int-or-string, a duration): left open.
		s.AddExtension(extPreserveUnknown, true)
		return s
	}
	switch t.Kind() {
	case reflect.String:
		s.Type = spec.StringOrArray{"string"}
	case reflect.Bool:
		s.Type = spec.StringOrArray{"boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		s.Type, s.Format = spec.StringOrArray{"integer"}, "int64"
		if t.Kind() == reflect.Int32 {
			s.Format = "int32"
		}
	case reflect.Float32, reflect.Float64:
		s.Type, s.Format = spec.StringOrArray{"number"}, "double"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			s.Type, s.Format = spec.StringOrArray{"string"}, "byte"
			break
		}
		item := schemaOf(t.Elem(), depth+1)
		s.Type, s.Items = spec.StringOrArray{"array"}, &spec.SchemaOrArray{Schema: &item}
		s.AddExtension(extListType, "atomic")
	case reflect.Map:
		val := schemaOf(t.Elem(), depth+1)
		s.Type, s.AdditionalProperties = spec.StringOrArray{"object"}, &spec.SchemaOrBool{Allows: true, Schema: &val}
		if t.Elem().Kind() == reflect.Interface {
			// A free-form object: unchecked, kept whole.
			s = spec.Schema{}
			s.Type = spec.StringOrArray{"object"}
			s.AddExtension(extPreserveUnknown, true)
		}
	case reflect.Struct:
		s.Type, s.Properties = spec.StringOrArray{"object"}, map[string]spec.Schema{}
		addFields(&s, t, depth)
		s.AddExtension(extMapType, "granular")
	default:
		s.AddExtension(extPreserveUnknown, true)
	}
	return s
}

// addFields adds a struct's JSON fields to s, those of inlined structs
// too.
func addFields(s *spec.Schema, t reflect.Type, depth int) {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if (f.Anonymous && name == "") || strings.Contains(","+opts+",", ",inline,") {
			if ft.Kind() == reflect.Struct {
				addFields(s, ft, depth)
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		s.Properties[name] = schemaOf(f.Type, depth+1)
	}
}

// kindSchema is one kind's schema: its Go type's, named with its group,
// version and kind, and its metadata open to the fields of a Kubernetes
// object's that purser keeps (managedFields).
func kindSchema(k *OwnKind) spec.Schema {
	s := schemaOf(reflect.TypeOf(k.Object), 0)
	md := s.Properties["metadata"]
	mf := spec.Schema{}
	mf.Type = spec.StringOrArray{"array"}
	item := spec.Schema{}
	item.Type = spec.StringOrArray{"object"}
	item.AddExtension(extPreserveUnknown, true)
	mf.Items = &spec.SchemaOrArray{Schema: &item}
	mf.AddExtension(extListType, "atomic")
	if md.Properties != nil {
		md.Properties["managedFields"] = mf
	}
	s.Properties["metadata"] = md
	s.Description = k.Description
	s.AddExtension(extGVK, []any{map[string]any{"group": OwnGroup, "version": OwnVersion, "kind": k.Kind}})
	return s
}

// openAPIDocument is the OpenAPI v3 document of purser.io/v1alpha1: each
// kind's schema, and its paths with the verbs and query parameters
// served, which kubectl reads to know that dryRun and fieldValidation are
// honoured here.
// queryParams are OpenAPI query parameters of these names.
func queryParams(names ...string) []any {
	var out []any
	for _, n := range names {
		out = append(out, map[string]any{"name": n, "in": "query", "schema": map[string]any{"type": "string"}, "uniqueItems": true})
	}
	return out
}

// kindPaths adds to paths the collection and item paths of one kind
// under base (ending in /), its schema the definition def: the verbs
// served, with write the query parameters a write honours and patch a
// patch's.
func kindPaths(paths map[string]any, base, plural, def string, gvk schema.GroupVersionKind, write, patch []any) {
	g := map[string]any{"group": gvk.Group, "version": gvk.Version, "kind": gvk.Kind}
	ref := map[string]any{"$ref": "#/components/schemas/" + def}
	body := map[string]any{"content": map[string]any{"application/json": map[string]any{"schema": ref}}}
	ok := map[string]any{"200": body}
	op := func(verb, id string, p []any, withBody bool) map[string]any {
		o := map[string]any{"operationId": id + gvk.Kind, "x-kubernetes-action": verb, extGVK: g, "parameters": p, "responses": ok}
		if withBody {
			o["requestBody"] = body
		}
		return o
	}
	paths[base+plural] = map[string]any{
		"get":  op("list", "list", queryParams("limit", "continue"), false),
		"post": op("post", "create", write, true),
	}
	paths[base+plural+"/{name}"] = map[string]any{
		"get":    op("get", "read", nil, false),
		"put":    op("put", "replace", write, true),
		"patch":  op("patch", "patch", patch, true),
		"delete": op("delete", "delete", queryParams("dryRun"), false),
	}
}

func (a *API) openAPIDocument() ([]byte, error) {
	schemas := map[string]any{}
	paths := map[string]any{}
	for i := range a.cfg.Own {
		k := &a.cfg.Own[i]
		def := definitionName(k.Kind)
		schemas[def] = kindSchema(k)
		base := "/apis/" + OwnGroup + "/" + OwnVersion + "/"
		if k.Namespaced {
			base += "namespaces/{namespace}/"
		}
		write := queryParams("dryRun", "fieldManager", "fieldValidation")
		kindPaths(paths, base, k.Plural, def, schema.GroupVersionKind{Group: OwnGroup, Version: OwnVersion, Kind: k.Kind},
			write, append(queryParams("force"), write...))
	}
	doc := map[string]any{
		"openapi":    "3.0.0",
		"info":       map[string]any{"title": "purser", "version": OwnGroup + "/" + OwnVersion},
		"paths":      paths,
		"components": map[string]any{"schemas": schemas},
	}
	return json.Marshal(doc)
}

// serveOpenAPI serves /openapi/v3 (the index of the documents) and
// /openapi/v3/apis/purser.io/v1alpha1. The farm's other kinds are read
// only and have no document here.
func (a *API) serveOpenAPI(w http.ResponseWriter, req *request) error {
	p := req.rest
	if len(a.cfg.Own) == 0 || req.cluster != "" {
		if len(p) == 2 {
			return writeJSON(w, http.StatusOK, map[string]any{"paths": map[string]any{}})
		}
		return notFound(req)
	}
	docs := map[string]func() ([]byte, error){"apis/" + OwnGroup + "/" + OwnVersion: a.openAPIDocument}
	if a.nativeWrites(req) {
		cat, err := a.kinds.get(req.r.Context(), "")
		if err != nil {
			return err
		}
		for gv, rs := range nativeGroupVersions(cat) {
			docs[gv] = func() ([]byte, error) { return nativeOpenAPIDocument(rs) }
		}
	}
	if len(p) == 2 {
		index := map[string]any{}
		for gv, build := range docs {
			doc, err := build()
			if err != nil {
				return err
			}
			index[gv] = map[string]string{"serverRelativeURL": req.base + "/openapi/v3/" + gv + "?hash=" + docHash(doc)}
		}
		return writeJSON(w, http.StatusOK, map[string]any{"paths": index})
	}
	build, ok := docs[strings.Join(p[2:], "/")]
	if !ok {
		return notFound(req)
	}
	doc, err := build()
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Etag", `"`+docHash(doc)+`"`)
	return writeRaw(w, http.StatusOK, doc)
}

func docHash(doc []byte) string {
	sum := sha256.Sum256(doc)
	return strings.ToUpper(hex.EncodeToString(sum[:]))
}

// nativeGroupVersions are the group versions of the namespaced native
// kinds of the farm, by their OpenAPI path (api/v1, apis/G/V).
func nativeGroupVersions(cat *catalogue) map[string][]*resource {
	out := map[string][]*resource{}
	for _, r := range cat.all {
		if r.own != nil || !r.namespaced {
			continue
		}
		gv := "apis/" + r.apiVersion()
		if r.gvk.Group == "" {
			gv = "api/" + r.gvk.Version
		}
		out[gv] = append(out[gv], r)
	}
	return out
}

// nativeOpenAPIDocument is the OpenAPI v3 document of native kinds as
// /k8s takes their writes: each kind's schema keeps every field (the
// object is the runnable's template, which its own driver checks on the
// write), and its namespaced paths say which query parameters are
// honoured, which kubectl reads before it sends a write.
func nativeOpenAPIDocument(rs []*resource) ([]byte, error) {
	schemas := map[string]any{}
	paths := map[string]any{}
	for _, r := range rs {
		def := strings.Join([]string{"native", r.gvk.Group, r.gvk.Version, r.gvk.Kind}, ".")
		schemas[def] = map[string]any{"type": "object", extPreserveUnknown: true,
			extGVK: []any{map[string]any{"group": r.gvk.Group, "version": r.gvk.Version, "kind": r.gvk.Kind}}}
		base := "/apis/" + r.apiVersion() + "/namespaces/{namespace}/"
		if r.gvk.Group == "" {
			base = "/api/" + r.gvk.Version + "/namespaces/{namespace}/"
		}
		write := queryParams("dryRun", "fieldManager", "fieldValidation")
		kindPaths(paths, base, r.plural, def, r.gvk, write, append(queryParams("force"), write...))
	}
	return json.Marshal(map[string]any{
		"openapi":    "3.0.0",
		"info":       map[string]any{"title": "purser", "version": "native"},
		"paths":      paths,
		"components": map[string]any{"schemas": schemas},
	})
}
