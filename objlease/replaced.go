package objlease

// This file holds how a holder reads a record that refused its renewal:
// its own late write (lateOwnWrite, ownWrite), or what replaced it
// (successor, broken, replacedHow).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/objlease/objlease/internal/recordwrite"
)

// lateOwnWrite re-reads the record after a refused renewal and returns its
// version if it carries one of this lease's unconfirmed renewals.
// Otherwise it returns the record it found, if it could read one before
// ctx or the lease's validity ended.
func (l *Lease) lateOwnWrite(ctx context.Context, token uint64) (string, *Record, bool) {
	if !ownWriteCheck() {
		return "", nil, false
	}
	l.mu.Lock()
	own := append([]string{l.rec.Nonce}, l.unsure...)
	l.mu.Unlock()
	// Nothing is left to keep once the validity has ended, whatever
	// context the caller of Renew gave.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(l.ctx, cancel)()
	o, err := l.c.read(ctx)
	for n := 0; err != nil; n++ {
		// A read that failed says nothing of whose write is there: read
		// again, as a write's unknown outcome is resolved, until the
		// renewal's context or the lease's validity ends.
		var re *Error
		if errors.As(err, &re) || IsPermanent(err) || l.c.wait(ctx, recordwrite.Backoff(recordwrite.ResolveWait, time.Second, n)) != nil {
			return "", nil, false
		}
		o, err = l.c.read(ctx)
	}
	if !l.ownWrite(o, token, own) {
		if o.rec == nil {
			return "", nil, false
		}
		seen := *o.rec
		return "", &seen, false
	}
	l.notice(slog.LevelInfo, "an earlier renewal landed late; renewing over it", slog.Uint64("token", token))
	return o.version, nil, true
}

// ownWrite reports whether o is a held record that carries one of this
// lease's own writes (its holder and one of the nonces it wrote), so that
// this holder may replace it although its version is not the one it knows.
func (l *Lease) ownWrite(o *observation, token uint64, nonces []string) bool {
	if o.rec == nil || o.rec.State != StateHeld || o.rec.Token != token {
		return false
	}
	if !ownWriteCheck() {
		return true // the token alone, as if nobody else could write it
	}
	return o.rec.Holder == l.c.opts.Holder && slices.Contains(nonces, o.rec.Nonce)
}

// successor reports whether o proves that this holder's release of token
// landed: o carries a higher token, first seen while this holder's validity
// still ran. Within its validity nobody takes over a held record of this
// holder's, so the lease can only have been acquired after the release
// (however many holders came since), or broken by an operator. The broken
// record itself (the next token, no holder) is told apart and reported
// lost; a break that someone has already acquired over looks like a
// release followed by two acquisitions, and is reported released: the
// lease is over either way.
func successor(o *observation, token uint64, validUntil time.Time) bool {
	if o.rec == nil || o.rec.Token <= token || !o.since.Before(validUntil) {
		return false
	}
	return !broken(o, token, validUntil)
}

// broken reports whether o is the record Break writes over token (the next
// token, no holder), seen while this holder's validity still ran.
func broken(o *observation, token uint64, validUntil time.Time) bool {
	return o.rec != nil && o.rec.Token == token+1 && o.rec.Holder == "" && o.since.Before(validUntil)
}

// replacedHow says what replaced the record of a lost lease of holder's
// with token, from the record seen in its place: broken (Break writes the
// next token, released, with no holder), taken over by another holder, or
// released by another process with this lease's holder identity. It is ""
// if nothing was seen.
//
// It judges by the records, not by who holds the lease now: a takeover
// after expiry writes the very next token, so a holder seen with a later
// one came after a token that began and ended unseen (a break by an
// operator that a waiter then acquired over, or a takeover that ended),
// and which of those it was is not said, unless valid: a refusal that
// came while this holder's validity still ran cannot follow a takeover
// after expiry, which waits longer than the validity lasts, so the first
// unseen token was an operator's break.
func replacedHow(seen *Record, holder string, token uint64, valid bool) string {
	switch r := seen; {
	case r == nil:
		return ""
	case r.State == StateReleased && r.Holder == "" && r.Token > token:
		return fmt.Sprintf("broken by an operator, new token %d", r.Token)
	case r.State == StateReleased && r.Holder == holder && r.Token == token:
		return fmt.Sprintf("released by another process as %s", showHolder(r.Holder))
	case r.Token > token+1 && valid && r.State == StateReleased:
		return fmt.Sprintf("broken by an operator, new token %d, then acquired and released since by %s (token %d)", token+1, showHolder(r.Holder), r.Token)
	case r.Token > token+1 && valid:
		return fmt.Sprintf("broken by an operator, new token %d, then acquired by %s, new token %d", token+1, showHolder(r.Holder), r.Token)
	case r.Token > token+1 && r.State == StateReleased:
		return fmt.Sprintf("acquired and released since by %s (token %d), after %s that ended unseen (broken by an operator, or taken over)", showHolder(r.Holder), r.Token, unseenTokens(token, r.Token))
	case r.Token > token+1:
		return fmt.Sprintf("acquired by %s, new token %d, after %s that ended unseen (broken by an operator, or taken over)", showHolder(r.Holder), r.Token, unseenTokens(token, r.Token))
	case r.State == StateReleased:
		return fmt.Sprintf("taken over and released since by %s (token %d)", showHolder(r.Holder), r.Token)
	case r.Holder == holder:
		return fmt.Sprintf("taken by another process as %s, new token %d", showHolder(r.Holder), r.Token)
	}
	return fmt.Sprintf("taken over by %s after it expired, new token %d", showHolder(seen.Holder), seen.Token)
}

// unseenTokens names the tokens issued after token and before now.
func unseenTokens(token, now uint64) string {
	if now == token+2 {
		return fmt.Sprintf("token %d", token+1)
	}
	return fmt.Sprintf("tokens %d to %d", token+1, now-1)
}
