package objlease

// This file holds the retry policy: which errors waiting may cure, how
// long to wait before the next attempt (one back-off rule, backoff), and how
// a write whose outcome is unknown is resolved.

import (
	"context"
	"errors"
	"fmt"
	"time"

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

// conflictWait is the first wait after a write refused by a racing one
// still in flight; it doubles with each attempt. It is network time, not
// lease time (it decides nothing about expiry): it runs on Go's timers,
// which a synctest bubble fakes, not on the session's clock, which a test may
// never advance.
const conflictWait = 30 * time.Millisecond

// resolveWait is the first wait between re-reads that resolve a write's
// outcome; it doubles up to a second.
const resolveWait = 50 * time.Millisecond

// backoff is the one back-off rule: first doubled n times, at most limit.
func backoff(first, limit time.Duration, n int) time.Duration {
	return min(first<<min(n, 10), limit)
}

// resolve re-reads the record until it can tell whether the write of rec,
// made over ifVersion, landed: the record then carries rec's holder,
// nonce, token and state. It reports landed = false with no error if the
// record is as it was before the write (so it can be retried), and
// ErrPrecondition if someone else's write is there instead.
func (c *Client) resolve(ctx context.Context, rec *Record, ifVersion string, cause error) (providers.WriteResult, bool, error) {
	for n := 0; ; n++ {
		o, err := c.read(ctx)
		if err == nil {
			switch {
			case o.rec != nil && o.rec.Nonce == rec.Nonce && o.rec.Token == rec.Token && o.rec.State == rec.State &&
				(o.rec.Holder == rec.Holder || !ownWriteCheck()):
				// Its own write, token and state too: a record rewritten
				// after the write landed may keep the nonce (a hand edit),
				// and is someone else's write.
				return providers.WriteResult{Version: o.version, LastModified: o.attrs.LastModified, StoreTime: o.attrs.StoreTime}, true, nil
			case o.version == ifVersion: // unchanged ("" == absent for a create)
				return providers.WriteResult{}, false, nil
			}
			return providers.WriteResult{}, false, fmt.Errorf("%w (after %v)", providers.ErrPrecondition, cause)
		}
		var re *Error
		if errors.As(err, &re) { // the object is not a usable record
			return providers.WriteResult{}, false, err
		}
		if IsPermanent(err) {
			// Re-reading again will not succeed either: a missing bucket or
			// refused credentials stay so.
			return providers.WriteResult{}, false, fmt.Errorf("lease %q: %w: %w; re-reading: %w", c.key, ErrAmbiguous, cause, err)
		}
		if c.wait(ctx, backoff(resolveWait, time.Second, n)) != nil {
			return providers.WriteResult{}, false, fmt.Errorf("lease %q: %w: %w", c.key, ErrAmbiguous, cause)
		}
	}
}
