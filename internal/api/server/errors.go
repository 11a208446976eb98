package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/hub/store"
)

// retryAfterSeconds is what a 503 asks clients to wait.
const retryAfterSeconds = 5

// APIError is the body of every error response (docs/api.md, "Errors").
type APIError = v1alpha1.Status

func newError(code int, reason, format string, args ...any) *APIError {
	return &APIError{Code: code, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

func errBadRequest(format string, args ...any) *APIError {
	return newError(http.StatusBadRequest, "BadRequest", format, args...)
}
func errUnauthorized() *APIError {
	return newError(http.StatusUnauthorized, "Unauthorized", "a valid bearer token is required (Authorization: Bearer <token>)")
}
func errForbidden(format string, args ...any) *APIError {
	return newError(http.StatusForbidden, "Forbidden", format, args...)
}
func errNotFound(format string, args ...any) *APIError {
	return newError(http.StatusNotFound, "NotFound", format, args...)
}
func errConflict(format string, args ...any) *APIError {
	return newError(http.StatusConflict, "Conflict", format, args...)
}
func errInvalid(message string, details []v1alpha1.FieldError) *APIError {
	return &APIError{Code: http.StatusUnprocessableEntity, Reason: "Invalid", Message: message, Details: details}
}

// asAPIError classifies any error once, at the edge: store errors by kind,
// everything unknown as an internal error whose detail stays in the log.
func asAPIError(err error) *APIError {
	var apiErr *APIError
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &apiErr):
		return apiErr
	case errors.As(err, &tooLarge):
		return newError(http.StatusRequestEntityTooLarge, "RequestEntityTooLarge", "request body is larger than %d bytes", MaxBodyBytes)
	case errors.Is(err, store.ErrUnavailable):
		return newError(http.StatusServiceUnavailable, "ServiceUnavailable", "the database is unavailable; nothing was changed, retry later")
	case errors.Is(err, store.ErrNotFound):
		return errNotFound("not found")
	case errors.Is(err, store.ErrConflict):
		return errConflict("the object was changed concurrently; read it again and retry")
	case errors.Is(err, store.ErrBadContinue):
		return errBadRequest("the continue token is not valid; start the list again")
	default:
		return newError(http.StatusInternalServerError, "InternalError", "internal error; see the server log")
	}
}

// errUnreached refuses a write on a replica cut off from the hub's
// majority.
func errUnreached(err error) *APIError {
	return newError(http.StatusServiceUnavailable, "ServiceUnavailable",
		"this API replica cannot write now (%v); nothing was changed: retry later, or at another replica", err)
}

// Freshness headers of a read: where it was read from, and how current
// the data is (RFC 3339). A read from a standby is as old as the last
// transaction it replayed, which a client may weigh against its needs.
const (
	HeaderDataSource = "Purser-Data-Source"
	HeaderDataAsOf   = "Purser-Data-As-Of"
)

func setFreshness(h http.Header, read *store.ReadInfo) {
	switch {
	case read.Standby:
		h.Set(HeaderDataSource, "standby")
	case !read.AsOf.IsZero():
		h.Set(HeaderDataSource, "primary")
	default:
		return // nothing was read through Store.Read
	}
	if !read.AsOf.IsZero() {
		h.Set(HeaderDataAsOf, read.AsOf.UTC().Format(time.RFC3339Nano))
	}
}

func writeError(w http.ResponseWriter, err error) {
	apiErr := asAPIError(err)
	if apiErr.Code == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", fmt.Sprint(retryAfterSeconds))
	}
	if ra := retryAfter(err); ra != "" {
		w.Header().Set("Retry-After", ra)
	}
	writeJSON(w, apiErr.Code, apiErr)
}

// jsonAppender is a body that encodes itself, faster than encoding/json
// would (see InventoryList.appendJSON).
type jsonAppender interface {
	appendJSON(b []byte) ([]byte, error)
}

// writeJSON writes body as compact JSON, as the kube-apiserver answers:
// indentation doubled the time of encoding a list and added a third to
// its bytes, for the benefit of a reader who can pipe it through jq. The
// command line and the console format what they show themselves.
func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	if a, ok := body.(jsonAppender); ok {
		// Encoded whole before the status is written, so that a failure
		// is still an error answer; a page is bounded (store.maxPageSize
		// records), and its length lets the client size its buffer.
		if b, err := a.appendJSON(make([]byte, 0, 64<<10)); err == nil {
			w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
			w.WriteHeader(status)
			w.Write(append(b, '\n'))
			return
		}
	}
	// Encoded whole first, so that the answer has a Content-Length: an
	// early error followed by closing the connection (closeNow) then
	// reaches the client complete.
	b, err := json.Marshal(body)
	if err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
