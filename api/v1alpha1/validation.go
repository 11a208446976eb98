package v1alpha1

import (
	"encoding/base64"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/jsonpath"
)

// Short statements of what is allowed, shared so that every field of one
// format explains itself the same way.
const (
	subdomainRule   = "must be lowercase letters, digits, '-' and '.', start and end with a letter or digit, at most 253 characters"
	dnsLabelRule    = "must be lowercase letters, digits and '-', start and end with a letter or digit, at most 63 characters"
	clusterNameRule = "must be a cluster name: lowercase letters, digits and '-', starting and ending with a letter or digit, at most 63 characters"
	labelKeyRule    = "must be a label key: an optional DNS prefix and '/', then up to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
	labelValueRule  = "must be empty or up to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
)

// maxAnnotationsBytes is Kubernetes' limit, kept so that annotations that
// purser accepts can also be copied onto member-cluster objects.
const maxAnnotationsBytes = 256 * 1024

// ValidateRunnable returns every problem with r as submitted; now is the
// time the deadline must lie after. It expects SetDefaults to have run but
// accepts unset defaults too. Status is not checked: the server owns it.
func ValidateRunnable(r *Runnable, now time.Time) FieldErrors {
	var v validator
	v.typeMeta(r.TypeMeta, KindRunnable)
	v.objectMeta(r.Metadata, metaRules{kind: KindRunnable, namespaced: true, generateName: true})
	v.template(r.Spec.Template, checkedNamespace(r.Metadata.Namespace))
	if r.Spec.Template["apiVersion"] == "v1" && r.Spec.Template["kind"] == "Secret" {
		// Refused rather than sealed: a Secret is configuration, not work,
		// and a Runnable's template is stored, returned, audited and
		// re-created on failover as written.
		v.add("spec.template.kind", "a Secret cannot be a Runnable, whose template is stored and shown as written; declare it as a Deployable, whose values purser seals at rest and never returns")
	}
	v.placement("spec.placement", r.Spec.Placement)
	if d := r.Spec.Deadline; d != nil && !d.After(now) {
		v.add("spec.deadline", "must be in the future: it is the last time the Runnable may be submitted")
	}
	if ttl := r.Spec.TTLSecondsAfterFinished; ttl != nil && (*ttl < 0 || *ttl > MaxTTLSecondsAfterFinished) {
		v.add("spec.ttlSecondsAfterFinished", "must be between 0 and %d (10 years)", MaxTTLSecondsAfterFinished)
	}
	v.failover("spec.failover", r.Spec.Failover)
	v.demand(&r.Spec)
	v.retry("spec.retry", r.Spec.Retry)
	return v.errs
}

// MaxTTLSecondsAfterFinished bounds spec.ttlSecondsAfterFinished, so that
// the time it names stays a time every database can store.
const MaxTTLSecondsAfterFinished = 10 * 365 * 24 * 3600

// ValidateDeployable returns every problem with d as written by a user.
func ValidateDeployable(d *Deployable) FieldErrors {
	var v validator
	v.typeMeta(d.TypeMeta, KindDeployable)
	v.objectMeta(d.Metadata, metaRules{kind: KindDeployable, namespaced: true})
	v.template(d.Spec.Template, checkedNamespace(d.Metadata.Namespace))
	if md, ok := d.Spec.Template["metadata"].(map[string]any); ok && md["generateName"] != nil {
		// A Deployable is one object per cluster, found again by name on
		// every sync; a generated name would make a new one each time.
		v.add("spec.template.metadata.generateName", "is not supported in a Deployable; set metadata.name")
	}
	v.secretData(d.Spec.Template)
	v.placement("spec.placement", d.Spec.Placement)
	v.rollout("spec.rollout", d.Spec.Rollout)
	v.overrides("spec.overrides", d.Spec.Overrides, d.Spec.Template)
	v.mode("spec.mode", d.Spec.Mode)
	return v.errs
}

// ValidateCluster returns every problem with c as registered; the
// kubeconfig is required.
func ValidateCluster(c *Cluster) FieldErrors {
	return validateCluster(c, true)
}

// ValidateClusterUpdate returns every problem with an update of old to c.
// The kubeconfig may be left empty, since it is never returned and an
// update read back from the API cannot carry it; the name cannot change.
func ValidateClusterUpdate(old, c *Cluster) FieldErrors {
	errs := validateCluster(c, false)
	if old.Metadata.Name != c.Metadata.Name {
		errs = append(errs, FieldError{Field: "metadata.name", Message: fmt.Sprintf("cannot change from %q; register a new Cluster instead", old.Metadata.Name)})
	}
	return errs
}

