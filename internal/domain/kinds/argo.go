package kinds

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	sjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// ArgoGroup is Argo Workflows' API group.
const ArgoGroup = "argoproj.io"

// Argo Workflows' kinds that keep a WorkflowSpec.
var (
	ArgoWorkflow                = schema.GroupKind{Group: ArgoGroup, Kind: "Workflow"}
	ArgoWorkflowTemplate        = schema.GroupKind{Group: ArgoGroup, Kind: "WorkflowTemplate"}
	ArgoClusterWorkflowTemplate = schema.GroupKind{Group: ArgoGroup, Kind: "ClusterWorkflowTemplate"}
	ArgoCronWorkflow            = schema.GroupKind{Group: ArgoGroup, Kind: "CronWorkflow"}
)

func argoDrivers() []Driver {
	return []Driver{
		argoWorkflowDriver{argoDriver{ArgoWorkflow, []string{"spec"}}},
		argoDriver{ArgoWorkflowTemplate, []string{"spec"}},
		argoDriver{ArgoClusterWorkflowTemplate, []string{"spec"}},
		argoDriver{ArgoCronWorkflow, []string{"spec", "workflowSpec"}},
	}
}

// argoDriver knows a kind whose WorkflowSpec is at the field path spec.
type argoDriver struct {
	gk   schema.GroupKind
	spec []string
}

func (d argoDriver) GroupKind() schema.GroupKind { return d.gk }
func (d argoDriver) Knows() string {
	return strings.Join(d.spec, ".") + ": the pod of every template (container, script, containerSet, resource, data; init containers and sidecars) with templateDefaults merged and podSpecPatch applied as the workflow controller does; every document of each resource template's manifest, its kubectl flags"
}

// The parts of Argo's WorkflowSpec and Template (argoproj.io/v1alpha1)
// that make a template's pod or the objects it creates, with Argo's JSON
// names and the same patch strategies (patchStrategy, patchMergeKey), so
// that the strategic merge below is the controller's. What is not here
// makes no pod and is dropped, as a field the controller ignores would be.

type argoWorkflowSpec struct {
	Templates                    []json.RawMessage             `json:"templates"`
	TemplateDefaults             json.RawMessage               `json:"templateDefaults"`
	Volumes                      []corev1.Volume               `json:"volumes"`
	SecurityContext              *corev1.PodSecurityContext    `json:"securityContext"`
	HostNetwork                  *bool                         `json:"hostNetwork"`
	ServiceAccountName           string                        `json:"serviceAccountName"`
	AutomountServiceAccountToken *bool                         `json:"automountServiceAccountToken"`
	Executor                     *argoExecutor                 `json:"executor"`
	PodSpecPatch                 string                        `json:"podSpecPatch"`
	PodMetadata                  *argoMetadata                 `json:"podMetadata"`
	NodeSelector                 map[string]string             `json:"nodeSelector"`
	Affinity                     *corev1.Affinity              `json:"affinity"`
	Tolerations                  []corev1.Toleration           `json:"tolerations"`
	SchedulerName                string                        `json:"schedulerName"`
	PodPriorityClassName         string                        `json:"podPriorityClassName"`
	HostAliases                  []corev1.HostAlias            `json:"hostAliases"`
	PodResources                 *corev1.ResourceRequirements  `json:"podResources"`
	ResourceClaims               []corev1.PodResourceClaim     `json:"resourceClaims"`
	DNSPolicy                    *corev1.DNSPolicy             `json:"dnsPolicy"`
	DNSConfig                    *corev1.PodDNSConfig          `json:"dnsConfig"`
	ImagePullSecrets             []corev1.LocalObjectReference `json:"imagePullSecrets"`
}

