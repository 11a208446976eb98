package auth

// KindPolicy is what whoever acts on a member cluster (the submitter, the
// syncer) asks again right before it acts: whether a user may put a kind
// of some scope there from a namespace. *Policy answers it, and so does
// *Identities, which follows the policy file as it is reloaded.
type KindPolicy interface {
	AuthorizeKind(u User, t Target) KindDecision
}

var (
	_ KindPolicy = (*Policy)(nil)
	_ KindPolicy = (*Identities)(nil)
)

// KindPolicyOrEmpty is p, or for nil the policy with no admins and no
// rules, which allows namespaced kinds in their own namespace only: a
// component given no policy still never creates cluster-scoped objects.
func KindPolicyOrEmpty(p KindPolicy) KindPolicy {
	if p != nil {
		return p
	}
	empty, _ := NewPolicy(PolicyFile{}) // an empty file has nothing to refuse
	return empty
}
