// Package recordwrite is the one conditional write of a lease record,
// shared by package objlease and the Kubernetes lock: the next fencing
// token, the write loop (the same bytes sent again a few times), resolving
// a write whose outcome is unknown by re-reading the key, and the waits
// between attempts. It knows nothing of the record's format: the caller
// encodes the record, re-reads the key and recognises its own write.
package recordwrite

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"time"

	"github.com/objlease/objlease/internal/ctxsleep"
	"github.com/objlease/objlease/providers"
)

// The errors of a record write, declared once: objlease.ErrTokenExhausted
// and objlease.ErrAmbiguous are these values (their doc comments are in
// objlease/errors.go).
var (
	ErrTokenExhausted = errors.New("fencing token exhausted")
	ErrAmbiguous      = errors.New("outcome of lease write could not be determined")
)

// Attempts bounds how often a write is sent, counting the first, while
// re-reading finds that the earlier attempts did not land.
const Attempts = 3

// ConflictWait is the first wait after a write refused by a racing one
// still in flight; it doubles with each attempt. It is network time, not
// lease time (it decides nothing about expiry): it runs on Go's timers,
// which a synctest bubble fakes, not on a lease clock, which a test may
// never advance.
const ConflictWait = 30 * time.Millisecond

// ResolveWait is the first wait between re-reads that resolve a write's
// outcome; it doubles up to a second.
const ResolveWait = 50 * time.Millisecond

// Backoff is the one back-off rule: first doubled n times, at most limit.
func Backoff(first, limit time.Duration, n int) time.Duration {
	return min(first<<min(n, 10), limit)
}

// NextToken returns the token after t, refusing to wrap around to 0. The
// error names the key as noun and key do ("lease" and the key: lease "k").
func NextToken(noun, key string, t uint64) (uint64, error) {
	if t == math.MaxUint64 {
		return 0, fmt.Errorf("%s %q: %w: token %d is the largest a token can be; the next one would wrap around to 0, which fenced resources would take for a stale holder's",
			noun, key, ErrTokenExhausted, t)
	}
	return t + 1, nil
}

// Writer writes records at one key of a store. Its zero-valued optional
// fields have defaults, given with each.
type Writer struct {
	Store providers.Store
	Key   string
	// Noun names what the key holds in errors: "lease" gives lease "k".
	Noun string
	// Unusable reports a re-read's error that says the object at the key
	// is not a usable record: it ends the resolution as it is. Default:
	// none does.
	Unusable func(error) bool
	// Permanent reports a re-read's error that re-reading will not cure (a
	// missing bucket, refused credentials): it ends the resolution at once
	// with ErrAmbiguous. Default: none is.
	Permanent func(error) bool
	// Sleep waits between re-reads, or until ctx ends. Default: Go's
	// timers (ctxsleep.For).
	Sleep func(ctx context.Context, d time.Duration) error
	// Jitter scales a wait after a conflict by a random factor in [0.8,
	// 1.0). Default: math/rand/v2.
	Jitter func(time.Duration) time.Duration
	// Log logs the write's notes: a write re-read after an unknown outcome
	// or a racing write. Default: none.
	Log func(level slog.Level, msg string, attrs ...any)
}

// Found is what a re-read shows at the key.
type Found struct {
	// Version is the object's version; "" if the key is absent.
	Version string
	// Own reports that the object is the write being resolved.
	Own bool
	// Result is the write's result when Own.
	Result providers.WriteResult
}

// Result is the outcome of a write that Write reports.
type Result struct {
	providers.WriteResult
	// Uncertain reports that an attempt's outcome was unknown, so that
	// the write may have landed even if Write reports a refusal.
	Uncertain bool
	// ReadBack reports that the write was found to have landed by
	// re-reading (readBack's call saw it), not by the store's reply.
	ReadBack bool
}

