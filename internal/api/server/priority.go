package server

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/policy"
)

// defaultPriority gives a runnable of ns without spec.priority the
// namespace's default class, where the policy names one. It is written
// into the stored spec, as the retention default is, so that the spec
// says what the queue orders it by, and a later change of the policy's
// default does not reorder work already accepted.
func (s *Server) defaultPriority(ns string, spec *v1alpha1.RunnableSpec) {
	if spec.Priority != nil {
		return
	}
	if c := s.policy().DefaultPriorityClass(ns); c != "" {
		p := intstr.FromString(c)
		spec.Priority = &p
	}
}

// authorizePriority refuses, with 422 naming the classes ns may use, a
// spec.priority u may not give: the queue is the farm's, so a tenant's
// choice is bounded to the classes the policy allows its namespace, and
// an integer is for the farm's admins (policy.Policy.AuthorizePriority).
// what names the spec's author when it is not the caller (an approval).
func (s *Server) authorizePriority(u policy.User, ns string, spec *v1alpha1.RunnableSpec, what string) error {
	r := s.policy().AuthorizePriority(u, ns, spec.Priority)
	if r == nil {
		return nil
	}
	msg := fmt.Sprintf("user %q may not give a runnable of namespace %s the priority %s: %s", u.Name, ns, spec.Priority.String(), r.Reason)
	if what != "" {
		msg = what + ": " + msg
	}
	return errInvalid(msg, []v1alpha1.FieldError{{Field: "spec.priority", Message: r.Reason}})
}
