package objlease

import (
	"container/heap"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/objlease/objlease/internal/indexheap"
)

// AcquireFunc is Acquire without a goroutine of the caller's: it returns
// at once and waits in the background, then calls f, in a goroutine of its
// own, with the lease, or with the error Acquire would have returned once
// ctx ends or waiting cannot succeed. f is called exactly once.
//
// Its attempts are made by the scheduler that renews the leases of the
// client's session, at most a few dozen at once, so that a process can
// await thousands of leases for a few hundred bytes each.
func (c *Client) AcquireFunc(ctx context.Context, f func(*Lease, error)) {
	w := &waiter{c: c, ctx: ctx, f: f, idx: -1, sch: schedule{c: c}}
	s, err := join(c, func(s *scheduler) {
		w.sched = s
		c.sess.waiters[w] = struct{}{}
	})
	if err != nil {
		go f(nil, err)
		return
	}
	w.at = s.clk.Now()
	// Under s.mu, so that cancel, which takes it, finds w queued.
	w.stop = context.AfterFunc(ctx, w.cancel)
	s.pushAttempt(w)
	s.mu.Unlock()
}

// A waiter is one AcquireFunc waiting in a scheduler.
type waiter struct {
	c     *Client
	ctx   context.Context
	f     func(*Lease, error)
	sched *scheduler
	stop  func() bool // ends the watch on ctx; set before w is first queued
	sch   schedule
	last  error // the last attempt's error

	// Guarded by sched.mu.
	at       time.Time // next attempt
	idx      int       // place in sched.attempts, -1 if not queued
	finished bool
}

// run makes one attempt and queues the next, or finishes.
func (w *waiter) run(s *scheduler) {
	sent := s.clk.Now()
	l, err := w.c.TryAcquire(w.ctx)
	if err == nil {
		w.finish(l, nil)
		return
	}
	wait, retry := w.sch.next(sent, err, nil)
	if !retry || w.ctx.Err() != nil {
		w.finish(nil, w.c.giveUp(w.ctx, err))
		return
	}
	w.last = err
	s.mu.Lock()
	queued := w.ctx.Err() == nil && !w.finished
	if queued {
		w.at = s.clk.Now().Add(wait)
		s.pushAttempt(w)
	}
	s.mu.Unlock()
	if !queued {
		w.finish(nil, w.c.waitEnded(w.ctx, err))
	}
}

// cancel runs once ctx ends: a queued waiter finishes now, one whose
// attempt is in flight when that attempt returns.
func (w *waiter) cancel() {
	s := w.sched
	s.mu.Lock()
	queued := w.idx >= 0
	if queued {
		heap.Remove(&s.attempts, w.idx)
	}
	s.mu.Unlock()
	if queued {
		w.finish(nil, w.c.waitEnded(w.ctx, w.last))
	}
}

// end finishes w with err whether or not it is queued: an attempt in
// flight then finds it finished (see Session.Close).
func (w *waiter) end(err error) {
	s := w.sched
	s.mu.Lock()
	if w.idx >= 0 {
		heap.Remove(&s.attempts, w.idx)
	}
	s.mu.Unlock()
	w.finish(nil, err)
}

// finish takes w off its scheduler and calls f, once.
func (w *waiter) finish(l *Lease, err error) {
	s := w.sched
	s.sess.mu.Lock()
	delete(s.sess.waiters, w)
	s.mu.Lock()
	first := !w.finished
	if first {
		w.finished = true
		s.leave()
	}
	s.mu.Unlock()
	s.sess.mu.Unlock()
	if !first {
		return
	}
	if w.stop != nil {
		w.stop()
	}
	go w.f(l, err)
}

// pushAttempt queues w and wakes the waker if w is now due first (s.mu
// held).
func (s *scheduler) pushAttempt(w *waiter) {
	if !s.waiting {
		s.waiting = true
		go s.dispatch(attemptDeadlines{s}, &s.attemptArmed, s.wakeAttempt, s.dueAttempts)
	}
	heap.Push(&s.attempts, w)
	if s.attemptArmed.IsZero() || w.at.Before(s.attemptArmed) {
		notify(s.wakeAttempt)
	}
}

