package server

import (
	"errors"
	"io"
	"mime"
	"net"
	"net/http"

	"github.com/purser-io/purser/api/v1alpha1"
)

// decodeBody reads a JSON or YAML body and decodes it with decode, which
// is given the body as bounded JSON: 413 when too large (as sent, or as
// its YAML aliases would expand), 415 for another media type, 400 when
// malformed, 422 when it parses but does not fit the schema.
func decodeBody[T any](r *http.Request, decode func([]byte, string) (T, error)) (T, error) {
	var zero T
	contentType := r.Header.Get("Content-Type")
	if contentType != "" {
		mt, _, err := mime.ParseMediaType(contentType)
		switch {
		case err != nil:
			return zero, errBadRequest("Content-Type %q cannot be parsed", contentType)
		case mt != "application/json" && mt != "application/yaml" && mt != "application/x-yaml" && mt != "text/yaml":
			return zero, newError(http.StatusUnsupportedMediaType, "UnsupportedMediaType",
				"Content-Type %q is not supported; send application/json or application/yaml", mt)
		}
	}
	data, err := io.ReadAll(r.Body)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return zero, newError(http.StatusRequestTimeout, "RequestTimeout", "the request body did not arrive within %s", ReadTimeout)
	}
	if err != nil {
		return zero, err // a *http.MaxBytesError becomes 413
	}
	if len(data) == 0 {
		return zero, errBadRequest("request body is empty")
	}
	return decodeBytes(data, contentType, decode)
}

// decodeBytes decodes a body already read, as decodeBody does.
func decodeBytes[T any](data []byte, contentType string, decode func([]byte, string) (T, error)) (T, error) {
	var zero T
	// Every body meets the same bound on what it becomes, whatever
	// decodes it next: a small request read with a plain YAML decoder
	// would otherwise expand an alias bomb (v1alpha1.BoundedJSON).
	js, err := v1alpha1.BoundedJSON(data, contentType)
	var obj T
	if err == nil {
		obj, err = decode(js, "application/json")
	}
	var de *v1alpha1.DecodeError
	switch {
	case errors.As(err, &de) && de.TooLarge:
		return zero, &APIError{Code: http.StatusRequestEntityTooLarge, Reason: "RequestEntityTooLarge", Message: de.Error(), Details: de.Details}
	case errors.As(err, &de) && de.Malformed:
		return zero, &APIError{Code: http.StatusBadRequest, Reason: "BadRequest", Message: "request body is malformed: " + de.Error(), Details: de.Details}
	case errors.As(err, &de):
		return zero, errInvalid("request body does not fit the schema: "+de.Error(), de.Details)
	case err != nil:
		return zero, errBadRequest("request body: %v", err)
	}
	return obj, nil
}
