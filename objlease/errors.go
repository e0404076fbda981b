package objlease

import (
	"errors"
	"fmt"
	"time"

	"github.com/objlease/objlease/internal/recordwrite"
)

var (
	// ErrHeld: the lease is held by someone else and has not expired in the
	// eyes of this client. The error is an *Error.
	ErrHeld = errors.New("lease held by another holder")
	// ErrLeaseLost: this holder can no longer rely on the lease (a renewal was
	// refused, or could not succeed before the holder's safe validity ended).
	// It is the cause of a lost lease's context.
	ErrLeaseLost = errors.New("lease lost")
	// ErrReleased: the lease was released by this holder.
	ErrReleased = errors.New("lease released")
	// ErrBadRecord: the object under the lease key is not an objlease record
	// (malformed, foreign, tampered with). It is never overwritten unless
	// Options.Force is set. The error is an *Error.
	ErrBadRecord = errors.New("not a valid lease record")
	// ErrNewerSchema: the record was written by a newer objlease. It is never
	// overwritten unless Options.Force is set. The error is an *Error.
	ErrNewerSchema = errors.New("lease record has a newer schema")
	// ErrInvalidOptions: the options are inconsistent.
	ErrInvalidOptions = errors.New("invalid lease options")
	// ErrFencedObject: the object under the lease key was written through
	// package fence: it is a fenced data object (or tombstone), not a lease
	// record. It is never overwritten, not even with Options.Force: its
	// token guards data, and a lease record in its place would let an older
	// token write there again. The error is an *Error; it does not
	// match ErrBadRecord.
	ErrFencedObject = errors.New("object is a fenced data object, not a lease record")
	// ErrTokenExhausted: the record's token is the largest a token can be,
	// so no one can take the lease again (the next token would wrap to 0).
	// It is declared once, with the shared write path (internal/recordwrite).
	ErrTokenExhausted = recordwrite.ErrTokenExhausted
	// ErrTokenUnknown: a new token cannot be proven to be above every token
	// issued for the lease. Options.Force would replace an object at the
	// key that is not a valid record, and neither the object, nor this
	// client's memory, nor Options.MinToken or Options.FencedKeys shows
	// a token: starting again from 1 could hand out a token that a paused
	// holder still has, which fenced resources would then refuse in favour
	// of the stale holder. Also returned when a key in Options.FencedKeys
	// names no fenced object. The remedy is to give the floor explicitly,
	// with Options.MinToken or Options.FencedKeys. The error is an
	// *Error.
	ErrTokenUnknown = errors.New("highest fencing token unknown")
	// ErrAmbiguous: a write's outcome could not be determined, even by
	// re-reading, before the context ended. The lease may or may not be held
	// by this client; if it is, it expires on its own after its TTL.
	// It is declared once, with the shared write path (internal/recordwrite).
	ErrAmbiguous = recordwrite.ErrAmbiguous
	// ErrSessionClosed: the client's Session has been closed (see
	// Session.Close); it sends no more requests.
	ErrSessionClosed = errors.New("session closed")
)

// Error is what a lease operation returns when it has more to say than a
// sentinel: which key, what the key held, how long to wait, what was wrong.
// It matches its sentinel (Err) with errors.Is, as fs.PathError matches
// its cause:
//
//	var e *objlease.Error
//	if errors.Is(err, objlease.ErrHeld) && errors.As(err, &e) {
//		log.Printf("held by %s for %v at least", e.Record.Holder, e.Wait)
//	}
type Error struct {
	// Key is the lease's key (for package semaphore, also its size
	// object's).
	Key string
	// Err is what happened: ErrHeld, the refusal that lost a lease (it
	// matches ErrLeaseLost), ErrBadRecord, ErrNewerSchema, ErrFencedObject
	// or ErrTokenUnknown.
	Err error
	// Record is the record found at the key: the holder's (ErrHeld), or
	// the one that replaced a lost lease (nil if none could be read). When
	// the object at the key is not a valid record and Options.Force is
	// waiting to see it unchanged before replacing it (ErrHeld with a
	// Reason), it holds what could be read of it: Holder and Token.
	Record *Record
	// Wait (ErrHeld) is how much longer, at the least, this client must
	// see the record unchanged before it may take over.
	Wait time.Duration
	// Reason says what is wrong with the object (record and token errors,
	// ErrHeld over an object that is not a valid record), or how a lost
	// lease's record was replaced.
	Reason string
}

func (e *Error) Error() string {
	switch {
	case errors.Is(e.Err, ErrLeaseLost):
		if e.Reason == "" {
			return e.Err.Error()
		}
		return e.Err.Error() + "; " + e.Reason
	case e.Err == ErrHeld && e.Reason != "":
		return fmt.Sprintf("lease %q: %s; force replaces it only once it has been seen unchanged for its TTL, %v from now at the earliest",
			e.Key, e.Reason, e.Wait.Round(time.Millisecond))
	case e.Err == ErrHeld:
		var r Record
		if e.Record != nil {
			r = *e.Record
		}
		return fmt.Sprintf("lease %q: held by %q (token %d); expires for this client in %v at the earliest",
			e.Key, r.Holder, r.Token, e.Wait.Round(time.Millisecond))
	case e.Err == ErrTokenUnknown:
		return fmt.Sprintf("lease %q: %v: %s; give the floor explicitly: Options.MinToken (the highest token ever issued for the lease) or Options.FencedKeys (fenced objects written with its tokens)",
			e.Key, ErrTokenUnknown, e.Reason)
	case e.Err == ErrFencedObject:
		return fmt.Sprintf("lease %q: %s; it is never overwritten, not even with force", e.Key, e.Reason)
	}
	return fmt.Sprintf("lease %q: %v: %s (use force to overwrite it)", e.Key, e.Err, e.Reason)
}

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

// heldBy returns err's *Error if err reports a held lease, else nil.
func heldBy(err error) (e *Error) {
	if errors.As(err, &e) && e.Err == ErrHeld {
		return e
	}
	return nil
}

// heldError is the *Error for a lease held by rec's holder.
func heldError(key string, rec *Record, wait time.Duration) *Error {
	return &Error{Key: key, Err: ErrHeld, Record: rec, Wait: wait}
}

// recordError is the *Error for an object at key that cannot be used as a
// record: sentinel is ErrBadRecord, ErrNewerSchema or ErrFencedObject.
func recordError(key string, sentinel error, format string, args ...any) *Error {
	return &Error{Key: key, Err: sentinel, Reason: fmt.Sprintf(format, args...)}
}
