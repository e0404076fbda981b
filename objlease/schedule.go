package objlease

import (
	"container/heap"
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/objlease/objlease/internal/indexheap"
	"github.com/objlease/objlease/objlease/clock"
)

// maxJobsInFlight bounds the renewals and attempts a scheduler runs at
// once. A renewal hung in a request holds one slot until its lease's
// validity ends (which cancels it), an attempt until its waiter's context
// ends, so a few stuck requests cannot hold up the others.
const maxJobsInFlight = 64

// maxAttemptsInFlight bounds the attempts among them: renewals, which keep
// leases alive, always have the rest.
const maxAttemptsInFlight = maxJobsInFlight / 2

// A scheduler renews and watches every lease held through one session,
// and makes the attempts of every AcquireFunc waiting there, so
// that a process holding or awaiting thousands of leases runs three
// goroutines for all of them rather than some per lease: a watcher, which
// does no I/O and so ends every lease on time whatever the store does, a
// dispatcher, which hands each due renewal to a worker, and a waker, which
// does the same for due attempts; at most maxJobsInFlight workers run
// at once. Their logs and metrics go through the session's reporter, so
// that no sink delays them. It starts with its first lease or waiter and
// stops with its last, so that it runs wherever they were made (a test's
// synctest bubble included). The watcher and the dispatcher start with
// the first lease, the waker with the first waiter: a session that only
// holds, as the one New makes for a single lease does, runs two.
type scheduler struct {
	sess *Session
	clk  clock.Clock

	mu       sync.Mutex
	users    int                     // leases and waiters
	renewals leaseHeap               // by renewAt; a lease being renewed is in neither heap position
	expiries leaseHeap               // by expireAt
	attempts indexheap.Heap[*waiter] // by the waiters' next attempt
	// Deadlines the goroutines sleep until (zero: none), so that a push
	// wakes them only when it moves their deadline earlier.
	renewArmed, expiryArmed, attemptArmed time.Time

	wakeRenew   chan struct{}
	wakeExpiry  chan struct{}
	wakeAttempt chan struct{}
	quit        chan struct{}
	// jobs hands due renewals and attempts to idle workers; workers counts
	// them (at most maxJobsInFlight), and they live as long as the
	// scheduler so that a job does not pay for a new goroutine and its
	// stack.
	jobs    chan job
	workers int
	// holding and waiting record that the goroutines for leases (the
	// dispatcher and the watcher) and for waiters (the waker) run.
	holding, waiting bool

	// inFlight counts jobs popped and not yet requeued or dropped; asleep
	// counts the goroutines waiting in sleep. Both are only read by tests.
	inFlight, asleep int
	// attemptsRunning counts attempts in flight, at most
	// maxAttemptsInFlight, so that waiters on a hung store leave workers
	// for the renewals.
	attemptsRunning int
}

// A job is a renewal or an attempt, run by a worker.
type job interface{ run(s *scheduler) }

// expiryBatch is how far ahead the watcher, once awake past the last
// batch, also requeues the leases renewed since they were queued, so that
// it wakes about once per expiryBatch rather than once per lease. Only
// leases whose validity has really ended are ended, whenever it wakes.
const expiryBatch = time.Second

// join returns the scheduler of c's session, starting one if it has none,
// with one more user and s.mu held; track(s) runs under the session's
// lock. It refuses once the session is closed.
func join(c *Client, track func(s *scheduler)) (*scheduler, error) {
	sess := c.sess
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if sess.closed {
		return nil, errSessionClosed(c.key)
	}
	s := sess.sched
	if s == nil {
		s = &scheduler{
			sess: sess, clk: sess.clk, expiries: leaseHeap{expiry: true}, attempts: newWaitHeap(),
			wakeRenew: make(chan struct{}, 1), wakeExpiry: make(chan struct{}, 1),
			wakeAttempt: make(chan struct{}, 1), quit: make(chan struct{}), jobs: make(chan job),
		}
		sess.sched = s
	}
	track(s)
	s.mu.Lock()
	s.users++
	return s, nil
}

// leave takes one user off s, stopping it after its last (s.sess.mu and
// s.mu held).
func (s *scheduler) leave() {
	s.users--
	if s.users == 0 {
		if s.sess.sched == s {
			s.sess.sched = nil
		}
		close(s.quit)
	}
}

