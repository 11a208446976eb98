package kubeapi

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strconv"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/policy"
)

// maxReviewBytes bounds a review as sent: a few hundred bytes in
// practice.
const maxReviewBytes = 64 << 10

// readBody reads the body of a request under /k8s, the one way every body
// here is read: at most limit bytes as sent (413 past them), and a JSON or
// YAML body then bounded as it decodes by v1alpha1.BoundedJSON, the bound
// of the REST API's bodies (413 before a YAML alias bomb expands; 400 when
// malformed). It returns JSON, or protobuf as sent: a protobuf message has
// no aliases, and decodes to no more than it was sent as.
func readBody(w http.ResponseWriter, req *request, limit int64) ([]byte, error) {
	data, err := io.ReadAll(http.MaxBytesReader(w, req.r.Body, limit))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return nil, statusErr(http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge,
			"the request body is larger than "+strconv.FormatInt(limit, 10)+" bytes, the most this path takes")
	case err != nil:
		return nil, badRequest("the request body could not be read: " + err.Error())
	}
	ct := req.r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err == nil && mt == runtime.ContentTypeProtobuf {
		return data, nil
	}
	js, err := v1alpha1.BoundedJSON(data, ct)
	var de *v1alpha1.DecodeError
	switch {
	case errors.As(err, &de) && de.TooLarge:
		return nil, statusErr(http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge, "the request body is too large: "+de.Error())
	case err != nil:
		return nil, badRequest("the request body is malformed: " + err.Error())
	}
	return js, nil
}

// review answers the self reviews kubectl auth can-i sends
// (SelfSubjectAccessReview; SelfSubjectRulesReview for --list) from
// purser's policy: what the farm's API would answer, so that tools hide
// what a user may not see. It changes nothing; its body is the review.
func (a *API) review(w http.ResponseWriter, req *request) error {
	p := req.rest
	if len(p) != 4 || p[2] != "v1" || (p[3] != "selfsubjectaccessreviews" && p[3] != "selfsubjectrulesreviews") {
		return notFound(req)
	}
	body, err := readBody(w, req, maxReviewBytes)
	if err != nil {
		return err
	}
	// kubectl sends the typed reviews as protobuf, other clients JSON
	// (YAML arrives here as JSON): apimachinery's universal deserializer
	// reads both.
	obj, _, err := reviewCodecs.UniversalDeserializer().Decode(body, nil, nil)
	if err != nil {
		return badRequest("the body is not a self review of authorization.k8s.io/v1: " + err.Error())
	}
	if p[3] == "selfsubjectrulesreviews" {
		rr, ok := obj.(*authorizationv1.SelfSubjectRulesReview)
		if !ok {
			return badRequest("the body is not a SelfSubjectRulesReview")
		}
		rr.TypeMeta = metav1.TypeMeta{Kind: "SelfSubjectRulesReview", APIVersion: "authorization.k8s.io/v1"}
		cat, err := a.kinds.get(req.r.Context(), req.cluster)
		if err != nil {
			return err
		}
		rr.Status = a.rules(req.user, cat, rr.Spec.Namespace)
		return writeJSON(w, http.StatusCreated, rr)
	}
	ar, ok := obj.(*authorizationv1.SelfSubjectAccessReview)
	if !ok {
		return badRequest("the body is not a SelfSubjectAccessReview")
	}
	ar.TypeMeta = metav1.TypeMeta{Kind: "SelfSubjectAccessReview", APIVersion: "authorization.k8s.io/v1"}
	ar.Status, err = a.access(req, ar.Spec)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, ar)
}

var reviewCodecs = func() serializer.CodecFactory {
	scheme := runtime.NewScheme()
	if err := authorizationv1.AddToScheme(scheme); err != nil {
		panic(err) // the library's own types
	}
	return serializer.NewCodecFactory(scheme)
}()

var readVerbs = []string{"get", "list", "watch"}

func (a *API) access(req *request, spec authorizationv1.SelfSubjectAccessReviewSpec) (authorizationv1.SubjectAccessReviewStatus, error) {
	if n := spec.NonResourceAttributes; n != nil {
		if n.Verb == "get" {
			return authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: "the farm's discovery and version are open to every signed-in user"}, nil
		}
		return authorizationv1.SubjectAccessReviewStatus{Reason: "the farm's Kubernetes API is read-only"}, nil
	}
	ra := spec.ResourceAttributes
	if ra == nil {
		return authorizationv1.SubjectAccessReviewStatus{}, badRequest("the review names neither resourceAttributes nor nonResourceAttributes")
	}
	if k := a.ownKind(ra.Resource); k != nil && ra.Group == OwnGroup && slices.Contains(writeVerbs, ra.Verb) && ra.Subresource == "" {
		// purser's own kinds are written here: the rule of their
		// handlers (MayWrite) answers.
		where := ra.Namespace
		if !k.Namespaced {
			where = ra.Name
		}
		if k.MayWrite == nil {
			return authorizationv1.SubjectAccessReviewStatus{Reason: "purser's API decides each write of " + k.Plural + " when it is made"}, nil
		}
		if err := k.MayWrite(req.user, where); err != nil {
			reason := err.Error()
			if a.cfg.Failure != nil {
				reason = a.cfg.Failure(err).Message
			}
			return authorizationv1.SubjectAccessReviewStatus{Denied: true, Reason: reason}, nil
		}
		return authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: "purser's policy lets " + req.user.Name + " write " + k.Plural + " here"}, nil
	}
	if !slices.Contains(readVerbs, ra.Verb) && ra.Verb != "*" {
		return authorizationv1.SubjectAccessReviewStatus{Reason: fmt.Sprintf("the farm's Kubernetes API is read-only: %s is never allowed; purser's API (/api/v1) changes what runs on member clusters", ra.Verb)}, nil
	}
	if ra.Verb == "*" {
		return authorizationv1.SubjectAccessReviewStatus{Reason: "the farm's Kubernetes API allows only get, list and watch"}, nil
	}
	if ra.Subresource != "" {
		return authorizationv1.SubjectAccessReviewStatus{Reason: "the farm's Kubernetes API serves no subresources"}, nil
	}
	cat, err := a.kinds.get(req.r.Context(), req.cluster)
	if err != nil {
		return authorizationv1.SubjectAccessReviewStatus{}, err
	}
	return a.judgeAccess(req.user, cat, ra), nil
}

