package objlease

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Defaults for zero Options fields.
const (
	DefaultTTL        = 30 * time.Second
	DefaultDriftBound = 0.01
)

// Bounds on timings. A lease must leave time to renew it: below these, a
// renewal's ordinary latency would lose the lease, or renewals would hammer
// the store.
const (
	// MinTTL is the shortest TTL accepted (MaxTTL the longest).
	MinTTL           = 100 * time.Millisecond
	minRenewInterval = 10 * time.Millisecond
)

// Options configure a Client. The zero value is usable: every zero field
// takes its default. New validates the fields together. The clock, the
// logger and the source of jitter are the client's session's (see
// SessionOptions).
type Options struct {
	// TTL is how long a lease lasts after each successful write. Default
	// 30 s. It must be a whole number of milliseconds, because the record
	// carries it in milliseconds (ttl_ms) and the holder and every contender
	// must count the same TTL, and it must be from MinTTL to MaxTTL.
	TTL time.Duration
	// RenewInterval is how often a held lease is renewed. Default TTL/3. It
	// must leave room for at least two renewals within the holder's safe
	// validity (TTL × (1 − DriftBound)), be at least 10 ms, and
	// respect the store's MinWriteInterval.
	RenewInterval time.Duration
	// PollInterval is how often Acquire reads while the lease is held
	// elsewhere: the trade between reads and takeover time. Default
	// RenewInterval (R). A PollInterval of k whole renewal intervals, once
	// Acquire has learned when the holder's renewals land, reads just
	// after every k-th renewal: TTL / (k R) reads per TTL, each write seen
	// within (k − 1) R of landing. Any other PollInterval, or one below
	// R, polls every PollInterval (jittered down by up to 20 %). Either
	// way a release is seen within one PollInterval, and a dead holder's
	// lease taken over within TTL × (1 + DriftBound) + PollInterval of its
	// last write. With StoreClock, on a store that reports its own time,
	// Acquire instead reads only when the store's clock could show the
	// record expired: at most once per TTL beside a live holder, and a
	// release is seen at that read. PollInterval then applies only where
	// the store reports no time.
	PollInterval time.Duration
	// DriftBound bounds the rate error of every participant's clock: a
	// clock measures an interval of real length d as between d × (1 − b) and
	// d × (1 + b). Clocks need not agree on the time. Default 0.01 (1 %).
	DriftBound float64
	// StoreClock opts into the fast-takeover rule: a contender may take
	// over a lease whose record the store's own clock says was last
	// written long ago, instead of waiting to see it unchanged for a whole
	// TTL. It assumes that the store's clocks (the ones stamping
	// Last-Modified and answering with Date) agree with each other within
	// StoreClockMargin. Under that assumption a record whose age by the
	// store's clock exceeds TTL + the store's timestamp granularity +
	// StoreClockMargin has expired, which lets a fresh process take over a
	// long-dead lease at once. The observed rule stays in force as the
	// fallback whenever the store does not report both times.
	StoreClock bool
	// StoreClockMargin is the assumed bound on disagreement between the
	// store's clocks, for StoreClock. Default 1 s.
	StoreClockMargin time.Duration

	// Holder identifies this client in records. Default host/pid/random.
	// It is shown one per row by tools that list leases, so it must be 1 to
	// 256 bytes of printable Unicode (letters, marks, numbers,
	// punctuation, symbols and the ASCII space): no control characters,
	// tabs, newlines or invisible format characters, and no leading or
	// trailing space. See CheckHolder.
	Holder string
	// Data is carried in the record while this client holds the lease
	// (for example the leader's address). At most MaxDataSize bytes.
	Data []byte
	// Force allows overwriting an object at the key that is not a valid
	// record (malformed, foreign, of a newer schema, or whose token went
	// back). Without it such an object is reported and left alone. Even
	// with it, acquiring waits until the object has been seen unchanged for
	// its TTL × (1 + DriftBound) (its own ttl_ms where that can be read,
	// else this client's TTL), because it may be a live holder's record,
	// and continues above the highest token known. An object written
	// through package fence is never overwritten.
	//
	// Force never sends the token back: it writes above the highest token
	// the store still shows (the object's own token where one can be read,
	// what this client has seen at the key, MinToken and the tokens of
	// FencedKeys). Where none of these gives a token it refuses with
	// ErrTokenUnknown rather than start again from 1, which could hand out
	// a token a paused holder still has.
	Force bool
	// MinToken, if not nil, is a floor on the tokens this client writes:
	// every token it issues (acquiring, or breaking the lease) is above
	// *MinToken. Set it to the highest token ever issued for the lease
	// when the store no longer shows it, for example when something else
	// overwrote the record, so that Force can replace the object safely.
	// nil means that no floor was given; a floor of 0 is the explicit word
	// that no token was ever issued, so that token 1 is safe. Use
	// new(uint64(n)) makes one.
	MinToken *uint64
	// FencedKeys names data objects in the lease's store written through
	// package fence with this lease's tokens. Each carries the highest
	// token that has written it (metadata key "objlease-token", see
	// fence.TokenKey), and every token this client issues is above all of
	// them. They are read (one Stat each) whenever this client issues a
	// token. A named key that does not exist, or that carries no token, is
	// an error (ErrTokenUnknown): it was named as evidence and gives none.
	FencedKeys []string
}

