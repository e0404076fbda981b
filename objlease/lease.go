package objlease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/providers"
)

// Lease is a held lease. Its Context is cancelled, with a cause matching
// ErrLeaseLost, no later than the moment this holder's safe validity ends,
// which is before anyone else could take the lease over. Work that must
// stop when the lease is lost should use that context, and every write to a
// protected resource should carry Token so that the resource itself can
// refuse a holder that was paused past its lease.
type Lease struct {
	c      *Client
	ctx    context.Context
	cancel context.CancelCauseFunc

	// writing serialises writes of the record by this holder (background
	// renewal, Renew, Release), so that none of them writes against a
	// version another has just replaced. A channel, so that waiting for it
	// can end with the caller's context.
	writing chan struct{}
	// done is Done's channel; see there.
	done     chan struct{}
	doneOnce sync.Once
	// renewed is Renewed's channel, closed and replaced by each renewal
	// that moves the validity (guarded by mu).
	renewed chan struct{}

	mu      sync.Mutex
	rec     *Record
	version string
	// unsure holds the nonces of this holder's renewals since its last
	// confirmed write: any of them may still have landed (or land), and
	// only a record carrying one of them, or rec's, is this lease's own.
	unsure     []string
	validUntil time.Time // this holder's clock
	// wallUntil is validUntil on the machine's wall clock, where the clock
	// reads one (else zero): a forward step of the wall clock, as after a
	// frozen VM resumes and NTP steps it, ends the lease early.
	wallUntil time.Time
	lastSent  time.Time // when the last successful write was sent
	// lastAttempt is when this holder last sent a write of the record,
	// successful or not: the next background renewal keeps the store's
	// MinWriteInterval from it.
	lastAttempt time.Time
	// stopping is set by Release: no background renewal starts after it.
	stopping bool
	// cancelRenewal cancels the background renewal in flight, if any.
	cancelRenewal context.CancelFunc
	ended         error // why the lease ended (lost or released); nil while held

	// renewFailures is the streak of failed background renewals, for
	// their warnings; used by the renewal job only (one at a time).
	renewFailures failureStreak

	// Guarded by sched.mu: the lease's place in its scheduler.
	sched               *scheduler
	registered          bool
	renewAt, expireAt   time.Time
	renewIdx, expireIdx int
}

// newLease returns the lease just written as rec, renewed by the client's
// session from now on. If the session was closed meanwhile it releases the
// record again and returns ErrSessionClosed; the session's Close waits for
// that (see Session.startAcquire).
func (c *Client) newLease(ctx context.Context, rec *Record, res providers.WriteResult, sent time.Time) (*Lease, error) {
	if err := c.sess.err(c.key); err != nil {
		c.unwrite(ctx, rec, res.Version)
		return nil, err
	}
	lctx, cancel := context.WithCancelCause(context.Background())
	c.metrics.acquired(rec.Token)
	l := &Lease{
		c: c, ctx: lctx, cancel: cancel, rec: rec, version: res.Version,
		lastSent: sent, lastAttempt: sent,
		writing: make(chan struct{}, 1), done: make(chan struct{}), renewed: make(chan struct{}),
	}
	l.setValidUntil(c.validUntil(sent))
	l.mu.Lock()
	left := l.remaining(c.opts.Clock.Now())
	l.mu.Unlock()
	if left <= 0 {
		// The reply came after the safe validity the write began: another
		// holder may already have taken over. Nothing may start on this
		// lease; the record is given back, and the caller may try again.
		err := fmt.Errorf("%w: lease %q: the acquiring write's reply came after the validity it began had ended", ErrLeaseLost, c.key)
		cancel(err)
		c.metrics.ended(err)
		c.unwrite(ctx, rec, res.Version)
		return nil, err
	}
	if err := register(l, l.notBefore(sent.Add(c.firstRenewal()))); err != nil {
		cancel(err)
		c.metrics.ended(ErrReleased)
		c.unwrite(ctx, rec, res.Version)
		return nil, err
	}
	return l, nil
}

