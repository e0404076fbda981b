package objlease

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
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
	w := &waiter{c: c, ctx: ctx, f: f, idx: -1}
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
	r     Retry
	phase phaseTracker
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
	wait, retry := w.c.nextAttempt(&w.r, &w.phase, sent, err)
	if !retry || w.ctx.Err() != nil {
		w.finish(nil, w.c.giveUp(w.ctx, err))
		return
	}
	if w.r.First() {
		w.c.log.Warn("acquire attempt failed; retrying", slog.Any("err", err))
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
	heap.Push(&s.attempts, w)
	if s.attemptArmed.IsZero() || w.at.Before(s.attemptArmed) {
		notify(s.wakeAttempt)
	}
}

// dueAttempts pops the waiters due by now, as many as may run (s.mu held).
func (s *scheduler) dueAttempts(now time.Time) []job {
	var out []job
	for s.attempts.Len() > 0 && !s.attempts[0].at.After(now) && s.attemptsRunning < maxAttemptsInFlight {
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
	return d.s.attempts[0].at, true
}

// nextAttempt is how long a waiting loop waits after the failed attempt
// err, sent at sent, and whether it tries again at all: Retry's answer,
// except that a held lease is read again, under the store-clock rule, only
// when the store's clock allows a takeover, and otherwise just after the
// holder's renewals as phase has learned them.
func (c *Client) nextAttempt(r *Retry, phase *phaseTracker, sent time.Time, err error) (time.Duration, bool) {
	wait, retry := r.Next(err, c.jitter(c.opts.PollInterval))
	var held *HeldError
	switch {
	case !errors.As(err, &held):
		phase.reset()
	case c.byStoreClock():
		// One read then, a millisecond past it so that the record is found
		// expired rather than a hair short of it.
		wait = held.Wait + time.Millisecond
	default:
		wait = c.pollWait(phase, sent, held, wait)
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

// waitHeap is a min-heap of waiters by their next attempt.
type waitHeap []*waiter

func (h waitHeap) Len() int           { return len(h) }
func (h waitHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h waitHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *waitHeap) Push(x any) {
	w := x.(*waiter)
	w.idx = len(*h)
	*h = append(*h, w)
}
func (h *waitHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	w.idx = -1
	return w
}
