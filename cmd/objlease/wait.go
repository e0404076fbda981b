package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/fence"
	"github.com/objlease/objlease/objlease/tick"
	"github.com/objlease/objlease/providers"
)

// slotsPoll is how often run --slots reads its slots by default. A
// semaphore's poll reads every slot, on slot 0's schedule, so the renewal
// phase of one holder cannot time reads of the others: it polls plainly,
// often enough that a slot given back is taken within a second.
const slotsPoll = time.Second

// take acquires the lease as --timeout says. It waits in the library's
// one waiting loop (objlease.Await: the holder's renewal phase, backoff
// for a failing store, and an error that waiting cannot cure, such as a
// missing bucket or refused credentials, ends it at once) and, when stderr
// is a terminal or under -v, says who holds the lease, since when, and the
// earliest this observer could take it over, again only when that changes
// (waitNews); elsewhere it says so once, when the wait is longer than
// longWait. With --timeout 0 it makes one attempt, and looks for
// the outcome of a write whose reply was lost for at most the lease's TTL
// (after which such a write has expired).
func (c *cli) take(ctx context.Context, cl *objlease.Client, timeout *waitFlag) (*objlease.Lease, error) {
	l, err := c.await(ctx, cl, timeout)
	if errors.Is(err, objlease.ErrAmbiguous) {
		// The write may have landed: the lease may be this holder's,
		// unseen, until its TTL ends. Say whose, and how to free it.
		return nil, &unknownTake{holder: cl.Options().Holder, ttl: cl.Options().TTL, requestTimeout: c.requestTimeout, err: err}
	}
	if err != nil {
		return nil, foreignObject(ctx, cl.Store(), cl.Key(), err, "; it is left alone unless --force is given")
	}
	if l.Token() == 1 {
		c.warnRestarted(ctx, cl, l)
	}
	return l, nil
}

// warnRestarted warns when a lease that starts at token 1 has a fenced
// object beside it, its tick mark, written with a token as high or
// higher: its record was deleted (by hand, or by a tool that cleans up),
// and the tokens start again below those already given out. Writes
// fenced with the new tokens are refused where a higher one has written.
// Nothing else shows a deleted record's tokens: a fenced object elsewhere
// is found only when --fenced names it (and then the tokens go on above
// it), and a record deleted with nothing beside it restarts unseen.
func (c *cli) warnRestarted(ctx context.Context, cl *objlease.Client, l *objlease.Lease) {
	key := tick.Key(cl.Key())
	a, err := cl.Store().Stat(ctx, key)
	if err != nil {
		return
	}
	t, err := strconv.ParseUint(a.Metadata[fence.TokenKey], 10, 64)
	if err != nil || t < l.Token() {
		return
	}
	c.log.Warn(fmt.Sprintf("lease %q starts again at token %d, but %q beside it was written with token %d: its record was deleted, and fenced writes with tokens up to %d are refused; release it and acquire with --min-token %d to go on above", cl.Key(), l.Token(), key, t, t, t))
}

// unknownTake is an acquisition whose write's outcome could not be
// learnt: the lease may be held by holder, unseen, for ttl.
type unknownTake struct {
	holder         string
	ttl            time.Duration
	requestTimeout time.Duration
	err            error
}

func (e *unknownTake) Error() string { return e.err.Error() }
func (e *unknownTake) Unwrap() error { return e.err }

// why is the line's cause: the lease may be held, by whom, for how long,
// how to free it, and what to change; rawURL names the lease.
func (e *unknownTake) why(rawURL string) string {
	wait := "the write in time"
	var te *providers.TimeoutError
	if errors.As(e.err, &te) && e.requestTimeout > 0 {
		wait = fmt.Sprintf("the write, nor the re-reads of the record, within --request-timeout %v", e.requestTimeout)
	}
	release := fmt.Sprintf("objlease release --holder %s %s", shellQuote(e.holder), rawURL)
	return fmt.Sprintf("the lease may be held by %q, unseen: the store did not answer %s; if the write landed, it holds the lease for its TTL (%v), and %s frees it (raise --request-timeout above the time the store takes to answer, or check the store and the network)",
		e.holder, wait, roundDuration(e.ttl), release)
}

