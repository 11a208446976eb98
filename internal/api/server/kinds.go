package server

import (
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/store"
)

// authorizeAuthor checks, when a change is approved, that its author may
// still make it: an approval lets through what was written, so a change
// whose author has since lost the right to write in ns, or to put its
// kind there, is refused rather than approved.
func (s *Server) authorizeAuthor(author policy.User, ns, ref string, admit func(policy.User) error) error {
	if !s.policy().Allowed(author, ns, policy.VerbWrite) {
		return errForbidden("%s was written by %q, who may no longer write in namespace %q; it cannot be approved (reject it, or have someone who may write submit it again)",
			ref, author.Name, ns)
	}
	return admit(author)
}

// authorOf is how the API records who wrote a spec.
func authorOf(u policy.User) *store.Author {
	return &store.Author{Name: u.Name, Groups: u.Groups}
}

// userOf is the author of a stored spec as a user for the policy; specs
// stored before authors were recorded name only the user.
func userOf(a *store.Author, name string) policy.User {
	if a == nil {
		return policy.User{Name: name}
	}
	return policy.User{Name: a.Name, Groups: a.Groups}
}
