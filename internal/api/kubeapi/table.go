package kubeapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/util/jsonpath"

	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/platform/podstatus"
)

// asTable returns the meta.k8s.io version of the Table the client asked
// for (Accept application/json;as=Table;v=v1;g=meta.k8s.io, or v1beta1),
// "" for objects. The first acceptable media type wins.
func asTable(r *http.Request) string {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil || (mt != "application/json" && mt != "*/*") {
			continue
		}
		if params["as"] == "Table" && params["g"] == "meta.k8s.io" && (params["v"] == "v1" || params["v"] == "v1beta1") {
			return params["v"]
		}
		if params["as"] == "" {
			return ""
		}
	}
	return ""
}

// column is one column of a kind's Table and how a row's cell is made.
type column struct {
	def  metav1.TableColumnDefinition
	cell func(o *decoded) any
}

// decoded is a record as a printer reads it.
type decoded struct {
	row *store.InventoryRow
	md  []byte // the metadata, as served
	now time.Time
	raw map[string]any // the served object, decoded on first use (CRD columns)
}

func (d *decoded) object() map[string]any {
	if d.raw == nil {
		d.raw = map[string]any{}
		if obj, err := appendObject(nil, d.row, d.row.Seq); err == nil {
			_ = json.Unmarshal(obj, &d.raw)
		}
	}
	return d.raw
}

func (d *decoded) into(v any) {
	if len(d.row.Object) > 0 {
		_ = json.Unmarshal(d.row.Object, v)
	}
}

func (d *decoded) age() string {
	var ts string
	if members, err := splitTop(d.md); err == nil {
		for _, m := range members {
			if m.key == "creationTimestamp" {
				_ = json.Unmarshal(m.val, &ts)
			}
		}
	}
	t, err := time.Parse(time.RFC3339, ts)
	if err != nil {
		return "<unknown>"
	}
	return duration.HumanDuration(d.now.Sub(t))
}

var (
	nameCol    = column{def: metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name", Description: "Name of the object."}, cell: func(o *decoded) any { return o.row.Name }}
	clusterCol = column{def: metav1.TableColumnDefinition{Name: "Cluster", Type: "string", Description: "The member cluster the object is in (purser.io/cluster)."}, cell: func(o *decoded) any { return o.row.Cluster }}
	ageCol     = column{def: metav1.TableColumnDefinition{Name: "Age", Type: "string", Description: "Time since the object was created."}, cell: func(o *decoded) any { return o.age() }}
)

func strCol(name string, priority int32, desc string, cell func(o *decoded) any) column {
	return column{def: metav1.TableColumnDefinition{Name: name, Type: "string", Priority: priority, Description: desc}, cell: cell}
}

// builtinColumns are kubectl's columns of the built-in kinds, following
// kubernetes' pkg/printers/internalversion/printers.go (AddHandlers: the
// column definitions; printConfigMap, printSecret, printJob, printPod,
// printDeployment, printStatefulSet, printNode: the cells), with the
// cluster's column after the name. The server sends every column; kubectl
// shows those of priority 0, and the others with -o wide.
var builtinColumns = map[string][]column{
	"/ConfigMap": {nameCol, clusterCol, strCol("Data", 0, "Number of data entries.", func(o *decoded) any {
		// Counted without decoding the values: a list's Table is
		// thousands of these.
		n := int64(0)
		top, _ := splitTop(o.row.Object)
		for _, m := range top {
			if m.key == "data" || m.key == "binaryData" {
				entries, _ := splitTop(m.val)
				n += int64(len(entries))
			}
		}
		return n
	}), ageCol},
	"/Secret": {nameCol, clusterCol, strCol("Type", 0, "The type of the secret.", func(o *decoded) any {
		var s corev1.Secret
		o.into(&s)
		return string(s.Type)
	}), strCol("Data", 0, "Number of data entries (the farm's API never serves them).", func(o *decoded) any { return "<hidden>" }), ageCol},
	"batch/Job": {nameCol, clusterCol,
		strCol("Status", 0, "Status of the job.", func(o *decoded) any { j := job(o); return jobStatus(&j) }),
		strCol("Completions", 0, "The number of pods which reached phase Succeeded.", func(o *decoded) any { j := job(o); return jobCompletions(&j) }),
		strCol("Duration", 0, "Time required to complete the job.", func(o *decoded) any { j := job(o); return jobDuration(&j, o.now) }),
		ageCol,
		strCol("Containers", 1, "Names of each container in the template.", func(o *decoded) any { j := job(o); n, _ := containerCells(j.Spec.Template.Spec.Containers); return n }),
		strCol("Images", 1, "Images referenced by each container in the template.", func(o *decoded) any { j := job(o); _, i := containerCells(j.Spec.Template.Spec.Containers); return i }),
		strCol("Selector", 1, "A label query over pods that should match the pod count.", func(o *decoded) any { j := job(o); return metav1.FormatLabelSelector(j.Spec.Selector) }),
	},
	"/Pod": {nameCol, clusterCol,
		strCol("Ready", 0, "The aggregate readiness state of this pod for accepting traffic.", func(o *decoded) any { p := pod(o); r, _, _ := podstatus.Summary(&p); return r }),
		strCol("Status", 0, "The aggregate status of the containers in this pod.", func(o *decoded) any { p := pod(o); _, s, _ := podstatus.Summary(&p); return s }),
		strCol("Restarts", 0, "The number of times the containers in this pod have been restarted.", func(o *decoded) any { p := pod(o); _, _, n := podstatus.Summary(&p); return n }),
		ageCol,
		strCol("IP", 1, "IP address allocated to the pod.", func(o *decoded) any { p := pod(o); return orNone(p.Status.PodIP) }),
		strCol("Node", 1, "The node the pod is scheduled onto.", func(o *decoded) any { p := pod(o); return orNone(p.Spec.NodeName) }),
	},
	"apps/Deployment": {nameCol, clusterCol,
		strCol("Ready", 0, "Number of the pod with ready state.", func(o *decoded) any {
			var d appsv1.Deployment
			o.into(&d)
			want := int32(1)
			if d.Spec.Replicas != nil {
				want = *d.Spec.Replicas
			}
			return fmt.Sprintf("%d/%d", d.Status.ReadyReplicas, want)
		}),
		strCol("Up-to-date", 0, "Total number of non-terminated pods targeted by this deployment that have the desired template spec.", func(o *decoded) any {
			var d appsv1.Deployment
			o.into(&d)
			return int64(d.Status.UpdatedReplicas)
		}),
		strCol("Available", 0, "Total number of available pods targeted by this deployment.", func(o *decoded) any {
			var d appsv1.Deployment
			o.into(&d)
			return int64(d.Status.AvailableReplicas)
		}),
		ageCol,
	},
	"apps/StatefulSet": {nameCol, clusterCol,
		strCol("Ready", 0, "Number of the pod with ready state.", func(o *decoded) any {
			var s appsv1.StatefulSet
			o.into(&s)
			want := int32(1)
			if s.Spec.Replicas != nil {
				want = *s.Spec.Replicas
			}
			return fmt.Sprintf("%d/%d", s.Status.ReadyReplicas, want)
		}),
		ageCol,
	},
	"/Node": {nameCol, clusterCol,
		strCol("Status", 0, "The status of the node.", func(o *decoded) any {
			var n corev1.Node
			o.into(&n)
			st := "Unknown"
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady {
					st = "NotReady"
					if c.Status == corev1.ConditionTrue {
						st = "Ready"
					}
				}
			}
			if n.Spec.Unschedulable {
				st += ",SchedulingDisabled"
			}
			return st
		}),
		ageCol,
		strCol("Version", 0, "Kubelet Version reported by the node.", func(o *decoded) any {
			var n corev1.Node
			o.into(&n)
			return n.Status.NodeInfo.KubeletVersion
		}),
	},
}