type argoTemplate struct {
	Name                         string                       `json:"name,omitempty"`
	NodeSelector                 map[string]string            `json:"nodeSelector,omitempty"`
	Affinity                     *corev1.Affinity             `json:"affinity,omitempty"`
	Metadata                     argoMetadata                 `json:"metadata,omitempty"`
	Steps                        []any                        `json:"steps,omitempty"`
	Container                    *corev1.Container            `json:"container,omitempty"`
	ContainerSet                 *argoContainerSet            `json:"containerSet,omitempty"`
	Script                       *argoScript                  `json:"script,omitempty"`
	Resource                     *argoResource                `json:"resource,omitempty"`
	DAG                          *argoOther                   `json:"dag,omitempty"`
	Suspend                      *argoOther                   `json:"suspend,omitempty"`
	Data                         *argoOther                   `json:"data,omitempty"`
	HTTP                         *argoOther                   `json:"http,omitempty"`
	Plugin                       *argoOther                   `json:"plugin,omitempty"`
	Volumes                      []corev1.Volume              `json:"volumes,omitempty" patchStrategy:"merge" patchMergeKey:"name"`
	InitContainers               []argoUserContainer          `json:"initContainers,omitempty" patchStrategy:"merge" patchMergeKey:"name"`
	Sidecars                     []argoUserContainer          `json:"sidecars,omitempty" patchStrategy:"merge" patchMergeKey:"name"`
	Tolerations                  []corev1.Toleration          `json:"tolerations,omitempty" patchStrategy:"merge" patchMergeKey:"key"`
	SchedulerName                string                       `json:"schedulerName,omitempty"`
	PriorityClassName            string                       `json:"priorityClassName,omitempty"`
	ServiceAccountName           string                       `json:"serviceAccountName,omitempty"`
	AutomountServiceAccountToken *bool                        `json:"automountServiceAccountToken,omitempty"`
	Executor                     *argoExecutor                `json:"executor,omitempty"`
	HostAliases                  []corev1.HostAlias           `json:"hostAliases,omitempty" patchStrategy:"merge" patchMergeKey:"ip"`
	SecurityContext              *corev1.PodSecurityContext   `json:"securityContext,omitempty"`
	PodSpecPatch                 string                       `json:"podSpecPatch,omitempty"`
	PodResources                 *corev1.ResourceRequirements `json:"podResources,omitempty"`
	ResourceClaims               []corev1.PodResourceClaim    `json:"resourceClaims,omitempty"`
}

