package server

import (
	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/policy"
)

// seesClusterDetail reports whether u is shown what failed, in words, on
// a member cluster: admins, who run the farm.
func (s *Server) seesClusterDetail(u policy.User) bool { return s.policy().IsAdmin(u) }

// hideClusterDetail leaves of a cluster's status what a tenant needs to
// judge where work can run (each condition's type, status, reason and
// time; each DC's outcome and times; the agent's times and freshness),
// and takes out what failed, in words: a probe's error names the member's
// API address and the transport's error ("dial tcp 10.0.0.7:6443:
// connect: connection refused"), which tell a tenant where the farm's
// control planes listen and are for those who run it. The agent's error
// is left out by agentStatus, before its freshness is judged, so that the
// judgement's message does not repeat it.
func hideClusterDetail(st *v1alpha1.ClusterStatus) {
	for i := range st.Conditions {
		st.Conditions[i].Message = ""
	}
	for i := range st.Views {
		st.Views[i].Detail = ""
	}
}
