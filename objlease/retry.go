package objlease

// This file holds the retry policy: which errors waiting may cure and how
// long to wait before the next attempt (one back-off rule, backoff). How a
// write whose outcome is unknown is resolved is the shared write path's
// (internal/recordwrite; see putTracked).

import (
	"errors"
	"time"

	"github.com/objlease/objlease/internal/recordwrite"
	"github.com/objlease/objlease/providers"
)

// retry decides, for a waiting loop, whether and when to try again after
// an error. Its zero value is ready for use. It is how Acquire and every
// other waiting loop (see Await and Watch) treat errors alike.
type retry struct {
	failures int // store failures in a row
}

// next returns how long to wait after err, an attempt's error other than
// finding the lease held, before the next attempt, given poll, and whether
// to try again at all. A race with another writer or throttling waits
// poll; a store failure waits with backoff from 100 ms up to poll; a
// permanent error is not retried.
func (r *retry) next(err error, poll time.Duration) (time.Duration, bool) {
	switch {
	case errors.Is(err, providers.ErrThrottled), errors.Is(err, providers.ErrConflict),
		errors.Is(err, providers.ErrUnknownOutcome), errors.Is(err, providers.ErrPrecondition):
		return poll, true
	case IsPermanent(err):
		return 0, false
	}
	r.failures++
	return backoff(100*time.Millisecond, max(poll, 100*time.Millisecond), r.failures-1), true
}

// first reports whether the error next last saw began a streak of store
// failures: the one to log.
func (r *retry) first() bool { return r.failures == 1 }

// IsPermanent reports errors that waiting will not cure: the object at the
// key is not a usable record (or, with Force, shows no token to continue
// above), the options or key are invalid, a write's outcome could not be
// determined, the client's session is closed, or the store refuses the
// request as configured (missing bucket, refused credentials, wrong
// endpoint, an operation it does not support).
func IsPermanent(err error) bool {
	return errors.Is(err, ErrBadRecord) || errors.Is(err, ErrNewerSchema) || errors.Is(err, ErrInvalidOptions) ||
		errors.Is(err, ErrFencedObject) || errors.Is(err, ErrTokenExhausted) || errors.Is(err, ErrTokenUnknown) ||
		errors.Is(err, providers.ErrInvalidKey) || errors.Is(err, ErrAmbiguous) || errors.Is(err, ErrSessionClosed) ||
		errors.Is(err, providers.ErrNoBucket) || errors.Is(err, providers.ErrPermission) ||
		errors.Is(err, providers.ErrWrongEndpoint) || errors.Is(err, errors.ErrUnsupported)
}

// backoff is the one back-off rule (recordwrite.Backoff): first doubled n
// times, at most limit.
func backoff(first, limit time.Duration, n int) time.Duration {
	return recordwrite.Backoff(first, limit, n)
}