type argoMetadata struct {
	Annotations map[string]string `json:"annotations,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
}

type argoExecutor struct {
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
}

type argoContainerSet struct {
	Containers   []argoContainerNode  `json:"containers"`
	VolumeMounts []corev1.VolumeMount `json:"volumeMounts,omitempty"`
}

type argoContainerNode struct {
	corev1.Container `json:",inline"`
	Dependencies     []string `json:"dependencies,omitempty"`
}

type argoScript struct {
	corev1.Container `json:",inline"`
	Source           string `json:"source"`
}

type argoUserContainer struct {
	corev1.Container   `json:",inline"`
	MirrorVolumeMounts *bool `json:"mirrorVolumeMounts,omitempty"`
}

type argoResource struct {
	Action        string          `json:"action"`
	MergeStrategy string          `json:"mergeStrategy,omitempty"`
	Manifest      string          `json:"manifest,omitempty"`
	ManifestFrom  json.RawMessage `json:"manifestFrom,omitempty"`
	Flags         []string        `json:"flags,omitempty"`
}

// argoOther is a template type that makes no pod of the tenant's; only
// its presence matters (it decides the template's type).
type argoOther struct{}

// argoType is the template's type as Argo's Template.GetType decides it:
// the first of these set, in this order.
func (t *argoTemplate) argoType() string {
	switch {
	case t.Container != nil:
		return "Container"
	case t.ContainerSet != nil:
		return "ContainerSet"
	case t.Steps != nil:
		return "Steps"
	case t.DAG != nil:
		return "DAG"
	case t.Script != nil:
		return "Script"
	case t.Resource != nil:
		return "Resource"
	case t.Data != nil:
		return "Data"
	case t.Suspend != nil:
		return "Suspend"
	case t.HTTP != nil:
		return "HTTP"
	case t.Plugin != nil:
		return "Plugin"
	}
	return "Unknown"
}

// typeFields are the template's fields named by a template type, which
// Argo's type-aware merge keeps only for a template of that type.
var typeFields = []string{"Container", "ContainerSet", "Steps", "Script", "Resource", "DAG", "Suspend", "Data", "HTTP", "Plugin"}

// setType keeps, of the fields Argo's Template.SetType knows (steps, dag,
// container, script, resource, data, suspend), only the one of typ; for
// another type it changes nothing, as SetType does not.
func (t *argoTemplate) setType(typ string) {
	keep := map[string]bool{"Steps": true, "DAG": true, "Container": true, "Script": true, "Resource": true, "Data": true, "Suspend": true}
	if !keep[typ] {
		return
	}
	v := reflect.ValueOf(t).Elem()
	for name := range keep {
		if name != typ {
			f := v.FieldByName(name)
			f.Set(reflect.Zero(f.Type()))
		}
	}
}

// mergeTemplateDefaults is a template as the workflow controller runs it,
// with the workflow's templateDefaults merged in (Argo Workflows'
// wfOperationCtx.mergedTemplateDefaultsInto): a strategic merge patch of
// the template over the defaults, the template winning, lists merged by
// the keys Template declares. From v4 the controller first drops the
// defaults of the other template types (typeAware); before it, it
// merged them all and put the template's type back with
// Template.SetType, which leaves a containerSet, http or plugin template
// holding a default container (and so running it). Purser judges both,
// since it cannot know which controller a cluster runs.
func mergeTemplateDefaults(defaults, tmpl *argoTemplate, typeAware bool) (*argoTemplate, error) {
	if defaults == nil {
		return tmpl, nil
	}
	typ := tmpl.argoType()
	d := *defaults
	if typeAware {
		v := reflect.ValueOf(&d).Elem()
		for _, name := range typeFields {
			if name != typ {
				f := v.FieldByName(name)
				f.Set(reflect.Zero(f.Type()))
			}
		}
	}
	dj, err := json.Marshal(&d)
	if err != nil {
		return nil, err
	}
	tj, err := json.Marshal(tmpl)
	if err != nil {
		return nil, err
	}
	merged, err := strategicpatch.StrategicMergePatch(dj, tj, argoTemplate{})
	if err != nil {
		return nil, fmt.Errorf("merging templateDefaults: %w", err)
	}
	out := &argoTemplate{}
	if err := json.Unmarshal(merged, out); err != nil {
		return nil, fmt.Errorf("merging templateDefaults: %w", err)
	}
	out.setType(typ)
	return out, nil
}

// argoWorkflow is a decoded WorkflowSpec and its templates as the
// controller runs them.
type argoWorkflow struct {
	at   string // the spec's field path
	spec argoWorkflowSpec
	// templates[i] holds template i as written, then merged each way
	// (type-aware; as before v4) when they differ.
	templates [][]*argoTemplate
	names     []string
	// defaults are templateDefaults as written, and refs says whether
	// the workflow runs templates it does not hold (spec.workflowTemplateRef,
	// a templateRef anywhere), which the controller merges the defaults
	// into too.
	defaults *argoTemplate
	refs     bool
}

// decodeArgo reads the WorkflowSpec at path of obj, case-sensitively as
// the Kubernetes client the controller reads it with.
func decodeArgo(obj map[string]any, path []string) (*argoWorkflow, error) {
	at := obj
	for _, f := range path {
		m, ok := at[f].(map[string]any)
		if !ok {
			return nil, nil
		}
		at = m
	}
	w := &argoWorkflow{at: strings.Join(path, ".")}
	raw, err := json.Marshal(at)
	if err != nil {
		return nil, err
	}
	if err := sjson.UnmarshalCaseSensitivePreserveInts(raw, &w.spec); err != nil {
		return nil, fmt.Errorf("%s: not a workflow spec: %w", w.at, err)
	}
	var defaults *argoTemplate
	if len(w.spec.TemplateDefaults) > 0 && string(w.spec.TemplateDefaults) != "null" {
		defaults = &argoTemplate{}
		if err := sjson.UnmarshalCaseSensitivePreserveInts(w.spec.TemplateDefaults, defaults); err != nil {
			return nil, fmt.Errorf("%s.templateDefaults: %w", w.at, err)
		}
	}
	w.defaults = defaults
	_, w.refs = at["workflowTemplateRef"]
	if tmpls, ok := at["templates"].([]any); ok && !w.refs {
		w.refs = hasKey(tmpls, "templateRef", 0)
	}
	for i, rt := range w.spec.Templates {
		t := &argoTemplate{}
		if err := sjson.UnmarshalCaseSensitivePreserveInts(rt, t); err != nil {
			return nil, fmt.Errorf("%s.templates[%d]: not a template: %w", w.at, i, err)
		}
		ways := []*argoTemplate{}
		for _, typeAware := range []bool{true, false} {
			m, err := mergeTemplateDefaults(defaults, t, typeAware)
			if err != nil {
				return nil, fmt.Errorf("%s.templates[%d]: %w", w.at, i, err)
			}
			if len(ways) == 0 || !reflect.DeepEqual(ways[0], m) {
				ways = append(ways, m)
			}
		}
		w.templates = append(w.templates, ways)
		w.names = append(w.names, t.Name)
	}
	return w, nil
}

func (w *argoWorkflow) path(i, way int) string {
	p := fmt.Sprintf("%s.templates[%d]", w.at, i)
	if w.names[i] != "" {
		p += " (" + w.names[i] + ")"
	}
	if way > 0 {
		p += " with templateDefaults as a controller before v4 merges them"
	}
	return p
}

func (d argoDriver) PodTemplates(obj map[string]any) ([]PodTemplate, error) {
	w, err := decodeArgo(obj, d.spec)
	if err != nil || w == nil {
		return nil, err
	}
	var pods []PodTemplate
	for i, ways := range w.templates {
		for way, t := range ways {
			p, ok, err := w.pod(t)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", w.path(i, way), err)
			}
			if !ok {
				continue
			}
			p.Path = w.path(i, way)
			pods = append(pods, p)
			if sa := w.executorAccount(t); sa != "" {
				// The executor runs in the pod under an account of its own.
				pods = append(pods, PodTemplate{Path: p.Path + ".executor", Spec: corev1.PodSpec{ServiceAccountName: sa}})
			}
		}
	}
	if w.refs {
		// A template held elsewhere (a WorkflowTemplate's) runs with this
		// workflow's pod-level fields, podSpecPatch and templateDefaults
		// merged in (the controller merges the defaults into a resolved
		// templateRef's template as into its own: executeTemplate), and
		// purser cannot see it here: what this workflow adds is judged on
		// a pod of none of the tenant's containers, and the defaults as a
		// template of each type they fill.
		defaults := w.defaults
		if defaults == nil {
			defaults = &argoTemplate{}
		}
		for _, typ := range []string{"Data", "Container", "Script", "ContainerSet"} {
			d := *defaults
			if typ == "Data" {
				d.Data = &argoOther{}
			}
			v := reflect.ValueOf(&d).Elem()
			if v.FieldByName(typ).IsNil() {
				continue
			}
			for _, name := range typeFields {
				if name != typ {
					f := v.FieldByName(name)
					f.Set(reflect.Zero(f.Type()))
				}
			}
			p, ok, err := w.pod(&d)
			if err != nil {
				return nil, fmt.Errorf("%s.templateDefaults: %w", w.at, err)
			}
			if ok {
				p.Path = w.at + ".templateDefaults (" + strings.ToLower(typ) + ", as merged into the templates it references)"
				if typ == "Data" {
					p.Path = w.at + " (the pod of a template it references)"
				}
				pods = append(pods, p)
				if sa := w.executorAccount(&d); sa != "" {
					pods = append(pods, PodTemplate{Path: p.Path + ".executor", Spec: corev1.PodSpec{ServiceAccountName: sa}})
				}
			}
		}
	}
	if w.needsAgent() {
		p, err := w.agentPod()
		if err != nil {
			return nil, fmt.Errorf("%s.podSpecPatch on the agent pod: %w", w.at, err)
		}
		pods = append(pods, p)
	}
	return pods, nil
}

// needsAgent: an http or plugin template runs in the workflow's agent pod.
func (w *argoWorkflow) needsAgent() bool {
	for _, ways := range w.templates {
		for _, t := range ways {
			if typ := t.argoType(); typ == "HTTP" || typ == "Plugin" {
				return true
			}
		}
	}
	return false
}

// agentPod is the pod the controller runs http and plugin templates in
// (Argo Workflows' wfOperationCtx.createAgentPod): the executor's
// containers, the workflow's service account, security context,
// scheduling fields and podMetadata, and the workflow's podSpecPatch,
// which can add containers of the tenant's.
func (w *argoWorkflow) agentPod() (PodTemplate, error) {
	p := PodTemplate{Path: w.at + " (the agent pod of its http and plugin templates)"}
	s := &p.Spec
	s.ServiceAccountName = w.spec.ServiceAccountName
	s.SecurityContext = w.spec.SecurityContext
	s.NodeSelector, s.Affinity, s.Tolerations = w.spec.NodeSelector, w.spec.Affinity, w.spec.Tolerations
	s.SchedulerName, s.PriorityClassName, s.HostAliases = w.spec.SchedulerName, w.spec.PodPriorityClassName, w.spec.HostAliases
	if m := w.spec.PodMetadata; m != nil {
		p.Metadata.Annotations, p.Metadata.Labels = maps.Clone(m.Annotations), maps.Clone(m.Labels)
	}
	patch := w.spec.PodSpecPatch
	if strings.TrimSpace(patch) == "" {
		return p, nil
	}
	if strings.Contains(patch, "{{") {
		p.Unjudgeable = "podSpecPatch has parameters ({{...}}), so what it changes cannot be known before"
		return p, nil
	}
	spec, err := ApplyPodSpecPatch(*s, patch)
	if err != nil {
		return p, err
	}
	p.Spec = spec
	return p, nil
}

// pod builds template t's pod as the workflow controller does
// (podBuilder.build, addSchedulingConstraints, setupServiceAccount,
// addMetadata, addInitContainers, addSidecars): the template's main
// containers, init containers and sidecars, its volumes and the
// workflow's (all of them, where the controller adds those the
// containers mount), the workflow's host network, and the pod-level
// fields the template sets or else the workflow does; then the
// podSpecPatch of the workflow and of the template, in that order.
// Steps, dag, suspend, http and plugin templates make no pod of their
// own. A resource or data template runs the executor's container, not
// the tenant's, in a pod that still carries what the template sets.
func (w *argoWorkflow) pod(t *argoTemplate) (PodTemplate, bool, error) {
	var p PodTemplate
	s := &p.Spec
	switch t.argoType() {
	case "Container":
		c := *t.Container
		c.Name = "main" // the controller names a template's one container so
		s.Containers = append(s.Containers, c)
	case "Script":
		c := t.Script.Container
		c.Name = "main"
		s.Containers = append(s.Containers, c)
	case "ContainerSet":
		for _, n := range t.ContainerSet.Containers {
			c := n.Container
			if c.Name == "" {
				c.Name = "main"
			}
			c.VolumeMounts = append(append([]corev1.VolumeMount(nil), c.VolumeMounts...), t.ContainerSet.VolumeMounts...)
			s.Containers = append(s.Containers, c)
		}
	case "Resource", "Data":
	default:
		return p, false, nil
	}
	var main *corev1.Container
	if len(s.Containers) > 0 {
		main = &s.Containers[0]
	}
	mirror := func(u argoUserContainer) corev1.Container {
		c := u.Container
		if main != nil && u.MirrorVolumeMounts != nil && *u.MirrorVolumeMounts {
			c.VolumeMounts = append(append([]corev1.VolumeMount(nil), c.VolumeMounts...), main.VolumeMounts...)
		}
		return c
	}
	var sidecars []corev1.Container
	for _, u := range t.InitContainers {
		s.InitContainers = append(s.InitContainers, mirror(u))
	}
	for _, u := range t.Sidecars {
		sidecars = append(sidecars, mirror(u))
	}
	s.Containers = append(s.Containers, sidecars...)
	s.Volumes = append(append([]corev1.Volume(nil), t.Volumes...), w.spec.Volumes...)
	if w.spec.HostNetwork != nil {
		s.HostNetwork = *w.spec.HostNetwork
	}
	if w.spec.DNSPolicy != nil {
		s.DNSPolicy = *w.spec.DNSPolicy
	}
	s.DNSConfig = w.spec.DNSConfig
	s.ImagePullSecrets = w.spec.ImagePullSecrets
	s.ServiceAccountName = firstOf(t.ServiceAccountName, w.spec.ServiceAccountName)
	if a := firstPtr(t.AutomountServiceAccountToken, w.spec.AutomountServiceAccountToken); a != nil && !*a {
		s.AutomountServiceAccountToken = a
	}
	if len(t.NodeSelector) > 0 {
		s.NodeSelector = t.NodeSelector
	} else {
		s.NodeSelector = w.spec.NodeSelector
	}
	s.Affinity = firstPtr(t.Affinity, w.spec.Affinity)
	if len(t.Tolerations) > 0 {
		s.Tolerations = t.Tolerations
	} else {
		s.Tolerations = w.spec.Tolerations
	}
	s.SchedulerName = firstOf(t.SchedulerName, w.spec.SchedulerName)
	s.PriorityClassName = firstOf(t.PriorityClassName, w.spec.PodPriorityClassName)
	s.HostAliases = append(append([]corev1.HostAlias(nil), w.spec.HostAliases...), t.HostAliases...)
	s.SecurityContext = firstPtr(t.SecurityContext, w.spec.SecurityContext)
	s.Resources = firstPtr(t.PodResources, w.spec.PodResources)
	if len(t.ResourceClaims) > 0 {
		s.ResourceClaims = t.ResourceClaims
	} else {
		s.ResourceClaims = w.spec.ResourceClaims
	}
	p.Metadata.Labels, p.Metadata.Annotations = map[string]string{}, map[string]string{}
	if m := w.spec.PodMetadata; m != nil {
		maps.Copy(p.Metadata.Annotations, m.Annotations)
		maps.Copy(p.Metadata.Labels, m.Labels)
	}
	maps.Copy(p.Metadata.Annotations, t.Metadata.Annotations)
	maps.Copy(p.Metadata.Labels, t.Metadata.Labels)

	var patches []string
	for _, patch := range []string{w.spec.PodSpecPatch, t.PodSpecPatch} {
		if strings.TrimSpace(patch) != "" {
			patches = append(patches, patch)
		}
	}
	for _, patch := range patches {
		if strings.Contains(patch, "{{") {
			// The controller fills parameters in when it makes the pod
			// (podBuilder.processPodSpecPatch), from inputs and the
			// outputs of earlier steps: what the patch does is not known
			// before the workflow runs.
			p.Unjudgeable = "podSpecPatch has parameters ({{...}}) the workflow controller fills in when it makes the pod, so what it changes cannot be known before"
			return p, true, nil
		}
	}
	spec, err := ApplyPodSpecPatch(*s, patches...)
	if err != nil {
		return p, false, err
	}
	p.Spec = spec
	return p, true, nil
}

// ApplyPodSpecPatch applies podSpecPatch documents (YAML or JSON) to a
// pod spec in order, as Argo Workflows' ApplyPodSpecPatch does: each must
// read as a PodSpec, and is applied as a strategic merge patch of PodSpec
// (containers merged by name, volumes by name, and so on).
func ApplyPodSpecPatch(spec corev1.PodSpec, patches ...string) (corev1.PodSpec, error) {
	if len(patches) == 0 {
		return spec, nil
	}
	cur, err := json.Marshal(spec)
	if err != nil {
		return spec, err
	}
	for _, patch := range patches {
		pj, err := yaml.YAMLToJSON([]byte(patch))
		if err != nil {
			return spec, fmt.Errorf("podSpecPatch does not parse: %w", err)
		}
		if err := json.Unmarshal(pj, &corev1.PodSpec{}); err != nil {
			return spec, fmt.Errorf("podSpecPatch is not a pod spec: %w", err)
		}
		if cur, err = strategicpatch.StrategicMergePatch(cur, pj, corev1.PodSpec{}); err != nil {
			return spec, fmt.Errorf("podSpecPatch does not apply: %w", err)
		}
	}
	var out corev1.PodSpec
	if err := json.Unmarshal(cur, &out); err != nil {
		return spec, fmt.Errorf("podSpecPatch: %w", err)
	}
	return out, nil
}

func (w *argoWorkflow) executorAccount(t *argoTemplate) string {
	if t.Executor != nil && t.Executor.ServiceAccountName != "" {
		return t.Executor.ServiceAccountName
	}
	if w.spec.Executor != nil {
		return w.spec.Executor.ServiceAccountName
	}
	return ""
}

// hasKey reports whether key is a field of any object within v, to a
// bounded depth.
func hasKey(v any, key string, depth int) bool {
	if depth > 16 {
		return true // deeper than any workflow: assume the worst
	}
	switch x := v.(type) {
	case map[string]any:
		if _, ok := x[key]; ok {
			return true
		}
		for _, e := range x {
			if hasKey(e, key, depth+1) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if hasKey(e, key, depth+1) {
				return true
			}
		}
	}
	return false
}

func firstPtr[T any](ps ...*T) *T {
	for _, p := range ps {
		if p != nil {
			return p
		}
	}
	return nil
}

func firstOf(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// Nested are the objects the workflow's resource templates create, each
// template with templateDefaults merged (a default resource, or default
// flags, count as if written in the template): every document of the
// manifest, in the namespace the flags name. A manifest read from an
// artifact, flags that cannot be judged, or flags naming what kubectl
// acts on for an action that creates or changes objects refuse it.
func (d argoDriver) Nested(obj map[string]any) ([]Nested, error) {
	w, err := decodeArgo(obj, d.spec)
	if err != nil || w == nil {
		return nil, err
	}
	var out []Nested
	for i, ways := range w.templates {
		for way, t := range ways {
			if t.argoType() != "Resource" {
				continue
			}
			path := fmt.Sprintf("%s.templates[%d].resource", w.at, i)
			if way > 0 {
				path += " (with templateDefaults as a controller before v4 merges them)"
			}
			found, err := resourceNested(path, t.Resource)
			if err != nil {
				return nil, err
			}
			out = append(out, found...)
		}
	}
	if w.refs && w.defaults != nil && w.defaults.Resource != nil {
		// The defaults' resource (its flags above all) reaches the
		// resource templates it runs from elsewhere.
		found, err := resourceNested(w.at+".templateDefaults.resource", w.defaults.Resource)
		if err != nil {
			return nil, err
		}
		out = append(out, found...)
	}
	return out, nil
}

// resourceNested reads one resource template (see argoDriver.Nested).
func resourceNested(path string, r *argoResource) ([]Nested, error) {
	var out []Nested
	if len(r.ManifestFrom) > 0 && string(r.ManifestFrom) != "null" {
		return nil, fmt.Errorf("%s.manifestFrom: a manifest read from an artifact cannot be checked before it runs; write it in manifest", path)
	}
	args, err := ParseKubectlFlags(r.Flags)
	if err != nil {
		return nil, fmt.Errorf("%s.flags: %w", path, err)
	}
	if len(args.Positional) > 0 && !actionMayName(r.Action) {
		return nil, fmt.Errorf("%s.flags: %q names what kubectl %s acts on outside the manifest, so it cannot be judged; write the object in manifest", path, strings.Join(args.Positional, " "), r.Action)
	}
	if args.Namespace == "{{workflow.namespace}}" {
		// The controller fills in the workflow's own namespace.
		args.Namespace, args.NamespaceFlag = "", ""
	}
	docs, err := manifestDocuments(path+".manifest", r.Manifest)
	if err != nil {
		return nil, err
	}
	for j := range docs {
		docs[j].Namespace, docs[j].NamespaceFrom = args.Namespace, args.NamespaceFlag
	}
	if len(docs) == 0 && args.Namespace != "" {
		out = append(out, Nested{Path: path + ".flags", Namespace: args.Namespace, NamespaceFrom: args.NamespaceFlag})
	}
	return append(out, docs...), nil
}