// await is take, with the error as the library gives it.
func (c *cli) await(ctx context.Context, cl *objlease.Client, timeout *waitFlag) (*objlease.Lease, error) {
	if timeout.set && timeout.d == 0 {
		// One attempt, and the re-reads that learn its outcome if its
		// reply is lost: for four requests' time at most (a store slower
		// than --request-timeout answers none of them), and never past
		// the TTL, after which a write that landed has expired anyway.
		bound := cl.Options().TTL
		if c.requestTimeout > 0 {
			bound = min(bound, 4*c.requestTimeout)
		}
		ctx, cancel := context.WithTimeoutCause(ctx, bound, fmt.Errorf("%w: the outcome of the one attempt of %s stayed unknown for %v", errNotAcquired, timeout, bound))
		defer cancel()
		return cl.TryAcquire(ctx)
	}
	if timeout.set {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, timeout.d, fmt.Errorf("%w within %s", errNotAcquired, timeout))
		defer cancel()
	}
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	w := &waiting{ctx: ctx, c: c, ttl: cl.Options().TTL, say: func(held *objlease.Error, first bool) {
		c.sayHeld(ctx, cl, held, first)
	}, stop: stop}
	l, err := objlease.Await(ctx, cl, cl.TryAcquire, w.progress)
	switch {
	case err == nil:
		return l, nil
	case w.self != nil:
		return nil, w.self
	case ctx.Err() != nil && !permanent(err):
		return nil, waitEnded(ctx, w.last, w.storeErr)
	}
	return nil, err
}

// waiting follows one wait's progress: who held the lease last, the last
// store failure, and when to say again who holds it (through say, on a
// terminal or with -v; elsewhere once, if the wait is long).
type waiting struct {
	ctx      context.Context // the wait's: an attempt it cut short is no store failure
	c        *cli
	ttl      time.Duration
	say      func(held *objlease.Error, first bool)
	last     *objlease.Error
	storeErr error
	news     waitNews
	saidOnce bool // said once, where no progress is said
	stop     context.CancelCauseFunc
	self     error // the lease is held by the command this process runs under
}

// progress is the objlease.Await hook.
func (w *waiting) progress(p objlease.Progress) {
	if p.Held == nil {
		if w.ctx.Err() == nil {
			w.storeErr = p.Err
		}
		return
	}
	w.storeErr = nil
	w.c.probe.set(func(pr *probe) { pr.holder, pr.token = p.Held.Record.Holder, p.Held.Record.Token })
	if ownLease(p.Held) {
		w.self = usagef("this process runs under the lease it waits for (held by %s, token %d: $OBJLEASE_HOLDER and $OBJLEASE_TOKEN here), so it would wait for itself forever; fence with $OBJLEASE_TOKEN, or lease another key", showHolder(p.Held.Record.Holder), p.Held.Record.Token)
		w.stop(w.self)
		return
	}
	first := w.last == nil || p.Held.Record.Holder != w.last.Record.Holder || p.Held.Record.Token != w.last.Record.Token
	w.last = p.Held
	if !w.news.changed(p, w.ttl) {
		return
	}
	switch {
	case w.c.progress():
		w.say(p.Held, first)
	case !w.saidOnce && p.Held.Wait >= longWait && w.mayLast(longWait):
		// Quiet, as in a job's log, but not silent for long: once.
		w.saidOnce = true
		w.say(p.Held, first)
	}
}

// mayLast reports whether the wait's deadline, if any, is d or more away.
func (w *waiting) mayLast(d time.Duration) bool {
	end, ok := w.ctx.Deadline()
	return !ok || time.Until(end) >= d
}

// longWait is the wait past which a waiter says once what it waits for,
// even where it would say nothing (stderr not a terminal, no -v).
const longWait = 3 * time.Second

// ownLease reports whether held is the lease this process runs under: a
// command started by run, elect or group join that waits for its own
// lease again.
func ownLease(held *objlease.Error) bool {
	holder, token := os.Getenv("OBJLEASE_HOLDER"), os.Getenv("OBJLEASE_TOKEN")
	return holder != "" && holder == held.Record.Holder && token == strconv.FormatUint(held.Record.Token, 10)
}

