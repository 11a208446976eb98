package agent

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
)

// accessTTL is how long a verdict on a resource is kept: a role granted or
// revoked takes effect on the agent within it.
const accessTTL = 5 * time.Minute

// access asks the API server (SelfSubjectAccessReview, which every
// authenticated user may create) whether the agent may list and watch a
// resource in every namespace, before it watches the resource for
// purser's labels. An agent under a narrowed role then watches what it may
// and says once which kinds it leaves out, instead of retrying refused
// lists forever and logging each refusal.
type access struct {
	reviews authorizationv1client.SelfSubjectAccessReviewInterface

	mu       sync.Mutex
	verdicts map[schema.GroupResource]verdict
	reported string // the refused resources last logged
}

type verdict struct {
	allowed bool
	at      time.Time
}

func newAccess(reviews authorizationv1client.SelfSubjectAccessReviewInterface) *access {
	return &access{reviews: reviews, verdicts: map[schema.GroupResource]verdict{}}
}

// mayWatch reports whether list and watch on gr are allowed in every
// namespace. A review that fails counts as allowed: the watch will then
// say what is wrong, as it did before reviews.
func (ac *access) mayWatch(ctx context.Context, gr schema.GroupResource) bool {
	// The default role grants every resource: one review of the wildcard
	// answers for all of them.
	return ac.review(ctx, everything) || ac.review(ctx, gr)
}

// everything stands for every resource of every group in a review.
var everything = schema.GroupResource{Group: "*", Resource: "*"}

// review asks whether list and watch on gr are allowed, or answers from a
// recent verdict.
func (ac *access) review(ctx context.Context, gr schema.GroupResource) bool {
	ac.mu.Lock()
	v, ok := ac.verdicts[gr]
	ac.mu.Unlock()
	if ok && time.Since(v.at) < accessTTL {
		return v.allowed
	}
	allowed := true
	for _, verb := range []string{"list", "watch"} {
		review, err := ac.reviews.Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: verb, Group: gr.Group, Resource: gr.Resource}},
		}, metav1.CreateOptions{})
		if err != nil {
			return gr != everything // not remembered: asked again on the next pass
		}
		if !review.Status.Allowed {
			allowed = false
			break
		}
	}
	ac.mu.Lock()
	ac.verdicts[gr] = verdict{allowed: allowed, at: time.Now()}
	ac.mu.Unlock()
	return allowed
}

// report logs the refused resources when they differ from the last ones
// logged.
func (ac *access) report(log *slog.Logger, refused []string) {
	slices.Sort(refused)
	joined := strings.Join(refused, ",")
	ac.mu.Lock()
	changed := joined != ac.reported
	ac.reported = joined
	ac.mu.Unlock()
	if changed && len(refused) > 0 {
		log.Info("not allowed to list and watch these resources in every namespace; purser's objects of their kinds are not tracked",
			"resources", refused)
	}
}