func job(o *decoded) batchv1.Job {
	var j batchv1.Job
	o.into(&j)
	return j
}

func pod(o *decoded) corev1.Pod {
	var p corev1.Pod
	o.into(&p)
	return p
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// jobStatus, jobCompletions and jobDuration follow printJob.
func jobStatus(j *batchv1.Job) string {
	has := func(t batchv1.JobConditionType) bool {
		for _, c := range j.Status.Conditions {
			if c.Type == t && c.Status == corev1.ConditionTrue {
				return true
			}
		}
		return false
	}
	switch {
	case has(batchv1.JobComplete):
		return "Complete"
	case has(batchv1.JobFailed):
		return "Failed"
	case j.DeletionTimestamp != nil:
		return "Terminating"
	case has(batchv1.JobSuspended):
		return "Suspended"
	case has(batchv1.JobFailureTarget):
		return "FailureTarget"
	case has(batchv1.JobSuccessCriteriaMet):
		return "SuccessCriteriaMet"
	}
	return "Running"
}

func jobCompletions(j *batchv1.Job) string {
	if j.Spec.Completions != nil {
		return fmt.Sprintf("%d/%d", j.Status.Succeeded, *j.Spec.Completions)
	}
	if j.Spec.Parallelism != nil && *j.Spec.Parallelism > 1 {
		return fmt.Sprintf("%d/1 of %d", j.Status.Succeeded, *j.Spec.Parallelism)
	}
	return fmt.Sprintf("%d/1", j.Status.Succeeded)
}

func jobDuration(j *batchv1.Job, now time.Time) string {
	switch {
	case j.Status.StartTime == nil:
		return ""
	case j.Status.CompletionTime == nil:
		return duration.HumanDuration(now.Sub(j.Status.StartTime.Time))
	}
	return duration.HumanDuration(j.Status.CompletionTime.Sub(j.Status.StartTime.Time))
}

// containerCells follows layoutContainerCells.
func containerCells(cs []corev1.Container) (names, images string) {
	var n, i []string
	for _, c := range cs {
		n, i = append(n, c.Name), append(i, c.Image)
	}
	return strings.Join(n, ","), strings.Join(i, ",")
}

// columnsOf is the Table's columns for res: the built-in printer's, the
// CRD's additionalPrinterColumns (as the apiextensions-apiserver's
// tableconvertor makes them: NAME, then each column, its JSONPath
// evaluated by client-go's jsonpath, dates as ages), else NAME and AGE;
// CLUSTER always after NAME.
func columnsOf(res *resource) []column {
	if cols, ok := builtinColumns[res.gvk.Group+"/"+res.gvk.Kind]; ok {
		return cols
	}
	if len(res.columns) == 0 {
		return []column{nameCol, clusterCol, ageCol}
	}
	// A CRD without columns of its own gets AGE by the API's defaulting
	// (apiextensions' SetDefaults_CustomResourceDefinitionSpec); one with
	// columns shows them alone.
	cols := []column{nameCol, clusterCol}
	for _, pc := range res.columns {
		pc := pc
		jp := jsonpath.New(pc.Name).AllowMissingKeys(true)
		if err := jp.Parse("{" + pc.JSONPath + "}"); err != nil {
			continue
		}
		typ := pc.Type
		if typ == "date" {
			typ = "string"
		}
		cols = append(cols, column{def: metav1.TableColumnDefinition{Name: pc.Name, Type: typ, Format: pc.Format, Description: pc.Description, Priority: pc.Priority},
			cell: func(o *decoded) any {
				results, err := jp.FindResults(o.object())
				if err != nil || len(results) == 0 || len(results[0]) == 0 {
					return nil
				}
				v := results[0][0].Interface()
				if pc.Type == "date" {
					if s, ok := v.(string); ok {
						if t, err := time.Parse(time.RFC3339, s); err == nil {
							return duration.HumanDuration(o.now.Sub(t))
						}
					}
				}
				if pc.Type == "string" {
					if _, ok := v.(string); !ok {
						var buf bytes.Buffer
						_ = jp.PrintResults(&buf, results[0])
						return buf.String()
					}
				}
				return v
			}})
	}
	return cols
}

// table renders rows as a meta.k8s.io Table, each row carrying its object
// as includeObject asks: Metadata (the default, a PartialObjectMetadata),
// Object (the whole object, what kubectl --sort-by needs) or None.
func (a *API) table(res *resource, rows []store.InventoryRow, r *http.Request, lm metav1.ListMeta) *metav1.Table {
	v := asTable(r)
	if v == "" {
		v = "v1"
	}
	t := &metav1.Table{TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: "meta.k8s.io/" + v}, ListMeta: lm, Rows: []metav1.TableRow{}}
	cols := columnsOf(res)
	if r.URL.Query().Get("noColumns") != "true" {
		for _, c := range cols {
			t.ColumnDefinitions = append(t.ColumnDefinitions, c.def)
		}
	}
	include := r.URL.Query().Get("includeObject")
	now := a.now()
	for i := range rows {
		t.Rows = append(t.Rows, tableRow(res, cols, &rows[i], include, now))
	}
	return t
}

