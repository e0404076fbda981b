package objlease

import (
	"errors"
	"fmt"
	"time"
)

var (
	// ErrHeld: the lease is held by someone else and has not expired in the
	// eyes of this client. The error is a *HeldError.
	ErrHeld = errors.New("lease held by another holder")
	// ErrLeaseLost: this holder can no longer rely on the lease (a renewal was
	// refused, or could not succeed before the holder's safe validity ended).
	// It is the cause of a lost lease's context.
	ErrLeaseLost = errors.New("lease lost")
	// ErrReleased: the lease was released by this holder.
	ErrReleased = errors.New("lease released")
	// ErrBadRecord: the object under the lease key is not an objlease record
	// (malformed, foreign, tampered with). It is never overwritten unless
	// Options.Force is set. The error is a *RecordError.
	ErrBadRecord = errors.New("not a valid lease record")
	// ErrNewerSchema: the record was written by a newer objlease. It is never
	// overwritten unless Options.Force is set. The error is a *RecordError.
	ErrNewerSchema = errors.New("lease record has a newer schema")
	// ErrInvalidOptions: the options are inconsistent.
	ErrInvalidOptions = errors.New("invalid lease options")
	// ErrFencedObject: the object under the lease key was written through
	// package fence: it is a fenced data object (or tombstone), not a lease
	// record. It is never overwritten, not even with Options.Force: its
	// token guards data, and a lease record in its place would let an older
	// token write there again. The error is a *RecordError; it does not
	// match ErrBadRecord.
	ErrFencedObject = errors.New("object is a fenced data object, not a lease record")
	// ErrTokenExhausted: the record's token is the largest a token can be,
	// so no one can take the lease again (the next token would wrap to 0).
	ErrTokenExhausted = errors.New("fencing token exhausted")
	// ErrTokenUnknown: a new token cannot be proven to be above every token
	// issued for the lease. Options.Force would replace an object at the
	// key that is not a valid record, and neither the object, nor this
	// client's memory, nor Options.MinToken or Options.FencedKeys shows
	// a token: starting again from 1 could hand out a token that a paused
	// holder still has, which fenced resources would then refuse in favour
	// of the stale holder. Also returned when a key in Options.FencedKeys
	// names no fenced object. The remedy is to give the floor explicitly,
	// with Options.MinToken or Options.FencedKeys. The error is a
	// *TokenError.
	ErrTokenUnknown = errors.New("highest fencing token unknown")
	// ErrAmbiguous: a write's outcome could not be determined, even by
	// re-reading, before the context ended. The lease may or may not be held
	// by this client; if it is, it expires on its own after its TTL.
	ErrAmbiguous = errors.New("outcome of lease write could not be determined")
	// ErrSessionClosed: the client's Session has been closed (see
	// Session.Close); it sends no more requests.
	ErrSessionClosed = errors.New("session closed")
	// ErrNotYet: an attempt given to Await found nothing to act on yet (a
	// watcher waiting for any leader at all, say). Await tries it again
	// after the client's PollInterval, with no backoff and no warning.
	ErrNotYet = errors.New("nothing to act on yet")
)

// HeldError reports who holds a lease that could not be acquired.
type HeldError struct {
	Key    string
	Holder string
	Token  uint64
	Data   []byte // the holder's data (for example its address)
	// Wait is how much longer, at the least, this client must see the record
	// unchanged before it may take over.
	Wait time.Duration
	// Bad is set when the object at the key is not a valid record and
	// Options.Force is waiting to see it unchanged before replacing it: it
	// may be the record of a live holder (of a newer objlease, say). Holder
	// and Token are then what could be read of it.
	Bad *RecordError
}

func (e *HeldError) Error() string {
	if e.Bad != nil {
		return fmt.Sprintf("lease %q: %v: %s; force replaces it only once it has been seen unchanged for its TTL, %v from now at the earliest",
			e.Key, e.Bad.Err, e.Bad.Reason, e.Wait.Round(time.Millisecond))
	}
	return fmt.Sprintf("lease %q: held by %q (token %d); expires for this client in %v at the earliest", e.Key, e.Holder, e.Token, e.Wait.Round(time.Millisecond))
}

// Unwrap makes errors.Is(err, ErrHeld) true.
func (e *HeldError) Unwrap() error { return ErrHeld }

// LostError is a lease lost because its record was replaced: a renewal
// was refused, and the holder read what the key held instead. It matches
// ErrLeaseLost; its message is the refusal's. Seen lets the holder say
// what happened: a broken lease (Client.Break) is a released record with
// the next token and no holder; one taken over is held by another holder
// with a higher token; one released by another process with this holder's
// identity is released with this lease's token.
type LostError struct {
	Key    string
	Holder string // this lease's holder identity
	Token  uint64 // this lease's token
	// Seen is the record found at the key once the renewal was refused;
	// nil if none could be read (deleted, unreadable, not a record).
	Seen *Record
	err  error
}

func (e *LostError) Error() string { return e.err.Error() }

// Unwrap returns the refusal, which matches ErrLeaseLost.
func (e *LostError) Unwrap() error { return e.err }

// TokenError says why a new token for a lease cannot be proven to be above
// every token issued for it. It matches ErrTokenUnknown.
type TokenError struct {
	Key string // the lease's key
	// Fenced is the key in Options.FencedKeys that gave no token, if that
	// is what went wrong.
	Fenced string
	Reason string
}

func (e *TokenError) Error() string {
	return fmt.Sprintf("lease %q: %v: %s; give the floor explicitly: Options.MinToken (the highest token ever issued for the lease) or Options.FencedKeys (fenced objects written with its tokens)",
		e.Key, ErrTokenUnknown, e.Reason)
}

// Unwrap returns ErrTokenUnknown.
func (e *TokenError) Unwrap() error { return ErrTokenUnknown }

// RecordError names the key of a lease object that could not be used and
// says what is wrong with it.
type RecordError struct {
	Key    string
	Reason string
	Err    error // ErrBadRecord, ErrNewerSchema or ErrFencedObject
}

func (e *RecordError) Error() string {
	if e.Err == ErrFencedObject {
		return fmt.Sprintf("lease %q: %s; it is never overwritten, not even with force", e.Key, e.Reason)
	}
	return fmt.Sprintf("lease %q: %v: %s (use force to overwrite it)", e.Key, e.Err, e.Reason)
}

// Unwrap returns ErrBadRecord, ErrNewerSchema or ErrFencedObject.
func (e *RecordError) Unwrap() error { return e.Err }
