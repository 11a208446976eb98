package kubeapi

import (
	"fmt"
	"io"
	"net/http"
	"slices"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	"github.com/purser-io/purser/internal/api/auth"
)

// review answers the self reviews kubectl auth can-i sends
// (SelfSubjectAccessReview; SelfSubjectRulesReview for --list) from
// purser's policy: what the farm's API would answer, so that tools hide
// what a user may not see. It changes nothing; its body is the review.
func (a *API) review(w http.ResponseWriter, req *request) error {
	p := req.rest
	if len(p) != 4 || p[2] != "v1" || (p[3] != "selfsubjectaccessreviews" && p[3] != "selfsubjectrulesreviews") {
		return notFound(req)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, req.r.Body, 1<<16))
	if err != nil {
		return badRequest("the review could not be read: " + err.Error())
	}
	// kubectl sends the typed reviews as protobuf, other clients JSON:
	// apimachinery's universal deserializer reads both.
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
		rr.Status = a.rules(req.user, rr.Spec.Namespace)
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
	var res *resource
	for _, r := range cat.all {
		if r.gvk.Group == ra.Group && (r.plural == ra.Resource || ra.Resource == "*") {
			res = r
			break
		}
	}
	if res == nil {
		return authorizationv1.SubjectAccessReviewStatus{Reason: fmt.Sprintf("the inventory tracks no resource %q in group %q", ra.Resource, ra.Group)}, nil
	}
	q := &sel{res: res, namespace: ra.Namespace}
	if err := a.authorize(req.user, q, ra.Verb); err != nil {
		return authorizationv1.SubjectAccessReviewStatus{Denied: true, Reason: err.Error()}, nil
	}
	return authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: "purser's policy lets " + req.user.Name + " read this"}, nil
}

// rules lists what u may do in ns: read every tracked resource, or
// nothing; discovery always.
func (a *API) rules(u auth.User, ns string) authorizationv1.SubjectRulesReviewStatus {
	st := authorizationv1.SubjectRulesReviewStatus{
		ResourceRules: []authorizationv1.ResourceRule{},
		NonResourceRules: []authorizationv1.NonResourceRule{{Verbs: []string{"get"},
			NonResourceURLs: []string{"/api", "/api/*", "/apis", "/apis/*", "/version"}}},
	}
	p := a.cfg.Policy()
	if p.ReadsEverywhere(u) || (ns != "" && p.Allowed(u, ns, auth.VerbRead)) {
		st.ResourceRules = append(st.ResourceRules, authorizationv1.ResourceRule{Verbs: readVerbs, APIGroups: []string{"*"}, Resources: []string{"*"}})
	}
	st.ResourceRules = append(st.ResourceRules, authorizationv1.ResourceRule{Verbs: []string{"create"}, APIGroups: []string{authzGroup},
		Resources: []string{"selfsubjectaccessreviews", "selfsubjectrulesreviews"}})
	return st
}