func validateCluster(c *Cluster, kubeconfigRequired bool) FieldErrors {
	var v validator
	v.typeMeta(c.TypeMeta, KindCluster)
	v.objectMeta(c.Metadata, metaRules{kind: KindCluster, nameIsLabel: true})
	switch {
	case c.Spec.Kubeconfig != "":
		v.kubeconfig("spec.kubeconfig", c.Spec.Kubeconfig)
	case kubeconfigRequired:
		v.add("spec.kubeconfig", "is required: the kubeconfig text purser uses to reach the cluster")
	}
	v.taints("spec.taints", c.Spec.Taints)
	if c.Spec.Inventory != nil {
		seen := map[string]bool{}
		for i, k := range c.Spec.Inventory.Kinds {
			field := fmt.Sprintf("spec.inventory.kinds[%d]", i)
			switch {
			case !slices.Contains(InventoryKinds, k):
				v.add(field, "%q cannot be tracked on request: the kinds are %s (the others are tracked on every cluster)", k, strings.Join(InventoryKinds, ", "))
			case seen[k]:
				v.add(field, "%q is named twice", k)
			}
			seen[k] = true
		}
	}
	return v.errs
}

// validator collects problems, so that one answer lists all of them rather
// than making the user fix and resend one at a time.
type validator struct {
	errs FieldErrors
}

