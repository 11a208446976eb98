package kubeapi

import (
	"mime"
	"net/http"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	apidiscoveryv2beta1 "k8s.io/api/apidiscovery/v2beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var verbs = []string{"get", "list", "watch"}

// The authorization group serves the self reviews kubectl auth can-i asks.
const authzGroup = "authorization.k8s.io"

// aggregatedVersion is the apidiscovery version the client asked for
// (Accept application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,
// or v2beta1), "" for the legacy lists. The first acceptable media type
// wins, as in the kube-apiserver's negotiation
// (apiserver/pkg/endpoints/discovery/aggregated/negotiation.go).
func aggregatedVersion(r *http.Request) string {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		if mt != "application/json" && mt != "*/*" {
			continue
		}
		if params["g"] == "apidiscovery.k8s.io" && params["as"] == "APIGroupDiscoveryList" && (params["v"] == "v2" || params["v"] == "v2beta1") {
			return params["v"]
		}
		if params["g"] == "" && params["as"] == "" {
			return ""
		}
	}
	return ""
}

// discoverCore serves /api.
func (a *API) discoverCore(w http.ResponseWriter, req *request) error {
	if v := aggregatedVersion(req.r); v != "" {
		return a.aggregated(w, req, v, true)
	}
	return writeJSON(w, http.StatusOK, &metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"},
		ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: req.r.Host}}})
}

// discoverGroups serves /apis.
func (a *API) discoverGroups(w http.ResponseWriter, req *request) error {
	if v := aggregatedVersion(req.r); v != "" {
		return a.aggregated(w, req, v, false)
	}
	cat, err := a.kinds.get(req.r.Context(), req.cluster)
	if err != nil {
		return err
	}
	list := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{}}
	for _, g := range cat.groups() {
		if g != "" {
			list.Groups = append(list.Groups, apiGroup(g, cat.versions(g)))
		}
	}
	list.Groups = append(list.Groups, apiGroup(authzGroup, []string{"v1"}))
	return writeJSON(w, http.StatusOK, list)
}

func apiGroup(name string, versions []string) metav1.APIGroup {
	g := metav1.APIGroup{TypeMeta: metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}, Name: name}
	for _, v := range versions {
		g.Versions = append(g.Versions, metav1.GroupVersionForDiscovery{GroupVersion: name + "/" + v, Version: v})
	}
	if len(g.Versions) > 0 {
		g.PreferredVersion = g.Versions[len(g.Versions)-1]
	}
	return g
}

// groupInfo serves /apis/{group}.
func (a *API) groupInfo(w http.ResponseWriter, req *request, group string) error {
	if group == authzGroup {
		return writeJSON(w, http.StatusOK, apiGroup(authzGroup, []string{"v1"}))
	}
	cat, err := a.kinds.get(req.r.Context(), req.cluster)
	if err != nil {
		return err
	}
	vs := cat.versions(group)
	if len(vs) == 0 {
		return notFound(req)
	}
	return writeJSON(w, http.StatusOK, apiGroup(group, vs))
}

// resourceList serves /api/v1 and /apis/{group}/{version}.
func (a *API) resourceList(w http.ResponseWriter, req *request, group, version string) error {
	gv := version
	if group != "" {
		gv = group + "/" + version
	}
	list := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv, APIResources: []metav1.APIResource{}}
	if group == authzGroup && version == "v1" {
		for _, r := range []string{"selfsubjectaccessreviews", "selfsubjectrulesreviews"} {
			list.APIResources = append(list.APIResources, metav1.APIResource{Name: r, SingularName: strings.TrimSuffix(r, "s"),
				Kind: reviewKind(r), Verbs: []string{"create"}})
		}
		return writeJSON(w, http.StatusOK, list)
	}
	cat, err := a.kinds.get(req.r.Context(), req.cluster)
	if err != nil {
		return err
	}
	rs := cat.resources(group, version)
	if len(rs) == 0 {
		return notFound(req)
	}
	for _, r := range rs {
		list.APIResources = append(list.APIResources, metav1.APIResource{Name: r.plural, SingularName: r.singular,
			Namespaced: r.namespaced, Kind: r.gvk.Kind, Verbs: r.verbs(), ShortNames: r.shortNames, Categories: r.categories})
	}
	return writeJSON(w, http.StatusOK, list)
}

func reviewKind(resource string) string {
	if resource == "selfsubjectaccessreviews" {
		return "SelfSubjectAccessReview"
	}
	return "SelfSubjectRulesReview"
}