// unwrite releases the record rec just written at version, for a lease
// this client will not hold (its session closed, or its validity ended
// before the reply came): best effort, since the record expires on its own.
func (c *Client) unwrite(ctx context.Context, rec *Record, version string) {
	next := *rec
	next.Nonce = c.nonce()
	next.State = StateReleased
	next.WrittenAt = time.Now().UTC()
	next.Data = nil
	if _, err := c.put(ctx, &next, version); err != nil {
		c.log.Warn("giving back a record this client will not hold failed; it expires on its own", slog.Any("err", err))
	}
}

// firstRenewal is how long after acquiring the first background renewal
// is sent: RenewInterval × (1 − u/2) for a random u in [0, 1), so that
// leases acquired together spread their renewals over half the interval
// instead of renewing in one burst; later renewals keep that phase. It is
// never longer than RenewInterval, which the latency a holder tolerates is
// counted against.
func (c *Client) firstRenewal() time.Duration {
	c.rnd.Lock()
	defer c.rnd.Unlock()
	return c.opts.RenewInterval - time.Duration(float64(c.opts.RenewInterval)*c.opts.Rand.Float64()/2)
}

// nextRenewal is when the next background renewal is due after a
// successful one. It counts the renewal interval from when the last write
// was sent, not from its reply, so that a slow store eats into the
// interval rather than adding to it: a healthy holder then tolerates
// request latency up to TTL × (1 − b) − RenewInterval.
func (l *Lease) nextRenewal() time.Time {
	l.mu.Lock()
	next := l.lastSent.Add(l.c.opts.RenewInterval)
	l.mu.Unlock()
	return l.notBefore(next)
}

// notBefore returns t, or later if needed to keep the store's minimum
// interval between writes to one object since this holder's last write.
func (l *Lease) notBefore(t time.Time) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if earliest := l.lastAttempt.Add(l.c.store.Properties().MinWriteInterval); t.Before(earliest) {
		return earliest
	}
	return t
}

// validUntil is the end of the holder's safe validity for a write sent at
// sent: a contender whose clock runs up to (1 + b) fast waits at least a real
// TTL after seeing the write, and this holder's clock, running at least
// (1 − b) fast, reaches sent + TTL × (1 − b) no later than a real TTL after
// sending it. It ends lateAllowance(TTL) sooner still, so that a context
// ended that late by a busy scheduler still ends before anyone else could
// take the lease.
func (c *Client) validUntil(sent time.Time) time.Time {
	if !driftMargin() {
		return c.opts.Clock.Now().Add(c.opts.TTL) // from the reply, no margin
	}
	return sent.Add(time.Duration(float64(c.opts.TTL)*(1-c.opts.DriftBound)) - lateAllowance(c.opts.TTL))
}

// maxLateAllowance is the most a holder's validity is shortened to cover
// a context that its watcher ends late: a goroutine that a loaded machine
// runs late, thousands of leases due at once. Measured: the worst lateness
// with 3,000 leases on one session on 2 cores under a CPU hog (see
// BenchmarkCancelLateness and docs/protocol.md).
const maxLateAllowance = 100 * time.Millisecond

// lateAllowance is min(maxLateAllowance, TTL/10): a short TTL keeps most
// of its validity, and covers proportionally less lateness.
func lateAllowance(ttl time.Duration) time.Duration {
	return min(maxLateAllowance, ttl/10)
}

// Token returns the fencing token: stamp it on every write to the resource
// the lease protects.
func (l *Lease) Token() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rec.Token
}

// Key returns the lease's key.
func (l *Lease) Key() string { return l.c.key }

// Client returns the Client that acquired the lease: its Store reads the
// record as the lease's own requests do.
func (l *Lease) Client() *Client { return l.c }

// Record returns a copy of the record as last written by this holder.
func (l *Lease) Record() Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return *l.rec
}