func (v *validator) add(field, format string, args ...any) {
	v.errs = append(v.errs, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

func (v *validator) typeMeta(tm TypeMeta, kind string) {
	if tm.APIVersion != GroupVersion {
		v.add("apiVersion", "must be %s", GroupVersion)
	}
	if tm.Kind != kind {
		v.add("kind", "must be %s", kind)
	}
}

type metaRules struct {
	kind         string
	namespaced   bool
	generateName bool
	nameIsLabel  bool
}

func (v *validator) objectMeta(m ObjectMeta, rules metaRules) {
	switch {
	case m.Name != "":
		v.name("metadata.name", m.Name, rules.nameIsLabel)
	case m.GenerateName != "" && rules.generateName:
		// Validating the prefix with a stand-in suffix checks exactly what
		// the generated name will be: same length, same character rules.
		if len(content.IsDNS1123Subdomain(m.GenerateName+strings.Repeat("a", generatedSuffixLength))) > 0 {
			v.add("metadata.generateName", "%s must be a name prefix: lowercase letters, digits, '-' and '.', starting with a letter or digit, at most %d characters", quote(m.GenerateName), content.DNS1123SubdomainMaxLength-generatedSuffixLength)
		}
	case rules.generateName:
		v.add("metadata.name", "is required, or set metadata.generateName")
	default:
		v.add("metadata.name", "is required")
	}
	if m.GenerateName != "" && !rules.generateName {
		v.add("metadata.generateName", "is not supported for a %s; set metadata.name", rules.kind)
	}
	switch {
	case !rules.namespaced && m.Namespace != "":
		v.add("metadata.namespace", "must be empty: a %s has no namespace", rules.kind)
	case rules.namespaced && m.Namespace == "":
		v.add("metadata.namespace", "is required: it is also the namespace on the member cluster")
	case rules.namespaced && len(content.IsDNS1123Label(m.Namespace)) > 0:
		v.add("metadata.namespace", "%s %s", quote(m.Namespace), dnsLabelRule)
	}
	v.labels("metadata.labels", m.Labels)
	v.annotations("metadata.annotations", m.Annotations)
}

func (v *validator) name(field, name string, isLabel bool) {
	if isLabel {
		if len(content.IsDNS1123Label(name)) > 0 {
			v.add(field, "%s %s", quote(name), dnsLabelRule)
		}
		return
	}
	if len(content.IsDNS1123Subdomain(name)) > 0 {
		v.add(field, "%s %s", quote(name), subdomainRule)
	}
}

func (v *validator) labels(field string, labels map[string]string) {
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if len(content.IsLabelKey(k)) > 0 {
			v.add(field, "key %s %s", quote(k), labelKeyRule)
		}
		if len(content.IsLabelValue(labels[k])) > 0 {
			v.add(field+"["+k+"]", "%s %s", quote(labels[k]), labelValueRule)
		}
	}
}

func (v *validator) annotations(field string, annotations map[string]string) {
	total := 0
	for _, k := range slices.Sorted(maps.Keys(annotations)) {
		if len(content.IsLabelKey(k)) > 0 {
			v.add(field, "key %s %s", quote(k), labelKeyRule)
		}
		total += len(k) + len(annotations[k])
	}
	if total > maxAnnotationsBytes {
		v.add(field, "are %d bytes; at most %d are allowed", total, maxAnnotationsBytes)
	}
}

// checkedNamespace returns ns if it is valid, and "" otherwise, so that a
// bad metadata.namespace is reported once rather than again through every
// field that must agree with it.
func checkedNamespace(ns string) string {
	if len(content.IsDNS1123Label(ns)) > 0 {
		return ""
	}
	return ns
}

// template checks what purser itself relies on: enough to know the object's
// type and identity. The rest is the member cluster's business. An empty
// namespace skips the check that the template's namespace agrees.
func (v *validator) template(tmpl map[string]any, namespace string) {
	const field = "spec.template"
	if len(tmpl) == 0 {
		v.add(field, "is required: the Kubernetes object, with apiVersion and kind")
		return
	}
	if apiVersion, _ := tmpl["apiVersion"].(string); apiVersion == "" {
		v.add(field+".apiVersion", "is required: a string such as v1 or batch/v1")
	} else if _, err := schema.ParseGroupVersion(apiVersion); err != nil {
		v.add(field+".apiVersion", "%s must be version or group/version, such as v1 or batch/v1", quote(apiVersion))
	}
	if kind, _ := tmpl["kind"].(string); kind == "" {
		v.add(field+".kind", "is required: a string such as Job or ConfigMap")
	}
	var md map[string]any
	switch raw := tmpl["metadata"].(type) {
	case nil:
		return
	case map[string]any:
		md = raw
	default:
		v.add(field+".metadata", "must be an object")
		return
	}
	switch name := md["name"].(type) {
	case nil:
	case string:
		if name != "" && len(content.IsDNS1123Subdomain(name)) > 0 {
			v.add(field+".metadata.name", "%s %s", quote(name), subdomainRule)
		}
	default:
		v.add(field+".metadata.name", "must be a string")
	}
	switch ns := md["namespace"].(type) {
	case nil:
	case string:
		if ns != "" && namespace != "" && ns != namespace {
			v.add(field+".metadata.namespace", "must be unset or %s, the namespace in metadata", quote(namespace))
		}
	default:
		v.add(field+".metadata.namespace", "must be a string")
	}
}

// secretData checks that a Secret's data can be decoded, because the syncer
// would otherwise fail on every cluster, long after the request succeeded.
func (v *validator) secretData(tmpl map[string]any) {
	if tmpl["apiVersion"] != "v1" || tmpl["kind"] != "Secret" {
		return
	}
	if raw := tmpl["data"]; raw != nil {
		data, ok := raw.(map[string]any)
		if !ok {
			v.add("spec.template.data", "must be an object of base64 strings")
		}
		for _, k := range slices.Sorted(maps.Keys(data)) {
			s, ok := data[k].(string)
			if _, err := base64.StdEncoding.DecodeString(s); !ok || err != nil {
				v.add("spec.template.data["+k+"]", "must be base64-encoded; put plain text in stringData")
			}
		}
	}
	if raw := tmpl["stringData"]; raw != nil {
		data, ok := raw.(map[string]any)
		if !ok {
			v.add("spec.template.stringData", "must be an object of strings")
		}
		for _, k := range slices.Sorted(maps.Keys(data)) {
			if _, ok := data[k].(string); !ok {
				v.add("spec.template.stringData["+k+"]", "must be a string")
			}
		}
	}
}

func (v *validator) placement(field string, p Placement) {
	if a := p.ClusterAffinity; a != nil {
		f := field + ".clusterAffinity"
		for i, name := range a.ClusterNames {
			if len(content.IsDNS1123Label(name)) > 0 {
				v.add(fmt.Sprintf("%s.clusterNames[%d]", f, i), "%s %s", quote(name), clusterNameRule)
			}
		}
		if a.LabelSelector != nil {
			if _, err := metav1.LabelSelectorAsSelector(a.LabelSelector); err != nil {
				// Kubernetes follows its rule with examples and the regular
				// expression; the rule alone is the clear part.
				msg, _, _ := strings.Cut(err.Error(), " (e.g. ")
				v.add(f+".labelSelector", "is not a valid label selector: %s", msg)
			}
		}
		for i, name := range a.Exclude {
			if len(content.IsDNS1123Label(name)) > 0 {
				v.add(fmt.Sprintf("%s.exclude[%d]", f, i), "%s %s", quote(name), clusterNameRule)
			}
		}
	}
	for i, t := range p.ClusterTolerations {
		v.toleration(fmt.Sprintf("%s.clusterTolerations[%d]", field, i), t)
	}
}

// toleration applies Kubernetes' rules for pod tolerations, since cluster
// taints and tolerations are meant to read exactly like node ones.
func (v *validator) toleration(field string, t corev1.Toleration) {
	switch t.Operator {
	case "", corev1.TolerationOpEqual:
		if t.Key == "" {
			v.add(field+".key", "is required unless operator is Exists")
		}
		if len(content.IsLabelValue(t.Value)) > 0 {
			v.add(field+".value", "%s %s", quote(t.Value), labelValueRule)
		}
	case corev1.TolerationOpExists:
		if t.Value != "" {
			v.add(field+".value", "must be empty when operator is Exists")
		}
	default:
		v.add(field+".operator", "must be Equal or Exists")
	}
	if t.Key != "" && len(content.IsLabelKey(t.Key)) > 0 {
		v.add(field+".key", "%s %s", quote(t.Key), labelKeyRule)
	}
	switch t.Effect {
	case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		v.add(field+".effect", "must be NoSchedule, PreferNoSchedule, NoExecute or empty (any)")
	}
	if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
		v.add(field+".tolerationSeconds", "is only allowed with effect NoExecute")
	}
}