// aggregated serves /api or /apis as one APIGroupDiscoveryList of the
// apidiscovery version v.
func (a *API) aggregated(w http.ResponseWriter, req *request, v string, core bool) error {
	cat, err := a.kinds.get(req.r.Context(), req.cluster)
	if err != nil {
		return err
	}
	list := apidiscoveryv2.APIGroupDiscoveryList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupDiscoveryList", APIVersion: "apidiscovery.k8s.io/" + v},
		Items: []apidiscoveryv2.APIGroupDiscovery{}}
	groups := []string{""}
	if !core {
		groups = nil
		for _, g := range cat.groups() {
			if g != "" {
				groups = append(groups, g)
			}
		}
	}
	for _, g := range groups {
		item := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: g}}
		vs := cat.versions(g)
		// Newest first, as the kube-apiserver lists them: the first is
		// the preferred version.
		for i := len(vs) - 1; i >= 0; i-- {
			ver := apidiscoveryv2.APIVersionDiscovery{Version: vs[i], Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent}
			for _, r := range cat.resources(g, vs[i]) {
				scope := apidiscoveryv2.ScopeCluster
				if r.namespaced {
					scope = apidiscoveryv2.ScopeNamespace
				}
				ver.Resources = append(ver.Resources, apidiscoveryv2.APIResourceDiscovery{Resource: r.plural,
					ResponseKind: &metav1.GroupVersionKind{Group: g, Version: vs[i], Kind: r.gvk.Kind}, Scope: scope,
					SingularResource: r.singular, Verbs: r.verbs(), ShortNames: r.shortNames, Categories: r.categories})
			}
			item.Versions = append(item.Versions, ver)
		}
		if core && len(item.Versions) == 0 {
			item.Versions = []apidiscoveryv2.APIVersionDiscovery{{Version: "v1", Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent}}
		}
		list.Items = append(list.Items, item)
	}
	if !core {
		ver := apidiscoveryv2.APIVersionDiscovery{Version: "v1", Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent}
		for _, r := range []string{"selfsubjectaccessreviews", "selfsubjectrulesreviews"} {
			ver.Resources = append(ver.Resources, apidiscoveryv2.APIResourceDiscovery{Resource: r,
				ResponseKind: &metav1.GroupVersionKind{Group: authzGroup, Version: "v1", Kind: reviewKind(r)},
				Scope:        apidiscoveryv2.ScopeCluster, SingularResource: strings.TrimSuffix(r, "s"), Verbs: []string{"create"}})
		}
		list.Items = append(list.Items, apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: authzGroup},
			Versions: []apidiscoveryv2.APIVersionDiscovery{ver}})
	}
	// The client tells the aggregated answer from a legacy one by the
	// Content-Type (client-go discovery: AcceptV2, isV2Beta1ContentType).
	w.Header().Set("Content-Type", "application/json;g=apidiscovery.k8s.io;v="+v+";as=APIGroupDiscoveryList")
	var body any = list
	if v == "v2beta1" {
		// The two versions have the same fields; v2beta1's types keep the
		// answer typed as the client decodes it.
		body = toV2beta1(list)
	}
	return writeJSON(w, http.StatusOK, body)
}

func toV2beta1(l apidiscoveryv2.APIGroupDiscoveryList) apidiscoveryv2beta1.APIGroupDiscoveryList {
	out := apidiscoveryv2beta1.APIGroupDiscoveryList{TypeMeta: l.TypeMeta}
	for _, g := range l.Items {
		og := apidiscoveryv2beta1.APIGroupDiscovery{ObjectMeta: g.ObjectMeta}
		for _, v := range g.Versions {
			ov := apidiscoveryv2beta1.APIVersionDiscovery{Version: v.Version, Freshness: apidiscoveryv2beta1.DiscoveryFreshness(v.Freshness)}
			for _, r := range v.Resources {
				ov.Resources = append(ov.Resources, apidiscoveryv2beta1.APIResourceDiscovery{Resource: r.Resource, ResponseKind: r.ResponseKind,
					Scope: apidiscoveryv2beta1.ResourceScope(r.Scope), SingularResource: r.SingularResource, Verbs: r.Verbs,
					ShortNames: r.ShortNames, Categories: r.Categories})
			}
			og.Versions = append(og.Versions, ov)
		}
		out.Items = append(out.Items, og)
	}
	return out
}