// Context returns a context that is cancelled when the lease is lost or
// released; context.Cause tells which (ErrLeaseLost or ErrReleased).
// Release cancels it before it writes the released record, so that work
// tied to it has been told to stop before anyone else can acquire; Err
// then tells whether the release itself succeeded.
func (l *Lease) Context() context.Context { return l.ctx }

// Done is closed when the lease is lost or released.
// It closes once the context and every context derived from it have been
// cancelled, so that whoever wakes on it finds those ended too.
func (l *Lease) Done() <-chan struct{} { return l.done }

// Renewed returns a channel that is closed by the next renewal that moves
// the lease's validity on. Whoever enforces a deadline derived from
// ValidFor (a supervisor that stops a command when the validity ends)
// takes the channel, reads ValidFor, and waits on the channel and Done:
// it learns each new end as soon as the renewal lands, not on a poll.
func (l *Lease) Renewed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.renewed
}

// cancelWith cancels the lease's context with cause (the first cause wins)
// and then closes done.
func (l *Lease) cancelWith(cause error) {
	l.cancel(cause)
	l.doneOnce.Do(func() { close(l.done) })
}

// Err returns nil while the lease is held, else why it ended.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ended
}

// ValidFor returns how much longer, by this holder's clock, the lease is
// certainly not held by anyone else (the drift margin and the allowance
// for a late end applied, see docs/protocol.md); zero or
// negative once lost. It needs no round trip, so a leader can check it
// before serving a read from local state. It says nothing about pauses
// after the check: writes must still carry the token.
func (l *Lease) ValidFor() time.Duration {
	l.mu.Lock()
	if l.ended != nil || l.ctx.Err() != nil {
		l.mu.Unlock()
		return 0
	}
	left := l.remaining(l.c.opts.Clock.Now())
	l.mu.Unlock()
	if left <= 0 {
		// Seen over: the lease ends now rather than when its watcher
		// wakes, so that it cannot be renewed back to life.
		l.end(errValidityEnded(l.c.key))
	}
	return left
}

// errValidityEnded is why a lease whose safe validity ran out ends.
func errValidityEnded(key string) error {
	return fmt.Errorf("%w: lease %q: no renewal succeeded before its validity ended", ErrLeaseLost, key)
}

// end records why the lease ended and cancels its context, once.
func (l *Lease) end(cause error) {
	if l.stop(cause) {
		l.finish(cause)
	}
}

// stop records cause and ends the lease's context, if nothing ended it
// before (it reports whether it did). It takes no lock but the lease's
// and does no I/O: the watcher stops every lease due before it finishes
// any.
func (l *Lease) stop(cause error) bool {
	l.mu.Lock()
	first := l.ended == nil
	if first {
		l.ended = cause
	}
	l.mu.Unlock()
	if first {
		l.cancelWith(cause)
	}
	return first
}

// finish takes a stopped lease off its scheduler, counts its end (an
// OpenTelemetry instrument records in memory; exporters run apart) and
// has it logged off this goroutine (see reporter).
func (l *Lease) finish(cause error) {
	l.sched.remove(l)
	l.c.metrics.ended(cause)
	if errors.Is(cause, ErrLeaseLost) {
		log, token := l.c.log, l.Token()
		l.c.sess.report.post(func() {
			log.Warn("lease lost", slog.Uint64("token", token), slog.Any("cause", cause))
		})
	}
}

// Renew extends the lease now with one conditional write. Background
// renewal already does this; call it to renew at a moment of your choosing.
func (l *Lease) Renew(ctx context.Context) error {
	err := l.renew(ctx)
	if errors.Is(err, ErrLeaseLost) {
		l.end(err)
	}
	return err
}