func (v *validator) taints(field string, taints []corev1.Taint) {
	seen := map[[2]string]bool{}
	for i, t := range taints {
		f := fmt.Sprintf("%s[%d]", field, i)
		switch {
		case t.Key == "":
			v.add(f+".key", "is required")
		case len(content.IsLabelKey(t.Key)) > 0:
			v.add(f+".key", "%s %s", quote(t.Key), labelKeyRule)
		}
		if len(content.IsLabelValue(t.Value)) > 0 {
			v.add(f+".value", "%s %s", quote(t.Value), labelValueRule)
		}
		switch t.Effect {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			v.add(f+".effect", "must be NoSchedule, PreferNoSchedule or NoExecute")
		}
		id := [2]string{t.Key, string(t.Effect)}
		if seen[id] {
			v.add(f, "repeats key %s with effect %s; one taint per key and effect", quote(t.Key), t.Effect)
		}
		seen[id] = true
	}
}

func (v *validator) kubeconfig(field, text string) {
	cfg, err := clientcmd.Load([]byte(text))
	if err != nil {
		v.add(field, "is not a readable kubeconfig: %v", err)
		return
	}
	if cfg.CurrentContext == "" {
		v.add(field, "must set current-context: purser connects through it")
		return
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	if ctx == nil {
		v.add(field, "current-context %s names no context in the file", quote(cfg.CurrentContext))
		return
	}
	cluster := cfg.Clusters[ctx.Cluster]
	if cluster == nil {
		v.add(field, "context %s names cluster %s, which is not in the file", quote(cfg.CurrentContext), quote(ctx.Cluster))
		return
	}
	u, err := url.Parse(cluster.Server)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		v.add(field, "cluster %s must have a server URL such as https://10.0.0.1:6443, not %s", quote(ctx.Cluster), quote(cluster.Server))
	}
}

var (
	applicationPurgeModes = []string{PurgeDirectly, PurgeGracefully, PurgeNever}
	// Never is not offered for a lost cluster: what is left there may come
	// back to life, and only purser can fence it.
	clusterPurgeModes    = []string{PurgeDirectly, PurgeGracefully}
	consistencies        = []string{ConsistencyAtMostOne, ConsistencyAtLeastOne}
	restorePointPolicies = []string{RestorePointRequired, RestorePointIfAvailable}
)

