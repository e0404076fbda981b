package fence

// This file bounds the loops of conditional writes that lose to another
// writer: each waits as the lease code does, gives up after maxAttempts,
// and stops at once on a store that refuses a write conditional on the
// version it has just shown.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/objlease/objlease/internal/ctxsleep"
	"github.com/objlease/objlease/internal/recordwrite"
	"github.com/objlease/objlease/providers"
)

// ErrPreconditionRefused: the store refused, twice, a write conditional
// on the very version it had just shown (some S3-compatible servers
// compare a quoted ETag with an unquoted one). Retrying cannot succeed;
// objlease doctor checks a store for it.
var ErrPreconditionRefused = errors.New("the store refuses writes conditional on the object's current version")

// maxAttempts bounds the conditional writes of one fenced write or commit
// that lose to other writers; with conflictWait doubling to a second it
// is some ten seconds of contention.
const maxAttempts = 16

// conflictWait is the first wait after a write refused by a racing one
// (409, or an unchanged version); it doubles with each attempt, up to a
// second, as in the lease code, whose wait it is.
const conflictWait = recordwrite.ConflictWait

// raced counts the conditional writes of one loop that lost.
type raced struct {
	n       int
	refused string // the version a 412 was given against, until the next read
	again   int    // reads that showed that very version after its 412
}

// lost is called after a conditional write against version was refused
// with err (a precondition failure or a conflict). It waits before the
// next attempt and returns nil, or the error to end with.
func (r *raced) lost(ctx context.Context, op, key, version string, err error) error {
	r.n++
	if r.n >= maxAttempts {
		return fmt.Errorf("%s %q: gave up after %d conditional writes lost to other writers: %w", op, key, r.n, err)
	}
	if errors.Is(err, providers.ErrPrecondition) {
		r.refused = version // someone wrote since: read again at once
		return nil
	}
	r.refused = ""
	return ctxsleep.For(ctx, recordwrite.Backoff(conflictWait, time.Second, r.n-1))
}

// read is called with the version a new read shows before the next
// attempt: the version the last write was refused against, shown again,
// means nobody wrote in between.
func (r *raced) read(ctx context.Context, op, key, version string) error {
	if r.refused == "" || version != r.refused {
		r.refused = ""
		return nil
	}
	r.refused = ""
	r.again++
	if r.again >= 2 {
		return fmt.Errorf("%s %q: %w: a write conditional on version %s was refused, and the store still shows that version (run objlease doctor on the store)", op, key, ErrPreconditionRefused, version)
	}
	return ctxsleep.For(ctx, conflictWait)
}