// lockRecord waits for this holder's other writes of the record to finish,
// or for ctx to end, and then locks l.mu, for a write of the record. On
// success the caller holds both and unlocks l.mu, and the writes with
// <-l.writing. If the lease has ended it holds neither and returns the
// error the lease ended with, and ended.
func (l *Lease) lockRecord(ctx context.Context) (ended bool, err error) {
	select {
	case l.writing <- struct{}{}:
	case <-ctx.Done():
		return false, context.Cause(ctx)
	}
	l.mu.Lock()
	if err := l.ended; err != nil {
		l.mu.Unlock()
		<-l.writing
		return true, err
	}
	return false, nil
}

func (l *Lease) renew(ctx context.Context) (err error) {
	ctx, span := l.c.startSpan(ctx, "objlease.renew")
	defer func() {
		var token uint64
		if span.IsRecording() {
			token = l.Token()
		}
		endSpan(span, "renewed", token, err)
	}()
	if _, err := l.lockRecord(ctx); err != nil {
		return err
	}
	defer func() { <-l.writing }()
	next := *l.rec
	version := l.version
	l.mu.Unlock()

	next.Nonce = l.c.nonce()
	next.Renewals++
	next.WrittenAt = time.Now().UTC()
	l.mu.Lock()
	l.unsure = append(l.unsure, next.Nonce)
	l.mu.Unlock()
	sent := l.c.opts.Clock.Now()
	l.mu.Lock()
	l.lastAttempt = sent
	l.mu.Unlock()
	res, _, err := l.c.putTracked(ctx, &next, version, l.notice)
	var seen *Record
	if errors.Is(err, providers.ErrPrecondition) {
		// An earlier renewal whose call gave up may have landed since,
		// moving the version on: the record is then still this lease's
		// own, and this renewal goes over it. Validity is counted from
		// this renewal's send, so adopting the late write extends nothing.
		var v string
		var ok bool
		if v, seen, ok = l.lateOwnWrite(ctx, next.Token); ok {
			seen = nil // this lease's own: what replaced it is unknown
			sent = l.c.opts.Clock.Now()
			res, _, err = l.c.putTracked(ctx, &next, v, l.notice)
		}
	}
	l.c.metrics.renewed(l.c.opts.Clock.Now().Sub(sent), err)
	if errors.Is(err, providers.ErrPrecondition) {
		l.mu.Lock()
		valid := l.remaining(l.c.opts.Clock.Now()) > 0
		l.mu.Unlock()
		return &Error{Key: l.c.key, Record: seen, Reason: replacedHow(seen, l.c.opts.Holder, next.Token, valid),
			Err: fmt.Errorf("%w: lease %q: %w: %w", ErrLeaseLost, l.c.key, errRefused, err)}
	}
	if err != nil {
		return err
	}
	l.mu.Lock()
	if l.ended == nil && l.remaining(l.c.opts.Clock.Now()) <= 0 {
		// The validity ran out (by any of the holder's clocks) before the
		// reply came: the lease is over, whatever the store now holds.
		l.mu.Unlock()
		l.end(errValidityEnded(l.c.key))
		l.mu.Lock()
	}
	defer l.mu.Unlock()
	if l.ended != nil {
		return l.ended
	}
	l.rec, l.version = &next, res.Version
	// Confirmed over the version the earlier, unsure renewals were written
	// against: none of them can land now.
	l.unsure = nil
	l.setValidUntil(l.c.validUntil(sent))
	l.lastSent = sent
	close(l.renewed)
	l.renewed = make(chan struct{})
	return nil
}

// setValidUntil sets the end of the holder's validity, on its clock and on
// the wall clock (l.mu held, or l not yet shared).
func (l *Lease) setValidUntil(until time.Time) {
	l.validUntil = until
	if wall, ok := clock.Wall(l.c.opts.Clock); ok {
		l.wallUntil = wall.Add(until.Sub(l.c.opts.Clock.Now()))
	}
}