// dueAttempts pops the waiters due by now, as many as may run (s.mu held).
func (s *scheduler) dueAttempts(now time.Time) []job {
	var out []job
	for s.attempts.Len() > 0 && !s.attempts.Min().at.After(now) && s.attemptsRunning < maxAttemptsInFlight {
		out = append(out, heap.Pop(&s.attempts).(*waiter))
		s.attemptsRunning++
	}
	return out
}

// attemptDeadlines is what the waker sleeps until: the first waiter's next
// attempt, or none while maxAttemptsInFlight are running (a finishing one
// wakes it).
type attemptDeadlines struct{ s *scheduler }

func (d attemptDeadlines) next() (time.Time, bool) {
	if d.s.attempts.Len() == 0 || d.s.attemptsRunning >= maxAttemptsInFlight {
		return time.Time{}, false
	}
	return d.s.attempts.Min().at, true
}

// Progress is what a waiting loop reports after each attempt that did not
// take the lease and before it waits for the next (see Await).
type Progress struct {
	// Held is who holds the lease, when the attempt found it held; nil
	// when it failed otherwise.
	Held *Error
	// Takeover is the earliest instant, on the client's clock, at which a
	// takeover could succeed if the holder stops renewing now (zero when
	// the lease was not seen held).
	Takeover time.Time
	// Err is the attempt's error when the lease was not seen held: a store
	// failure, a race or throttling, all of which the loop tries again.
	Err error
	// Next is when, on the client's clock, the loop tries again.
	Next time.Time
}

// Await repeats attempt until it succeeds, ctx ends, or it fails with an
// error that waiting cannot cure (see IsPermanent), which ends it at once.
// It is the one waiting loop: Acquire, AcquireFunc, and the waiters built
// on this package (election, semaphore, shard, the objlease command) all
// wait in it or on its schedule. An attempt that finds the lease held
// returns an *Error matching ErrHeld, as TryAcquire does: one for c's own
// key is read again on the holder's renewal phase (see Acquire), one for
// another key when its Wait ends or after PollInterval, whichever comes
// first. Other errors are tried again every PollInterval, with backoff
// while the store keeps failing. After each attempt that does not end the
// wait, progress, if not nil, is told who holds the lease and when the
// next attempt comes. When ctx ends, the error wraps its cause and the
// last attempt's error. To follow the lease without taking it, see Watch.
func Await[T any](ctx context.Context, c *Client, attempt func(context.Context) (T, error), progress func(Progress)) (T, error) {
	sch := schedule{c: c}
	for {
		sent := c.opts.Clock.Now()
		v, err := attempt(ctx)
		if err == nil {
			return v, nil
		}
		wait, retry := sch.next(sent, err, progress)
		if !retry || ctx.Err() != nil {
			var zero T
			return zero, c.giveUp(ctx, err)
		}
		if c.wait(ctx, wait) != nil {
			var zero T
			return zero, c.waitEnded(ctx, err)
		}
	}
}