// register adds l to the scheduler of its client's session. It refuses
// once the session is closed.
func register(l *Lease, renewAt time.Time) error {
	s, err := join(l.c, func(s *scheduler) {
		l.sched = s
		l.c.sess.leases[l] = struct{}{}
	})
	if err != nil {
		return err
	}
	l.registered = true
	l.renewAt, l.expireAt = renewAt, l.validUntil
	l.renewIdx, l.expireIdx = -1, -1
	if !s.holding {
		s.holding = true
		go s.dispatch(&s.renewals, &s.renewArmed, s.wakeRenew, s.dueRenewals)
		go s.watch()
	}
	s.pushRenewal(l)
	s.pushExpiry(l)
	s.mu.Unlock()
	return nil
}

// remove takes l off its scheduler for good, stopping the scheduler if l
// was its last lease. A renewal of l in flight is left to finish (its
// caller cancels it) and is not rescheduled.
func (s *scheduler) remove(l *Lease) {
	s.sess.mu.Lock()
	defer s.sess.mu.Unlock()
	delete(s.sess.leases, l)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !l.registered {
		return
	}
	l.registered = false
	if l.renewIdx >= 0 {
		heap.Remove(&s.renewals, l.renewIdx)
	}
	if l.expireIdx >= 0 {
		heap.Remove(&s.expiries, l.expireIdx)
	}
	s.leave()
}

// stopRenewals takes l off the renewal queue for good; its validity is
// still watched until it ends.
func (s *scheduler) stopRenewals(l *Lease) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l.renewIdx >= 0 {
		heap.Remove(&s.renewals, l.renewIdx)
	}
}

// pushRenewal and pushExpiry (s.mu held) queue l and wake the goroutine
// concerned if l is now due before what it sleeps until.
func (s *scheduler) pushRenewal(l *Lease) {
	heap.Push(&s.renewals, l)
	if s.renewArmed.IsZero() || l.renewAt.Before(s.renewArmed) {
		notify(s.wakeRenew)
	}
}

func (s *scheduler) pushExpiry(l *Lease) {
	heap.Push(&s.expiries, l)
	if s.expiryArmed.IsZero() || l.expireAt.Before(s.expiryArmed) {
		notify(s.wakeExpiry)
	}
}

func notify(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// deadlines says what a goroutine sleeps until: the first deadline of a
// heap, or none (false), s.mu held.
type deadlines interface {
	next() (time.Time, bool)
}

// sleep waits until the first deadline of h (forever if empty), a
// wake-up, or quit; it reports false on quit. armed records the deadline.
func (s *scheduler) sleep(h deadlines, armed *time.Time, wake chan struct{}) bool {
	s.mu.Lock()
	next, ok := h.next()
	if !ok {
		next = time.Time{}
	}
	*armed = next
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.asleep--
		s.mu.Unlock()
	}()
	if next.IsZero() {
		s.markAsleep()
		select {
		case <-wake:
			return true
		case <-s.quit:
			return false
		}
	}
	t := s.clk.NewTimer(next.Sub(s.clk.Now()))
	defer t.Stop()
	s.markAsleep()
	select {
	case <-t.C():
		return true
	case <-wake:
		return true
	case <-s.quit:
		return false
	}
}

func (s *scheduler) markAsleep() {
	s.mu.Lock()
	s.asleep++
	s.mu.Unlock()
}

// due pops every lease of h due by now, or all of them if now is zero
// (s.mu held).
func (s *scheduler) due(h *leaseHeap, now time.Time) []*Lease {
	var out []*Lease
	for len(h.l) > 0 && (now.IsZero() || !h.at(0).After(now)) {
		out = append(out, heap.Pop(h).(*Lease))
	}
	return out
}

// dueRenewals pops every lease whose renewal is due by now, and those due
// within a thousandth of their renewal interval that the store's minimum write
// interval already allows, so that renewals close together share one
// wake-up (s.mu held).
func (s *scheduler) dueRenewals(now time.Time) []job {
	var out []job
	for len(s.renewals.l) > 0 {
		l := s.renewals.l[0].l
		if l.renewAt.After(now) {
			l.mu.Lock()
			early := !l.renewAt.After(now.Add(l.c.opts.RenewInterval/1000)) &&
				!l.lastAttempt.Add(l.c.store.Properties().MinWriteInterval).After(now)
			l.mu.Unlock()
			if !early {
				break
			}
		}
		out = append(out, heap.Pop(&s.renewals).(*Lease))
	}
	return out
}

