package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/providers"
)

// slotsPoll is how often run --slots reads its slots by default. A
// semaphore's poll reads every slot, on slot 0's schedule, so the renewal
// phase of one holder cannot time reads of the others: it polls plainly,
// often enough that a slot given back is taken within a second.
const slotsPoll = time.Second

// waitReport is how often a waiter under -v repeats who holds the lease
// when nothing changed.
const waitReport = 10 * time.Second

// take acquires the lease as --timeout says. It waits in the library's
// one waiting loop (objlease.Await: the holder's renewal phase, backoff
// for a failing store, and an error that waiting cannot cure, such as a
// missing bucket or refused credentials, ends it at once) and, under -v,
// says who holds the lease, since when, and the earliest this observer
// could take it over. With --timeout 0 it makes one attempt, and looks for
// the outcome of a write whose reply was lost for at most the lease's TTL
// (after which such a write has expired).
func (c *cli) take(ctx context.Context, cl *objlease.Client, timeout *waitFlag) (*objlease.Lease, error) {
	if timeout.set && timeout.d == 0 {
		ctx, cancel := context.WithTimeoutCause(ctx, cl.Options().TTL, fmt.Errorf("%w: the outcome of the one attempt of %s stayed unknown for the lease's TTL", errNotAcquired, timeout))
		defer cancel()
		return cl.TryAcquire(ctx)
	}
	if timeout.set {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, timeout.d, fmt.Errorf("%w within %s", errNotAcquired, timeout))
		defer cancel()
	}
	var last *objlease.HeldError
	var storeErr error
	var lastSaid time.Time
	l, err := objlease.Await(ctx, cl, cl.TryAcquire, func(p objlease.Progress) {
		held := p.Held
		if held == nil {
			storeErr = p.Err
			return
		}
		storeErr = nil
		if last == nil || held.Holder != last.Holder || held.Token != last.Token || time.Since(lastSaid) >= waitReport {
			c.sayHeld(ctx, cl, held, last != nil && held.Token == last.Token)
			lastSaid = time.Now()
		}
		last = held
	})
	switch {
	case err == nil:
		return l, nil
	case ctx.Err() != nil && !permanent(err):
		return nil, waitEnded(ctx, last, storeErr)
	}
	return nil, err
}

// waitEnded is why a wait ended early: a signal; or --timeout, with the
// store's failure if the store was failing (not who held the lease before
// it began to), else with who held the lease.
func waitEnded(ctx context.Context, last *objlease.HeldError, storeErr error) error {
	cause := context.Cause(ctx)
	if _, ok := interrupted(ctx); ok {
		return cause
	}
	if storeErr != nil {
		return &storeTimeoutError{cause, storeErr}
	}
	if last == nil {
		return cause
	}
	return &timeoutError{cause, last}
}

// timeoutError is a wait that --timeout ended, with who held the lease.
type timeoutError struct {
	cause error
	held  *objlease.HeldError
}

func (e *timeoutError) Error() string   { return e.cause.Error() + ": " + e.held.Error() }
func (e *timeoutError) Unwrap() []error { return []error{e.cause, e.held} }

// storeTimeoutError is a wait that --timeout ended while the store was
// failing. It matches the store's error, not errNotAcquired: the lease was
// not seen held, so the exit code says what the store did.
type storeTimeoutError struct {
	cause error
	err   error
}

func (e *storeTimeoutError) Error() string {
	return e.cause.Error() + "; the store was failing: " + e.err.Error()
}
func (e *storeTimeoutError) Unwrap() error { return e.err }

// sayHeld reports, under -v, who holds the lease a waiter waits for. When
// the holder is new to this waiter it reads the record once more for the
// time it was acquired.
func (c *cli) sayHeld(ctx context.Context, cl *objlease.Client, held *objlease.HeldError, same bool) {
	if !c.verbose {
		return
	}
	since := ""
	if !same {
		if st, err := cl.Inspect(ctx); err == nil && st.Record != nil && st.Record.Token == held.Token && !st.Record.AcquiredAt.IsZero() {
			since = fmt.Sprintf(" since %s (its clock)", stamp(st.Record.AcquiredAt))
		}
	}
	c.log.Info(fmt.Sprintf("waiting for %s: held by %s (token %d)%s; earliest takeover by this observer in %s, if it stops renewing",
		cl.Key(), showHolder(held.Holder), held.Token, since, roundDuration(held.Wait)))
}

// permanent reports errors that waiting will not cure.
func permanent(err error) bool {
	return objlease.IsPermanent(err) || errors.Is(err, providers.ErrBadURL)
}