// Write writes body at the key conditionally: over ifVersion, or as a
// create if ifVersion is "". If the outcome is unknown, or the store
// reports a conflict, it re-reads with readBack until it can tell whether
// the write landed; if the object is unchanged the write has not landed
// and the same bytes are sent again, up to Attempts in all. An earlier
// attempt can still land late, before the retry: the retry is then
// refused, and that refusal too is resolved by re-reading. After a
// conflict it waits ConflictWait, doubling, jittered, before the next
// attempt. Someone else's write found by re-reading is an error matching
// providers.ErrPrecondition.
func (w *Writer) Write(ctx context.Context, body []byte, ifVersion string, readBack func(context.Context) (Found, error)) (Result, error) {
	var r Result
	for attempt := 1; ; attempt++ {
		var err error
		if ifVersion == "" {
			r.WriteResult, err = w.Store.Create(ctx, w.Key, body, nil)
		} else {
			r.WriteResult, err = w.Store.Replace(ctx, w.Key, body, nil, ifVersion)
		}
		if err == nil {
			return r, nil
		}
		// A retry refused: perhaps by an earlier attempt that landed late.
		lateOwn := attempt > 1 && errors.Is(err, providers.ErrPrecondition)
		if !lateOwn && !errors.Is(err, providers.ErrUnknownOutcome) && !errors.Is(err, providers.ErrConflict) {
			return r, err
		}
		r.Uncertain = r.Uncertain || errors.Is(err, providers.ErrUnknownOutcome)
		if errors.Is(err, providers.ErrConflict) {
			// Nothing was written: a racing write to the record held it.
			w.log(slog.LevelInfo, "write refused by a racing write; re-reading", slog.Any("err", err))
		} else {
			w.log(slog.LevelWarn, "write outcome unknown; re-reading", slog.Any("err", err))
		}
		res, landed, rerr := w.resolve(ctx, ifVersion, err, readBack)
		r.WriteResult = res
		if rerr != nil {
			return r, rerr
		}
		if landed {
			r.ReadBack = true
			return r, nil
		}
		if attempt == Attempts {
			return r, err
		}
		if errors.Is(err, providers.ErrConflict) {
			// The racing write is still being applied (S3: "a conflicting
			// conditional operation is in progress"): give it the time to
			// land, so that the next attempt finds it rather than racing
			// it again.
			if err := ctxsleep.For(ctx, w.jitter(Backoff(ConflictWait, time.Second, attempt-1))); err != nil {
				return r, err
			}
		}
	}
}

// resolve re-reads the key until it can tell whether the write made over
// ifVersion landed (readBack finds it its own). It reports landed = false
// with no error if the object is as it was before the write (so it can be
// retried), and ErrPrecondition if someone else's write is there instead.
// An unusable object ends it with readBack's error, a permanent read error
// or the end of ctx with ErrAmbiguous.
func (w *Writer) resolve(ctx context.Context, ifVersion string, cause error, readBack func(context.Context) (Found, error)) (providers.WriteResult, bool, error) {
	for n := 0; ; n++ {
		f, err := readBack(ctx)
		if err == nil {
			switch {
			case f.Own:
				return f.Result, true, nil
			case f.Version == ifVersion: // unchanged ("" == absent for a create)
				return providers.WriteResult{}, false, nil
			}
			return providers.WriteResult{}, false, fmt.Errorf("%w (after %v)", providers.ErrPrecondition, cause)
		}
		if w.Unusable != nil && w.Unusable(err) {
			return providers.WriteResult{}, false, err
		}
		if w.Permanent != nil && w.Permanent(err) {
			// Re-reading again will not succeed either: a missing bucket or
			// refused credentials stay so.
			return providers.WriteResult{}, false, fmt.Errorf("%s %q: %w: %w; re-reading: %w", w.Noun, w.Key, ErrAmbiguous, cause, err)
		}
		if w.sleep(ctx, Backoff(ResolveWait, time.Second, n)) != nil {
			return providers.WriteResult{}, false, fmt.Errorf("%s %q: %w: %w", w.Noun, w.Key, ErrAmbiguous, cause)
		}
	}
}

func (w *Writer) log(level slog.Level, msg string, attrs ...any) {
	if w.Log != nil {
		w.Log(level, msg, attrs...)
	}
}

func (w *Writer) sleep(ctx context.Context, d time.Duration) error {
	if w.Sleep != nil {
		return w.Sleep(ctx, d)
	}
	return ctxsleep.For(ctx, d)
}

func (w *Writer) jitter(d time.Duration) time.Duration {
	if w.Jitter != nil {
		return w.Jitter(d)
	}
	return time.Duration(float64(d) * (0.8 + 0.2*rand.Float64()))
}