// watch ends every lease whose safe validity has run out. A lease renewed
// since it was queued is queued again at its new validity end, so that a
// renewal need not touch this heap.
//
// On a clock that reads the wall clock it also wakes at least every
// clock.Recheck, and when the wall clock has jumped ahead of the holder's
// clock since it last woke it checks every lease, since a forward step ends
// leases early (see Lease.remaining).
func (s *scheduler) watch() {
	var h deadlines = &s.expiries
	lastNow, lastWall, hasWall := s.clk.Now(), time.Time{}, false
	if lastWall, hasWall = clock.Wall(s.clk); hasWall {
		h = recheckDeadlines{&s.expiries, s.clk}
	}
	// horizon is how far the last batch looked ahead: every lease queued
	// up to it was then requeued at its own validity end, so a wake before
	// it pops only what is due. Popping the same leases again at every
	// wake would cost each wake a pop and a push for every lease whose
	// validity ends within expiryBatch: thousands at once when the store
	// is cut off from many leases, and ending their contexts late.
	var horizon time.Time
	for s.sleep(h, &s.expiryArmed, s.wakeExpiry) {
		now := s.clk.Now()
		upTo := now
		if !now.Before(horizon) {
			upTo = now.Add(expiryBatch)
			horizon = upTo
		}
		if hasWall {
			wall, _ := clock.Wall(s.clk)
			moved := now.Sub(lastNow)
			if wall.Sub(lastWall) > moved+moved/100+10*time.Millisecond {
				upTo = time.Time{} // a forward step: every lease
			}
			lastNow, lastWall = now, wall
		}
		s.mu.Lock()
		due := s.due(&s.expiries, upTo)
		s.mu.Unlock()
		// Every context due ends first; only then is anything taken off
		// the queues, logged or counted.
		var stopped []*Lease
		var causes []error
		for _, l := range due {
			l.mu.Lock()
			left, ended := l.remaining(s.clk.Now()), l.ended != nil
			l.mu.Unlock()
			if ended {
				continue
			}
			if left <= 0 {
				cause := errValidityEnded(l.c.key)
				if l.stop(cause) {
					stopped, causes = append(stopped, l), append(causes, cause)
				}
				continue
			}
			s.mu.Lock()
			if l.registered {
				l.expireAt = s.clk.Now().Add(left)
				s.pushExpiry(l)
			}
			s.mu.Unlock()
		}
		for i, l := range stopped {
			l.finish(causes[i])
		}
	}
}

// recheckDeadlines is a heap's deadlines, none later than clock.Recheck
// from now.
type recheckDeadlines struct {
	h   *leaseHeap
	clk clock.Clock
}

func (r recheckDeadlines) next() (time.Time, bool) {
	t, ok := r.h.next()
	if limit := r.clk.Now().Add(clock.Recheck); ok && limit.Before(t) {
		t = limit
	}
	return t, ok
}

// dispatch hands every job of h that due (s.mu held) pops by now to a
// worker, starting one if all are busy and there are fewer than
// maxJobsInFlight. The dispatcher of renewals and the waker of
// attempts run it on their own heaps.
func (s *scheduler) dispatch(h deadlines, armed *time.Time, wake chan struct{}, due func(now time.Time) []job) {
	for s.sleep(h, armed, wake) {
		s.mu.Lock()
		jobs := due(s.clk.Now())
		s.inFlight += len(jobs)
		s.mu.Unlock()
		for _, j := range jobs {
			select {
			case s.jobs <- j: // an idle worker took it
				continue
			default:
			}
			s.mu.Lock()
			spawn := s.workers < maxJobsInFlight
			if spawn {
				s.workers++
			}
			s.mu.Unlock()
			if spawn {
				go s.work(j)
				continue
			}
			select {
			case s.jobs <- j:
			case <-s.quit:
				return
			}
		}
	}
}

// work runs j, then whatever the dispatchers hand it, until the scheduler
// stops.
func (s *scheduler) work(j job) {
	for {
		j.run(s)
		s.mu.Lock()
		s.inFlight--
		if _, ok := j.(*waiter); ok {
			s.attemptsRunning--
			if s.attemptsRunning == maxAttemptsInFlight-1 {
				notify(s.wakeAttempt) // a slot is free again
			}
		}
		s.mu.Unlock()
		select {
		case j = <-s.jobs:
		case <-s.quit:
			return
		}
	}
}

func (l *Lease) run(s *scheduler) { s.renew(l) }