// waitEnded is why a wait ended early: a signal; or --timeout, with the
// store's failure if the store was failing (not who held the lease before
// it began to), else with who held the lease.
func waitEnded(ctx context.Context, last *objlease.Error, storeErr error) error {
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
	held  *objlease.Error
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

// progress reports whether a waiter says who holds the lease: when stderr
// is a terminal, and under -v.
func (c *cli) progress() bool { return c.verbose || isTerminal(c.stderr) }

// isTerminal reports whether w is a terminal. A character device is one in
// practice (or /dev/null, where nothing is lost either way); the standard
// library has no isatty.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// sayHeld says on stderr who holds the lease a waiter waits for, and the
// earliest a takeover could succeed by the rule this waiter judges by.
// When the holder is new to this waiter it reads the record once more for
// the time it was acquired.
func (c *cli) sayHeld(ctx context.Context, cl *objlease.Client, held *objlease.Error, first bool) {
	var msg string
	if held.Reason != "" { // not a record: force waits it out
		msg = fmt.Sprintf("waiting for %s: the object there is not an objlease lease record; --force replaces it once it has stayed unchanged for its TTL: in %s at the earliest",
			cl.Key(), roundDuration(held.Wait))
	} else {
		since := ""
		if first {
			if st, err := cl.Inspect(ctx); err == nil && st.Record != nil && st.Record.Token == held.Record.Token && !st.Record.AcquiredAt.IsZero() {
				since = fmt.Sprintf(" since %s (its clock)", stamp(st.Record.AcquiredAt))
			}
		}
		rule := "by this observer"
		if cl.Options().StoreClock {
			rule = "by the store's clock"
		}
		msg = fmt.Sprintf("waiting for %s: held by %s (token %d)%s; earliest takeover %s in %s, if it stops renewing",
			cl.Key(), showHolder(held.Record.Holder), held.Record.Token, since, rule, roundDuration(held.Wait))
	}
	c.say(msg)
}

// say writes one line of progress on stderr, whatever the log level
// (level INFO with --log-format json).
func (c *cli) say(msg string) {
	if c.logMu != nil {
		c.logMu.Lock()
		defer c.logMu.Unlock()
	}
	if c.logJSON {
		c.stderr.Write(jsonLine(slog.LevelInfo, msg, c.cmdName, nil))
		return
	}
	fmt.Fprintf(c.stderr, "objlease: %s\n", msg)
}

// waitNews decides when a waiter says again who holds the lease: when the
// holder or its token changes, or the earliest takeover moves by more than
// a little both in time and in how long is left. A live holder's renewals
// move the time but not the wait; time passing beside a holder that has
// stopped renewing shrinks the wait but does not move the time; a holder
// that stops renewing, or a new TTL, moves both, once.
type waitNews struct {
	said     bool
	holder   string
	token    uint64
	bad      bool
	takeover time.Time
	wait     time.Duration
}

// changed reports whether p is news, and if so remembers it as said. ttl
// is the lease's, which sets how much counts as a little.
func (n *waitNews) changed(p objlease.Progress, ttl time.Duration) bool {
	h := p.Held
	if h == nil {
		return false
	}
	slack := max(time.Second, ttl/10)
	news := !n.said || h.Record.Holder != n.holder || h.Record.Token != n.token || (h.Reason != "") != n.bad ||
		(absDuration(p.Takeover.Sub(n.takeover)) > slack && absDuration(h.Wait-n.wait) > slack)
	if news {
		*n = waitNews{said: true, holder: h.Record.Holder, token: h.Record.Token, bad: h.Reason != "", takeover: p.Takeover, wait: h.Wait}
	}
	return news
}

func absDuration(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// permanent reports errors that waiting will not cure.
func permanent(err error) bool {
	return objlease.IsPermanent(err) || errors.Is(err, providers.ErrBadURL)
}

// addTakeFlags registers the flags of the commands that take a lease.
func (c *cli) addTakeFlags(fs *flagSet, lf *leaseFlags) *waitFlag {
	lf.addTTL(fs)
	lf.addHolder(fs)
	lf.addExpiry(fs)
	lf.addForce(fs, "overwrite an object at the key that is not an objlease record, once it has been seen unchanged for its TTL, with a token above the highest one it, --min-token or --fenced shows (refused if none shows one)")
	lf.addTokenFloor(fs)
	lf.addPoll(fs, 0, "read the record every `duration` while it is held elsewhere, at most TTL: fewer reads, a later takeover (default: on the holder's renewal phase, once per renewal interval TTL/3, just after each renewal lands; run --slots: every 1s)")
	c.addConflictExit(fs)
	return addTimeout(fs)
}