// remaining is how much longer, from now on the holder's clock, the lease
// is valid by every clock the holder reads: the earliest end wins, so a
// wall clock stepped forward ends it early and one stepped back changes
// nothing (l.mu held).
func (l *Lease) remaining(now time.Time) time.Duration {
	left := l.validUntil.Sub(now)
	if !l.wallUntil.IsZero() {
		if wall, ok := clock.Wall(l.c.opts.Clock); ok {
			left = min(left, l.wallUntil.Sub(wall))
		}
	}
	return left
}

// Release ends the lease: it stops renewal and marks the record released
// with one conditional write, keeping the token so that the next holder's is
// higher. It returns an error matching ErrLeaseLost if the lease had already
// been lost (the record is then left alone).
func (l *Lease) Release(ctx context.Context) error {
	ctx, span := l.c.startSpan(ctx, "objlease.release")
	err := l.release(ctx)
	endSpan(span, "released", 0, err)
	return err
}

func (l *Lease) release(ctx context.Context) error {
	// No background renewal starts from now on, and one in flight is
	// cancelled: a renewal hung in a request must not hold Release up.
	l.mu.Lock()
	l.stopping = true
	cancelRenewal := l.cancelRenewal
	l.mu.Unlock()
	l.sched.stopRenewals(l)
	if cancelRenewal != nil {
		cancelRenewal()
	}
	if ended, err := l.lockRecord(ctx); err != nil {
		if ended && errors.Is(err, ErrReleased) {
			return nil
		}
		return err
	}
	defer func() { <-l.writing }()
	next := *l.rec
	version := l.version
	own := append([]string{l.rec.Nonce}, l.unsure...)
	validUntil := l.validUntil
	l.mu.Unlock()

	if callbackBeforeRelease() {
		// Work tied to the lease must have been told to stop before the
		// released record lets anyone else acquire.
		l.cancelWith(ErrReleased)
	}
	next.Nonce = l.c.nonce()
	next.State = StateReleased
	next.WrittenAt = time.Now().UTC()
	next.Data = nil
	var err error
	var uncertain bool
	if keepRecordOnRelease() {
		_, uncertain, err = l.c.putTracked(ctx, &next, version, nil)
	} else {
		err = l.c.store.Delete(ctx, l.c.key, version)
	}
	if errors.Is(err, providers.ErrPrecondition) {
		o, rerr := l.c.read(ctx)
		if rerr == nil && l.ownWrite(o, next.Token, own) {
			// A renewal abandoned by the cancellation above landed after all.
			var u bool
			_, u, err = l.c.putTracked(ctx, &next, o.version, nil)
			uncertain = uncertain || u
			if errors.Is(err, providers.ErrPrecondition) {
				o, rerr = l.c.read(ctx)
			}
		}
		if errors.Is(err, providers.ErrPrecondition) && uncertain {
			switch {
			case rerr == nil && successor(o, next.Token, validUntil):
				// The release landed, its reply was lost, and the lease
				// was taken after it.
				err = nil
			case rerr == nil && broken(o, next.Token, validUntil):
				// Broken by an operator while held: lost, as reported below.
			default:
				// Seen only after this holder's validity, or not seen at
				// all: the release may have landed, or the lease expired
				// and was taken. Say so rather than report a loss that
				// may not have happened.
				err = fmt.Errorf("lease %q: %w: the release's reply was lost, and it could not be told whether it landed before the lease was taken (%w)", l.c.key, ErrAmbiguous, err)
				l.end(err)
				return err
			}
		}
	}
	if errors.Is(err, providers.ErrPrecondition) {
		err = fmt.Errorf("%w: lease %q: %w before release: %w", ErrLeaseLost, l.c.key, errRefused, err)
		l.end(err)
		return err
	}
	if err != nil {
		// Still ours as far as we know; it expires on its own.
		l.end(fmt.Errorf("%w: lease %q: %w: %w", ErrLeaseLost, l.c.key, errReleaseFailed, err))
		return err
	}
	l.end(ErrReleased)
	l.c.log.Info("lease released", slog.Uint64("token", next.Token))
	return nil
}
