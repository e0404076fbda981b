package gcs

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"

	"github.com/objlease/objlease/providers"
)

// mapErr turns what the SDK returned for op on key into a *providers.Error.
// It is the only place where store answers become portable errors; the SDK's
// error stays in the chain for errors.As.
func (s *Store) mapErr(op, key string, err error) error {
	write := op == "create" || op == "replace" || op == "delete"
	status := 0
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		status = ge.Code
	}
	// The SDK turns every 404 of an object call into ErrObjectNotExist, and
	// of a listing into ErrBucketNotExist; the XML read path keeps no
	// *googleapi.Error at all.
	notFound := status == http.StatusNotFound ||
		errors.Is(err, storage.ErrObjectNotExist) || errors.Is(err, storage.ErrBucketNotExist)

	var sentinel error
	switch {
	// GCS and fake-gcs-server: 412 conditionNotMet, DoesNotExist or
	// GenerationMatch did not hold (also GenerationMatch on a missing object).
	case status == http.StatusPreconditionFailed:
		sentinel = providers.ErrPrecondition
	// GCS: 409 conflict, a concurrent change to the same object won and this
	// request committed nothing. fake-gcs-server never answers it.
	case status == http.StatusConflict:
		sentinel = providers.ErrConflict
	// GCS: 429 rateLimitExceeded, more than about one mutation per second of
	// one object (or a project-wide rate limit). Nothing was written.
	case status == http.StatusTooManyRequests:
		sentinel = providers.ErrThrottled
	// GCS: 404 "The specified bucket does not exist."; a create or a listing
	// cannot 404 for any other reason (fake-gcs-server says only "Not Found").
	case notFound && (bucketMissing(ge) || op == "create" || op == "list"):
		return providers.Wrap(op, key, providers.ErrInvalidKey,
			fmt.Errorf("bucket %q does not exist: %w", s.name, err))
	// GCS and fake-gcs-server: 404 on a conditional replace or on a delete
	// naming a generation: the object, or that generation, is gone.
	case notFound && write:
		sentinel = providers.ErrPrecondition
	// GCS and fake-gcs-server: 404 on a read.
	case notFound:
		sentinel = providers.ErrNotFound
	// GCS: 400 invalid, an object name it refuses.
	case status == http.StatusBadRequest:
		sentinel = providers.ErrInvalidKey
	// A write answered 5xx, or not answered at all (connection reset, lost
	// response, timeout, context ended): it may have been applied.
	case write && (status >= 500 || status == 0):
		sentinel = providers.ErrUnknownOutcome
	// Denied access, a read that failed after the SDK's retries, ...: no
	// portable meaning, the native error says what happened.
	default:
		return &providers.Error{Op: op, Key: key, Err: err}
	}
	return providers.Wrap(op, key, sentinel, err)
}

// bucketMissing reports GCS's answer for a bucket that does not exist, which
// the SDK reports like a missing object.
func bucketMissing(ge *googleapi.Error) bool {
	return ge != nil && ge.Code == http.StatusNotFound &&
		strings.Contains(strings.ToLower(ge.Message), "bucket does not exist")
}
