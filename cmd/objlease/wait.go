package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/providers"
)

// defaultPoll is how often a waiter reads the record by default: often
// enough that a released lease is taken within a second, at one read per
// poll (the library's default, TTL/3, left a waiter asleep for up to 10 s).
const defaultPoll = time.Second

// waitReport is how often a waiter under -v repeats who holds the lease
// when nothing changed.
const waitReport = 10 * time.Second

// take acquires the lease as --timeout says. While it waits it polls every
// --poll (or sooner, when the holder's record is due to expire for this
// observer) and, under -v, says who holds the lease, since when, and the
// earliest this observer could take it over.
func (c *cli) take(ctx context.Context, cl *objlease.Client, timeout *waitFlag) (*objlease.Lease, error) {
	if timeout.set && timeout.d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, timeout.d, fmt.Errorf("%w within --timeout %v", errNotAcquired, timeout.d))
		defer cancel()
	}
	once := timeout.set && timeout.d == 0
	poll := cl.Options().PollInterval
	var last *objlease.HeldError
	var lastSaid time.Time
	for {
		l, err := cl.TryAcquire(ctx)
		if err == nil {
			return l, nil
		}
		if ctx.Err() != nil {
			return nil, waitEnded(ctx, last)
		}
		wait := poll
		var held *objlease.HeldError
		switch {
		case errors.As(err, &held):
			if once {
				return nil, err
			}
			if last == nil || held.Holder != last.Holder || held.Token != last.Token || time.Since(lastSaid) >= waitReport {
				c.sayHeld(ctx, cl, held, last != nil && held.Token == last.Token)
				lastSaid = time.Now()
			}
			last = held
			if held.Wait < wait {
				wait = held.Wait + time.Millisecond
			}
		case errors.Is(err, providers.ErrThrottled), errors.Is(err, providers.ErrConflict),
			errors.Is(err, providers.ErrUnknownOutcome), errors.Is(err, providers.ErrPrecondition):
			// Raced with another writer, or asked to slow down: look again.
		case once || permanent(err):
			return nil, err
		default:
			c.log.Warn("acquire attempt failed; retrying", slog.Any("err", err))
		}
		if err := cl.Wait(ctx, wait); err != nil {
			return nil, waitEnded(ctx, last)
		}
	}
}

// waitEnded is why a wait ended early: a signal, or --timeout with who
// held the lease.
func waitEnded(ctx context.Context, last *objlease.HeldError) error {
	cause := context.Cause(ctx)
	if _, ok := interrupted(ctx); ok || last == nil {
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

// permanent reports errors that waiting will not cure.
func permanent(err error) bool {
	return errors.Is(err, objlease.ErrBadRecord) || errors.Is(err, objlease.ErrNewerSchema) ||
		errors.Is(err, objlease.ErrInvalidOptions) || errors.Is(err, providers.ErrInvalidKey) ||
		errors.Is(err, objlease.ErrAmbiguous) || errors.Is(err, providers.ErrBadURL)
}

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
		cl.Key(), held.Holder, held.Token, since, roundDuration(held.Wait)))
}
