package v1alpha1

import (
	"fmt"
	"strings"
)

// FieldError is one problem with one field of a request body.
type FieldError struct {
	// Field is a path such as spec.failover.mutations[0].when; empty when
	// the problem is with the body as a whole.
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

func (e FieldError) String() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

// FieldErrors is every problem found in an object; empty means valid. It is
// deliberately not an error, so that a nil result can never turn into a
// non-nil error interface.
type FieldErrors []FieldError

func (errs FieldErrors) String() string {
	parts := make([]string, len(errs))
	for i, e := range errs {
		parts[i] = e.String()
	}
	return strings.Join(parts, "; ")
}

// Reasons used in Status.
const (
	ReasonBadRequest         = "BadRequest"
	ReasonUnauthorized       = "Unauthorized"
	ReasonForbidden          = "Forbidden"
	ReasonNotFound           = "NotFound"
	ReasonConflict           = "Conflict"
	ReasonTooLarge           = "RequestEntityTooLarge"
	ReasonInvalid            = "Invalid"
	ReasonServiceUnavailable = "ServiceUnavailable"
)

// Status is the body of every error response of the API, so that clients
// handle failures one way.
type Status struct {
	Code    int          `json:"code"`
	Reason  string       `json:"reason"`
	Message string       `json:"message"`
	Details []FieldError `json:"details,omitempty"`
}

// Error lets a client return a Status it received as its error.
func (s *Status) Error() string {
	msg := fmt.Sprintf("%d %s: %s", s.Code, s.Reason, s.Message)
	if len(s.Details) > 0 {
		msg += " (" + FieldErrors(s.Details).String() + ")"
	}
	return msg
}

// DecodeError is why a request body could not be turned into an object.
// Malformed bodies (not JSON or YAML, not one object, duplicate keys) are a
// 400; the others parsed but do not fit the schema (wrong apiVersion or kind,
// unknown field, wrong type) and are a 422 with Details.
type DecodeError struct {
	Malformed bool
	// TooLarge: the object is larger than MaxObjectBytes as JSON.
	TooLarge bool
	// Field and Message describe the first problem.
	Field   string
	Message string
	// Details lists every problem found, the first included.
	Details FieldErrors
}

func (e *DecodeError) Error() string {
	first := FieldError{Field: e.Field, Message: e.Message}.String()
	if len(e.Details) > 1 {
		return fmt.Sprintf("%s (and %d more)", first, len(e.Details)-1)
	}
	return first
}

func malformed(field, format string, args ...any) *DecodeError {
	return newDecodeError(true, FieldErrors{{Field: field, Message: fmt.Sprintf(format, args...)}})
}

func invalid(field, format string, args ...any) *DecodeError {
	return newDecodeError(false, FieldErrors{{Field: field, Message: fmt.Sprintf(format, args...)}})
}

func newDecodeError(isMalformed bool, details FieldErrors) *DecodeError {
	return &DecodeError{Malformed: isMalformed, Field: details[0].Field, Message: details[0].Message, Details: details}
}