func (v *validator) failover(field string, f *Failover) {
	if f == nil {
		return
	}
	v.enum(field+".consistency", f.Consistency, consistencies)
	if a := f.Application; a != nil {
		af := field + ".application"
		v.enum(af+".purgeMode", a.PurgeMode, applicationPurgeModes)
		if a.TolerationSeconds != nil && *a.TolerationSeconds < 0 {
			v.add(af+".tolerationSeconds", "must be 0 or more")
		}
		if a.InitialTolerationSeconds != nil && *a.InitialTolerationSeconds < 0 {
			v.add(af+".initialTolerationSeconds", "must be 0 or more")
		}
		if a.GracePeriodSeconds != nil && *a.GracePeriodSeconds < 0 {
			v.add(af+".gracePeriodSeconds", "must be 0 or more")
		}
		if sp := a.StatePreservation; sp != nil {
			v.preservationRules(af+".statePreservation.rules", sp.Rules)
			v.enum(af+".statePreservation.restorePoint", sp.RestorePoint, restorePointPolicies)
		}
	}
	if c := f.Cluster; c != nil {
		v.enum(field+".cluster.purgeMode", c.PurgeMode, clusterPurgeModes)
	}
	for i, m := range f.Mutations {
		v.mutation(fmt.Sprintf("%s.mutations[%d]", field, i), m)
	}
}

// enum accepts the empty string, which SetDefaults fills in.
func (v *validator) enum(field, value string, allowed []string) {
	if value != "" && !slices.Contains(allowed, value) {
		v.add(field, "must be %s", orList(allowed))
	}
}

func (v *validator) preservationRules(field string, rules []StatePreservationRule) {
	seen := map[string]bool{}
	for i, r := range rules {
		f := fmt.Sprintf("%s[%d]", field, i)
		switch {
		case r.AliasLabelName == "":
			v.add(f+".aliasLabelName", "is required: the key under which the value is kept in status.preserved")
		case len(content.IsLabelKey(r.AliasLabelName)) > 0:
			v.add(f+".aliasLabelName", "%s %s", quote(r.AliasLabelName), labelKeyRule)
		case seen[r.AliasLabelName]:
			v.add(f+".aliasLabelName", "%s is already used by an earlier rule", quote(r.AliasLabelName))
		}
		seen[r.AliasLabelName] = true
		if msg := checkJSONPath(r.JSONPath); msg != "" {
			v.add(f+".jsonPath", "%s", msg)
		}
	}
}

func checkJSONPath(expr string) string {
	const example = "such as {.jobStatus.jobId}, evaluated against .status"
	if expr == "" {
		return "is required: a JSONPath template " + example
	}
	p, err := jsonpath.Parse("statePreservation", expr)
	if err != nil {
		return fmt.Sprintf("is not a valid JSONPath template (%v); write one %s", err, example)
	}
	// Text outside braces parses as a constant; a rule that never reads the
	// status is a mistake (usually missing braces), not a wish.
	for _, n := range p.Root.Nodes {
		if n.Type() != jsonpath.NodeText {
			return ""
		}
	}
	return "reads nothing from the status; put the path in braces, " + example
}

// mutationPathSegment is one map key of a template path; dots separate
// keys, so keys with dots cannot be reached.
var mutationPathSegment = regexp.MustCompile(`^[A-Za-z0-9_/-]+$`)

// Paths that name the object itself: a mutation there would turn the next
// attempt into a different object, which purser would no longer track.
var immutablePaths = []string{"apiVersion", "kind", "metadata", "metadata.name", "metadata.namespace"}

func (v *validator) mutation(field string, m Mutation) {
	if m.When == "" {
		v.add(field+".when", "is required: a CEL bool expression over %s; write true to always apply", MutationVariable)
	} else if msg := compileMutation(m.When, true); msg != "" {
		v.add(field+".when", "%s", msg)
	}
	switch {
	case m.Path == "":
		v.add(field+".path", "is required: a dotted path into the template, such as spec.job.initialSavepointPath")
	case slices.Contains(immutablePaths, m.Path):
		v.add(field+".path", "cannot change the object's identity (%s)", strings.Join(immutablePaths, ", "))
	default:
		for seg := range strings.SplitSeq(m.Path, ".") {
			if !mutationPathSegment.MatchString(seg) {
				v.add(field+".path", "%s must be keys of letters, digits, '_', '-' or '/', joined by dots, such as spec.job.initialSavepointPath", quote(m.Path))
				break
			}
		}
	}
	if m.Value == "" {
		v.add(field+".value", "is required: a CEL expression over %s, such as %s", MutationVariable, `'s3://checkpoints/' + preserved['flink.apache.org/job-id']`)
	} else if msg := compileMutation(m.Value, false); msg != "" {
		v.add(field+".value", "%s", msg)
	}
}

func orList(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}

// quote shows a user's value in a message, cut short so that a huge value
// does not become a huge error.
func quote(s string) string {
	const limit = 64
	if len(s) > limit {
		return fmt.Sprintf("%q...", s[:limit])
	}
	return fmt.Sprintf("%q", s)
}
