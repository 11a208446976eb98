package server

import (
	"net/http"
	"strconv"
)

// errPreconditionRequired answers an approve or reject without the
// version it decides on.
func errPreconditionRequired(what string) *APIError {
	return newError(http.StatusPreconditionRequired, "PreconditionRequired",
		"a decision binds to what was reviewed: pass ?resourceVersion= with status.pendingChange.resourceVersion of the %s as you read it", what)
}

// pendingVersion reads ?resourceVersion= of approve and reject: the
// version of the pending change the approver reviewed. Without it, a
// decision would bind to whatever is pending when it arrives, which its
// author may have changed since the approver read it.
func pendingVersion(r *http.Request, what string) (int64, error) {
	v := r.URL.Query().Get("resourceVersion")
	if v == "" {
		return 0, errPreconditionRequired(what)
	}
	rv, err := strconv.ParseInt(v, 10, 64)
	if err != nil || rv < 1 {
		return 0, errBadRequest("resourceVersion must be a positive integer, as status.pendingChange.resourceVersion reads, got %q", v)
	}
	return rv, nil
}

// checkReviewedObject refuses a decision naming (?uid=) another object
// than the one of that name now: one removed and made again under the
// same name starts its versions over, so a version alone could approve
// the newcomer. Without uid only the version is checked.
func checkReviewedObject(r *http.Request, uid, ref string) error {
	if want := r.URL.Query().Get("uid"); want != "" && want != uid {
		return errConflict("%s is another object than the one reviewed (uid %s, now %s): it was removed and made again; read it again and review it before deciding", ref, want, uid)
	}
	return nil
}

// checkPendingVersion refuses a decision on a change that moved since the
// approver read it.
func checkPendingVersion(reviewed, current int64, ref string) error {
	if reviewed != current {
		return errConflict("%s changed since resourceVersion %d (it is at %d now); read it again and review the pending change before deciding", ref, reviewed, current)
	}
	return nil
}