// encodeTable is json.Marshal of t, but for the rows' objects, which are
// copied as they are: they are compact JSON already, and Marshal scans
// and compacts each RawExtension again (most of the time of a Table of
// thousands of rows).
func encodeTable(t *metav1.Table) ([]byte, error) {
	head := *t
	head.Rows = nil
	b, err := json.Marshal(&head)
	if err != nil {
		return nil, err
	}
	// {"kind":...,"metadata":{...},"columnDefinitions":[...],"rows":null}
	const rowsNull = `"rows":null}`
	if !bytes.HasSuffix(b, []byte(rowsNull)) {
		return json.Marshal(t)
	}
	b = append(b[:len(b)-len(rowsNull)], `"rows":[`...)
	for i, r := range t.Rows {
		if i > 0 {
			b = append(b, ',')
		}
		cells, err := json.Marshal(r.Cells)
		if err != nil {
			return nil, err
		}
		b = append(b, `{"cells":`...)
		b = append(b, cells...)
		b = append(b, `,"object":`...)
		if len(r.Object.Raw) > 0 {
			b = append(b, r.Object.Raw...)
		} else {
			b = append(b, "null"...)
		}
		b = append(b, '}')
	}
	return append(b, "]}"...), nil
}

func tableRow(res *resource, cols []column, row *store.InventoryRow, include string, now time.Time) metav1.TableRow {
	d := &decoded{row: row, now: now}
	md, _, err := servedMetadata(row, row.Seq)
	if err != nil {
		md = []byte("{}")
	}
	d.md = md
	tr := metav1.TableRow{Cells: make([]any, 0, len(cols))}
	for _, c := range cols {
		tr.Cells = append(tr.Cells, c.cell(d))
	}
	switch include {
	case "None":
	case "Object":
		obj, _ := appendObject(nil, row, row.Seq)
		tr.Object = runtime.RawExtension{Raw: obj}
	default:
		b := append([]byte(`{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":`), md...)
		tr.Object = runtime.RawExtension{Raw: append(b, '}')}
	}
	return tr
}