// Watch reads the lease's record without taking it and calls f with each
// read's Status, until ctx ends (Watch then returns nil), f returns an
// error (Watch returns it), or a read fails with an error that waiting
// cannot cure (see IsPermanent). It reads as a waiter does: while the
// lease is held, on the holder's renewal phase and at the first instant
// it could expire for this client; otherwise every PollInterval; with
// backoff while the store keeps failing, logging the first failure of a
// streak. f is called from Watch's goroutine, once per read, whether or
// not the record changed: compare Status.Version, Status.Expired and the
// record's holder to see a change of holder.
func (c *Client) Watch(ctx context.Context, f func(*Status) error) error {
	sch := schedule{c: c}
	for {
		sent := c.opts.Clock.Now()
		st, err := c.Inspect(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var wait time.Duration
		if err == nil {
			if err := f(st); err != nil {
				return err
			}
			wait = sch.afterRead(sent, st)
		} else {
			var retry bool
			if wait, retry = sch.afterFailure(err, "reading the lease failed; retrying"); !retry {
				return err
			}
		}
		if c.wait(ctx, wait) != nil {
			return nil
		}
	}
}

// schedule decides, for one waiting loop, whether and when to try again:
// the one place where errors are classified and reads are timed.
type schedule struct {
	c     *Client
	r     retry
	phase phaseTracker
	store storePhase
}

// next is how long the loop waits after the failed attempt err, sent at
// sent, and whether it tries again at all: retry's answer, except that a
// lease held at c's key is read again as afterHeld says. It tells
// progress.
func (s *schedule) next(sent time.Time, err error, progress func(Progress)) (time.Duration, bool) {
	c := s.c
	held := heldBy(err)
	var wait time.Duration
	switch {
	case held == nil:
		var retry bool
		if wait, retry = s.afterFailure(err, "acquire attempt failed; retrying"); !retry {
			return 0, false
		}
	case held.Key == c.key:
		s.r.failures = 0
		wait = s.afterHeld(sent, held.Record.Token, held.Wait)
	default: // another key's lease (a semaphore's slot, a shard)
		s.r.failures = 0
		wait = min(c.jitter(c.opts.PollInterval), held.Wait+time.Millisecond)
	}
	if progress != nil {
		now := c.opts.Clock.Now()
		p := Progress{Next: now.Add(wait)}
		if held != nil {
			p.Held, p.Takeover = held, now.Add(max(held.Wait, 0))
		} else {
			p.Err = err
		}
		progress(p)
	}
	return wait, true
}

// afterRead is how long Watch waits after a read, sent at sent, that
// returned st.
func (s *schedule) afterRead(sent time.Time, st *Status) time.Duration {
	s.r.failures = 0
	if r := st.Record; r != nil && r.State == StateHeld && !st.Expired {
		return s.afterHeld(sent, r.Token, st.ExpiresIn)
	}
	s.phase.reset()
	return s.c.jitter(s.c.opts.PollInterval)
}

// afterHeld is how long the loop waits after a read, sent at sent, that
// found c's lease held with token, for expiresIn more: on the holder's
// renewal phase as phaseTracker has learned it, and never past the first
// instant the record could expire for c, under either rule (see
// pollRule.wait).
func (s *schedule) afterHeld(sent time.Time, token uint64, expiresIn time.Duration) time.Duration {
	c := s.c
	plain := min(c.jitter(c.opts.PollInterval), expiresIn+time.Millisecond)
	c.mu.Lock()
	o := c.view
	c.mu.Unlock()
	return c.poll.wait(&s.phase, &s.store, o, token, sent, c.opts.Clock.Now(), plain)
}

// afterFailure is how long the loop waits after an attempt or read that
// failed with err, other than finding the lease held, and whether it
// tries again at all (see retry.next). It logs the first failure of a
// streak as msg.
func (s *schedule) afterFailure(err error, msg string) (time.Duration, bool) {
	c := s.c
	s.phase.reset()
	wait, retry := s.r.next(err, c.jitter(c.opts.PollInterval))
	if retry && s.r.first() {
		c.log.Warn(msg, slog.Any("err", err))
	}
	return wait, retry
}

// giveUp is the error a waiting loop returns after the attempt that
// failed with err, when it tries no more.
func (c *Client) giveUp(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return c.waitEnded(ctx, err)
	}
	return err
}

// waitEnded is the error of a wait whose ctx ended, after the attempt that
// failed with err (nil if none was made).
func (c *Client) waitEnded(ctx context.Context, err error) error {
	if err == nil {
		return fmt.Errorf("lease %q: %w", c.key, context.Cause(ctx))
	}
	if IsPermanent(err) {
		return err
	}
	return fmt.Errorf("lease %q: %w (last attempt: %w)", c.key, context.Cause(ctx), err)
}

// newWaitHeap returns a min-heap of waiters by their next attempt.
func newWaitHeap() indexheap.Heap[*waiter] {
	return indexheap.New(
		func(a, b *waiter) bool { return a.at.Before(b.at) },
		func(w *waiter, i int) { w.idx = i })
}