// renew runs one background renewal of l and queues the next.
func (s *scheduler) renew(l *Lease) {
	ctx, cancel := context.WithCancel(l.ctx)
	l.mu.Lock()
	stopped := l.stopping || l.ended != nil
	l.cancelRenewal = cancel
	l.mu.Unlock()
	var err error
	if !stopped {
		if t := l.notBefore(s.clk.Now()); t.After(s.clk.Now()) {
			// A Renew of the caller's wrote the record since this renewal
			// was queued: keep the store's interval from that write.
			l.mu.Lock()
			l.cancelRenewal = nil
			l.mu.Unlock()
			cancel()
			s.requeue(l, t)
			return
		}
		err = l.renew(ctx)
	}
	l.mu.Lock()
	l.cancelRenewal = nil
	l.mu.Unlock()
	cancel()
	if stopped {
		return
	}
	var next time.Time
	switch {
	case err == nil:
		next = l.nextRenewal()
		if failed := l.renewFailures.recovered(s.clk.Now()); failed > 0 {
			l.warn("renewal succeeded again", slog.Duration("failing_for", failed))
		}
	case errors.Is(err, ErrLeaseLost):
		l.end(err)
		return
	default:
		// Transient: retry well before validity ends, but no faster than
		// the store accepts writes to one object.
		wait := max(l.c.opts.RenewInterval/4, l.c.store.Properties().MinWriteInterval)
		next = l.notBefore(s.clk.Now().Add(wait))
		switch first, failing, say := l.renewFailures.failed(s.clk.Now(), max(l.c.opts.RenewInterval, renewWarnEvery)); {
		case first:
			l.warn("renewal failed; retrying", slog.Any("err", err), slog.Duration("retry_in", wait))
		case say:
			l.mu.Lock()
			left := max(l.remaining(s.clk.Now()), 0)
			l.mu.Unlock()
			l.warn("renewal still failing; retrying", slog.Any("err", err), slog.Duration("failing_for", failing),
				slog.Duration("valid_for", left))
		}
	}
	s.requeue(l, next)
}

// warn logs a warning about l's background renewal; see notice.
func (l *Lease) warn(msg string, attrs ...any) { l.notice(slog.LevelWarn, msg, attrs...) }

// notice logs a line about l's renewal off the goroutine that renews (see
// reporter), unless l has ended or is being released: a renewal still in
// flight when the lease was lost or released answers after the end, and a
// lease whose loss or release has been told says nothing more about
// renewing it. The check and the post are made under l.mu, which stop
// takes to record the end before finish posts "lease lost", so no line
// posted here can follow that one.
func (l *Lease) notice(level slog.Level, msg string, attrs ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended != nil || l.stopping {
		return
	}
	log := l.c.log
	l.c.sess.report.post(func() { log.Log(context.Background(), level, msg, attrs...) })
}

// renewWarnEvery is the least time between two warnings that a lease's
// background renewals are still failing (at most one per renewal interval,
// if that is longer); the first failure and the recovery are always told.
const renewWarnEvery = 10 * time.Second

// failureStreak rate-limits the warnings of a streak of failed background
// renewals: they are retried every RenewInterval/4, and a line for each
// would bury the one that matters. Only the lease's renewal job uses it.
type failureStreak struct {
	since, warned time.Time // zero while renewals succeed
}

// failed records a failure at now. It reports whether it starts a streak,
// how long the streak has lasted, and whether to say it is still failing
// (every seconds of it).
func (f *failureStreak) failed(now time.Time, every time.Duration) (first bool, failing time.Duration, say bool) {
	if f.since.IsZero() {
		f.since, f.warned = now, now
		return true, 0, false
	}
	if now.Sub(f.warned) >= every {
		f.warned = now
		return false, now.Sub(f.since), true
	}
	return false, now.Sub(f.since), false
}

// recovered records a success at now and returns how long the streak it
// ends lasted (0 if there was none).
func (f *failureStreak) recovered(now time.Time) time.Duration {
	if f.since.IsZero() {
		return 0
	}
	d := now.Sub(f.since)
	*f = failureStreak{}
	return max(d, time.Nanosecond)
}

// requeue queues l's next background renewal at next, unless it has been
// released or has ended since.
func (s *scheduler) requeue(l *Lease, next time.Time) {
	l.mu.Lock()
	stopped := l.stopping
	l.mu.Unlock()
	s.mu.Lock()
	if l.registered && !stopped && l.renewIdx < 0 {
		l.renewAt = next
		s.pushRenewal(l)
	}
	s.mu.Unlock()
}
