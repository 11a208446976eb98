package admission

import (
	"encoding/json"
	"fmt"

	"github.com/purser-io/purser/api/v1alpha1"
)

// ReasonDenied is the reason a writer gives when Written refuses the
// object it was about to apply: the attempt's (status.attempts[].reason)
// and a deployable's per cluster (status.clusters[].reason).
const ReasonDenied = "AdmissionDenied"

// Written reviews obj exactly as a writer is about to apply it to a
// member cluster: the template rendered with what the writer adds (a
// cluster's overrides; the failover mutations, restore point and
// purser's labels of an attempt). It is the one admission of what is
// written: the submitter and the syncer call it right before they write,
// and the API calls it at accept on every rendering it can foresee
// (each override and mutation alone, and together) to refuse early. The
// rules are r's (Check), so there is no second list of them; Written adds
// only the bound on the rendered size, which the template alone cannot
// break but its renderings can.
//
// cause names what made obj differ from the template ("spec.overrides[1]",
// "spec.failover.mutations[0]"), "" for the template itself; a refusal is
// a *Denied carrying it.
func (r Review) Written(obj map[string]any, cause string) error {
	raw, err := json.Marshal(obj)
	if err != nil {
		return &Denied{Cause: cause, Err: fmt.Errorf("the object cannot be written as JSON: %w", err)}
	}
	if len(raw) > v1alpha1.MaxRenderedBytes {
		return &Denied{Cause: cause, Err: fmt.Errorf("the object is %d bytes as rendered, over the %d bytes a rendered object may have",
			len(raw), v1alpha1.MaxRenderedBytes)}
	}
	if err := r.Check(obj); err != nil {
		return &Denied{Cause: cause, Err: err}
	}
	return nil
}

// Denied is Written's refusal: the rule's words (Err, a *Refusal or the
// Kind error of an object the policy refuses) and what is to blame.
type Denied struct {
	// Cause is the override or mutation to blame, "" for the template.
	Cause string
	Err   error
}

func (d *Denied) Error() string {
	if d.Cause == "" {
		return d.Err.Error()
	}
	return fmt.Sprintf("as %s renders it: %s", d.Cause, d.Err.Error())
}

func (d *Denied) Unwrap() error { return d.Err }