// judgeAccess answers a review of reading resources: a wildcard (of
// resource or group) is allowed only when the policy lets u read every
// resource it stands for, as kubectl's users take a yes to '*' to mean;
// the first one refused is named.
func (a *API) judgeAccess(u policy.User, cat *catalogue, ra *authorizationv1.ResourceAttributes) authorizationv1.SubjectAccessReviewStatus {
	var matched []*resource
	for _, r := range cat.all {
		if (ra.Group == "*" || r.gvk.Group == ra.Group) && (ra.Resource == "*" || r.plural == ra.Resource) {
			matched = append(matched, r)
		}
	}
	if len(matched) == 0 {
		return authorizationv1.SubjectAccessReviewStatus{Reason: fmt.Sprintf("the inventory tracks no resource %q in group %q", ra.Resource, ra.Group)}
	}
	for _, res := range matched {
		if err := a.authorize(u, &sel{res: res, namespace: ra.Namespace}, ra.Verb); err != nil {
			reason := err.Error()
			if ra.Resource == "*" || ra.Group == "*" {
				reason = "purser's policy does not let " + u.Name + " " + ra.Verb + " every resource the wildcard stands for: " + reason
			}
			return authorizationv1.SubjectAccessReviewStatus{Denied: true, Reason: reason}
		}
	}
	return authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: "purser's policy lets " + u.Name + " read this"}
}

// rules lists what u may do in ns, as the policy grants it: every
// resource (*.*) to a user who reads every namespace; to one who reads
// ns, the namespaced resources the inventory serves, by name, since the
// cluster-scoped ones (Nodes, CRDs) stay refused; nothing elsewhere.
// Discovery and the reviews themselves always.
func (a *API) rules(u policy.User, cat *catalogue, ns string) authorizationv1.SubjectRulesReviewStatus {
	st := authorizationv1.SubjectRulesReviewStatus{
		ResourceRules: []authorizationv1.ResourceRule{},
		NonResourceRules: []authorizationv1.NonResourceRule{{Verbs: []string{"get"},
			NonResourceURLs: []string{"/api", "/api/*", "/apis", "/apis/*", "/version"}}},
	}
	p := a.cfg.Policy()
	switch {
	case p.ReadsEverywhere(u):
		st.ResourceRules = append(st.ResourceRules, authorizationv1.ResourceRule{Verbs: readVerbs, APIGroups: []string{"*"}, Resources: []string{"*"}})
	case ns != "" && p.Allowed(u, ns, policy.VerbRead):
		byGroup := map[string][]string{}
		for _, r := range cat.all {
			if r.namespaced && !slices.Contains(byGroup[r.gvk.Group], r.plural) {
				byGroup[r.gvk.Group] = append(byGroup[r.gvk.Group], r.plural)
			}
		}
		for _, g := range slices.Sorted(maps.Keys(byGroup)) {
			st.ResourceRules = append(st.ResourceRules, authorizationv1.ResourceRule{Verbs: readVerbs, APIGroups: []string{g},
				Resources: slices.Sorted(slices.Values(byGroup[g]))})
		}
	}
	// What the user may write of purser's own kinds here.
	var writable []string
	for i := range a.cfg.Own {
		k := &a.cfg.Own[i]
		if k.MayWrite != nil && (!k.Namespaced || ns != "") && k.MayWrite(u, ns) == nil {
			writable = append(writable, k.Plural)
		}
	}
	if len(writable) > 0 {
		st.ResourceRules = append(st.ResourceRules, authorizationv1.ResourceRule{Verbs: writeVerbs, APIGroups: []string{OwnGroup}, Resources: writable})
	}
	st.ResourceRules = append(st.ResourceRules, authorizationv1.ResourceRule{Verbs: []string{"create"}, APIGroups: []string{authzGroup},
		Resources: []string{"selfsubjectaccessreviews", "selfsubjectrulesreviews"}})
	return st
}
