package kubeapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
)

// OwnColumn is a column kubectl get prints of one of purser's kinds,
// between NAME and AGE: the value at Path of the object as served.
type OwnColumn struct {
	Name, Type, Description string
	Path                    []string
	// Priority 1 is shown by -o wide only.
	Priority int32
}

// ownTable renders objects as served (JSON) as a meta.k8s.io Table of
// version v: NAME, the kind's columns, AGE; each row carries the object's
// metadata (includeObject=Metadata, the default), the object (Object) or
// nothing (None).
func (a *API) ownTable(k *OwnKind, r *http.Request, v string, objs []json.RawMessage, lm metav1.ListMeta) (*metav1.Table, error) {
	t := &metav1.Table{TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: "meta.k8s.io/" + v}, ListMeta: lm, Rows: []metav1.TableRow{}}
	if r.URL.Query().Get("noColumns") != "true" {
		t.ColumnDefinitions = append(t.ColumnDefinitions, metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name",
			Description: "Name must be unique within a namespace."})
		for _, c := range k.Columns {
			t.ColumnDefinitions = append(t.ColumnDefinitions, metav1.TableColumnDefinition{Name: c.Name, Type: c.Type, Description: c.Description, Priority: c.Priority})
		}
		t.ColumnDefinitions = append(t.ColumnDefinitions, metav1.TableColumnDefinition{Name: "Age", Type: "date",
			Description: "CreationTimestamp is when the object was created."})
	}
	now := a.now()
	for _, raw := range objs {
		obj := &unstructured.Unstructured{}
		if err := json.Unmarshal(raw, &obj.Object); err != nil {
			return nil, fmt.Errorf("a %s as read: %w", k.Kind, err)
		}
		row := metav1.TableRow{Cells: []any{obj.GetName()}}
		for _, c := range k.Columns {
			val, found, _ := unstructured.NestedFieldNoCopy(obj.Object, c.Path...)
			if !found || val == nil {
				val = "<none>"
			}
			if s, ok := val.([]any); ok {
				parts := make([]string, len(s))
				for i, e := range s {
					parts[i] = fmt.Sprint(e)
				}
				val = strings.Join(parts, ",")
			}
			row.Cells = append(row.Cells, val)
		}
		age := "<unknown>"
		if ts := obj.GetCreationTimestamp(); !ts.IsZero() {
			age = duration.HumanDuration(now.Sub(ts.Time))
		}
		row.Cells = append(row.Cells, age)
		switch r.URL.Query().Get("includeObject") {
		case "None":
		case "Object":
			row.Object = runtime.RawExtension{Raw: raw}
		default:
			md, _ := json.Marshal(metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{Kind: "PartialObjectMetadata", APIVersion: "meta.k8s.io/v1"},
				ObjectMeta: metav1.ObjectMeta{Name: obj.GetName(), Namespace: obj.GetNamespace(), UID: obj.GetUID(),
					ResourceVersion: obj.GetResourceVersion(), CreationTimestamp: obj.GetCreationTimestamp(), Labels: obj.GetLabels(),
					Annotations: obj.GetAnnotations(), Generation: obj.GetGeneration()}})
			row.Object = runtime.RawExtension{Raw: md}
		}
		t.Rows = append(t.Rows, row)
	}
	return t, nil
}