func (o Options) withDefaults() Options {
	if o.TTL == 0 {
		o.TTL = DefaultTTL
	}
	if o.DriftBound == 0 {
		o.DriftBound = DefaultDriftBound
	}
	if o.RenewInterval == 0 {
		o.RenewInterval = o.TTL / 3
	}
	if o.PollInterval == 0 {
		o.PollInterval = o.RenewInterval
	}
	if o.StoreClockMargin == 0 {
		o.StoreClockMargin = time.Second
	}
	if o.Holder == "" {
		host, _ := os.Hostname()
		o.Holder = fmt.Sprintf("%s/%d/%04x", host, os.Getpid(), rand.Uint32()&0xffff)
	}
	if o.MinToken != nil {
		o.MinToken = new(*o.MinToken) // the caller's variable may change
	}
	o.FencedKeys = slices.Clone(o.FencedKeys)
	return o
}

func (o Options) validate(minWrite time.Duration) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidOptions, fmt.Sprintf(format, args...))
	}
	safe := time.Duration(float64(o.TTL) * (1 - o.DriftBound))
	switch {
	case o.TTL < 0 || o.RenewInterval < 0 || o.PollInterval < 0:
		return bad("durations must not be negative (TTL %v, RenewInterval %v, PollInterval %v)", o.TTL, o.RenewInterval, o.PollInterval)
	case o.TTL < MinTTL || o.TTL > MaxTTL:
		what := "too short: the lease could not be renewed in time"
		if o.TTL > MaxTTL {
			what = "too long"
		}
		return bad("TTL %v is %s: a TTL must be from %v to %v", o.TTL, what, MinTTL, MaxTTL)
	case o.TTL%time.Millisecond != 0:
		// The record carries whole milliseconds: a holder counting more
		// than a contender reads would overlap it.
		return bad("TTL %v is not a whole number of milliseconds, as the record stores it (try %v)", o.TTL, o.TTL.Truncate(time.Millisecond))
	case o.DriftBound < 0 || o.DriftBound >= 0.5:
		return bad("DriftBound %v must be in [0, 0.5)", o.DriftBound)
	case 2*o.RenewInterval > safe:
		return bad("RenewInterval %v must be at most half the holder's safe validity TTL × (1 − DriftBound) = %v, so that a failed renewal can be retried", o.RenewInterval, safe)
	case o.RenewInterval < minRenewInterval:
		return bad("RenewInterval %v is below %v: renewals would hammer the store", o.RenewInterval, minRenewInterval)
	case o.RenewInterval < minWrite:
		return bad("RenewInterval %v is below the store's minimum interval between writes to one object (%v)", o.RenewInterval, minWrite)
	case o.StoreClockMargin < 0:
		return bad("StoreClockMargin %v must not be negative", o.StoreClockMargin)
	case len(o.Data) > MaxDataSize:
		return bad("Data is %d bytes, more than %d", len(o.Data), MaxDataSize)
	}
	if msg := holderProblem(o.Holder); msg != "" {
		return bad("Holder %s", msg)
	}
	for _, k := range o.FencedKeys {
		if k == "" {
			return bad("FencedKeys has an empty key")
		}
	}
	return nil
}

// maxHolderSize bounds a holder identity, in bytes.
const maxHolderSize = 256

// CheckHolder reports whether h may be a holder identity (see
// Options.Holder). The error wraps ErrInvalidOptions and names the first
// character that is wrong and its byte offset.
func CheckHolder(h string) error {
	if msg := holderProblem(h); msg != "" {
		return fmt.Errorf("%w: holder %s", ErrInvalidOptions, msg)
	}
	return nil
}

// showHolder is h for a message, quoted as a Go string if it is not a
// holder identity objlease accepts: a record written by another writer may
// hold a newline or a control character.
func showHolder(h string) string {
	if holderProblem(h) != "" {
		return strconv.Quote(h)
	}
	return h
}

// holderProblem says what is wrong with holder h, or "" if nothing is.
func holderProblem(h string) string {
	const rule = "a holder is 1 to 256 bytes of printable Unicode, without control characters, tabs, newlines or leading and trailing spaces"
	switch {
	case h == "":
		return "is empty: " + rule
	case len(h) > maxHolderSize:
		return fmt.Sprintf("is %d bytes, more than %d", len(h), maxHolderSize)
	case strings.TrimSpace(h) == "":
		return fmt.Sprintf("%q is only spaces: %s", h, rule)
	}
	for i, r := range h {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(h[i:]); size == 1 {
				return fmt.Sprintf("%q is not valid UTF-8 at byte %d: %s", h, i, rule)
			}
		}
		if !unicode.IsPrint(r) {
			return fmt.Sprintf("%q has the unprintable character %U at byte %d: %s", h, r, i, rule)
		}
	}
	if strings.TrimSpace(h) != h {
		return fmt.Sprintf("%q has a leading or trailing space: %s", h, rule)
	}
	return ""
}
