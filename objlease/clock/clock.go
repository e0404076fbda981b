// Package clock is the time source of the lease protocol. The protocol only
// ever measures durations on one machine's clock, so a Clock needs no relation
// to any other machine's; tests use Fake so that expiry never waits for real.
//
// A machine has three clocks, and each fails the protocol differently:
//
//   - Go's monotonic reading (the one time.Now carries) never steps, but on
//     Linux it is CLOCK_MONOTONIC, which stops while the machine is
//     suspended: a holder that measured its lease on it would wake from a
//     suspend believing no time had passed.
//   - A clock that counts suspend (Linux CLOCK_BOOTTIME) does not have that
//     fault.
//   - The wall clock counts everything but can be stepped by NTP or an
//     operator, forward or back.
//
// Real measures on the first two, whichever has advanced more, so that its
// readings never step and count the time a machine was suspended. A holder
// also checks the wall clock (see Wall): a forward step only ends its lease
// early; a backward one never extends it. A contender never uses the wall
// clock, since a forward step would make it take over early.
package clock

import (
	"sort"
	"sync"
	"time"
)

// Clock tells the time and makes timers. Only differences and order of its
// readings matter; they need not relate to any other machine's.
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) Timer
}

// Timer is the subset of *time.Timer the protocol uses.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it did.
	Stop() bool
}

// Waller is implemented by clocks that can also read the machine's wall
// clock, which a holder uses only to end a lease early when the wall clock
// jumps forward.
type Waller interface {
	Wall() time.Time
}

// Wall returns c's wall-clock reading, if c has one.
func Wall(c Clock) (time.Time, bool) {
	if w, ok := c.(Waller); ok {
		return w.Wall(), true
	}
	return time.Time{}, false
}

// Source is what one machine's clocks read, for FromSource.
type Source interface {
	// Mono is Go's monotonic clock: elapsed time since an origin of the
	// source's, not counting time suspended where the platform does not.
	Mono() time.Duration
	// Boot is elapsed time since the same origin counting time suspended,
	// or Mono where the platform has no such clock.
	Boot() time.Duration
	// Wall is the wall clock, which may be stepped.
	Wall() time.Time
	// AfterFunc calls f in its own goroutine once d has passed on the
	// boot clock where the platform can wait on it (Linux), else on the
	// monotonic clock, unless stop (which reports whether it prevented the
	// call) is called first.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// Recheck is the longest a timer of a clock made by FromSource sleeps
// before it compares its deadline with the clock again: a deadline passed
// while the machine was suspended, which a monotonic timer does not see,
// fires within Recheck of the machine waking up. On Linux Real's timers
// also wait on CLOCK_BOOTTIME and fire within 20 ms of the wake.
const Recheck = time.Second

// FromSource returns a Clock whose reading advances with whichever of
// src's monotonic and boot clocks has advanced more since it was made, so
// that it never steps and counts suspend, and that reports src's wall
// clock as its Wall. Its readings start at origin.
func FromSource(src Source, origin time.Time) Clock {
	return &sourceClock{src: src, origin: origin, mono0: src.Mono(), boot0: src.Boot()}
}

type sourceClock struct {
	src          Source
	origin       time.Time
	mono0, boot0 time.Duration

	mu   sync.Mutex
	last time.Duration // elapsed readings never go back
}

func (c *sourceClock) Now() time.Time {
	e := max(c.src.Mono()-c.mono0, c.src.Boot()-c.boot0)
	c.mu.Lock()
	e = max(e, c.last)
	c.last = e
	c.mu.Unlock()
	return c.origin.Add(e)
}

func (c *sourceClock) Wall() time.Time { return c.src.Wall() }

// NewTimer fires once Now has advanced by d, checking at least every
// Recheck.
func (c *sourceClock) NewTimer(d time.Duration) Timer {
	t := &sourceTimer{clk: c, at: c.Now().Add(d), c: make(chan time.Time, 1)}
	t.mu.Lock()
	t.arm()
	t.mu.Unlock()
	return t
}

type sourceTimer struct {
	clk *sourceClock
	at  time.Time
	c   chan time.Time

	mu      sync.Mutex
	disarm  func() bool // stops the pending arm
	fired   bool
	stopped bool
}

// arm fires t if its deadline has passed, else sleeps on the source until
// the deadline or Recheck, whichever comes first (t.mu held).
func (t *sourceTimer) arm() {
	now := t.clk.Now()
	left := t.at.Sub(now)
	if left <= 0 {
		t.fired = true
		t.c <- now
		return
	}
	t.disarm = t.clk.src.AfterFunc(min(left, Recheck), func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if !t.stopped && !t.fired {
			t.arm()
		}
	})
}

func (t *sourceTimer) C() <-chan time.Time { return t.c }

func (t *sourceTimer) Stop() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped || t.fired {
		return false
	}
	t.stopped = true
	t.disarm()
	return true
}

// Real returns the machine's clock (see the package doc): it counts time
// suspended where the platform can tell (Linux CLOCK_BOOTTIME, macOS
// CLOCK_MONOTONIC; on Windows Go's own monotonic reading already does) and
// never steps; its Wall is time.Now's wall reading.
func Real() Clock { return realClock }

var realClock = FromSource(osSource{}, time.Now())

// osSource reads this machine's clocks.
type osSource struct{}

var processStart = time.Now()

func (osSource) Mono() time.Duration                             { return time.Since(processStart) }
func (osSource) Boot() time.Duration                             { return bootTime() }
func (osSource) Wall() time.Time                                 { return time.Now().Round(0) }
func (osSource) AfterFunc(d time.Duration, f func()) func() bool { return afterFunc(d, f) }

// Fake is a manually advanced clock. Timers fire, in deadline order, when
// Advance moves the time past their deadline. It is safe for concurrent use.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

// NewFake returns a Fake set to start.
func NewFake(start time.Time) *Fake {
	return &Fake{now: start}
}

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// NewTimer returns a timer that fires once the fake time reaches now+d.
func (f *Fake) NewTimer(d time.Duration) Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &fakeTimer{f: f, when: f.now.Add(d), c: make(chan time.Time, 1)}
	if d <= 0 {
		t.c <- f.now
	} else {
		f.timers = append(f.timers, t)
	}
	return t
}

// Advance moves the time forward by d, firing every timer whose deadline is
// reached, in order, with the time set to each deadline as it fires.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	end := f.now.Add(d)
	for {
		sort.SliceStable(f.timers, func(i, j int) bool { return f.timers[i].when.Before(f.timers[j].when) })
		if len(f.timers) == 0 || f.timers[0].when.After(end) {
			break
		}
		t := f.timers[0]
		f.timers = f.timers[1:]
		f.now = t.when
		t.c <- t.when
	}
	f.now = end
}

// Timers returns how many timers are pending.
func (f *Fake) Timers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// NextDeadline returns the earliest pending timer's deadline and whether
// there is one.
func (f *Fake) NextDeadline() (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var next time.Time
	for _, t := range f.timers {
		if next.IsZero() || t.when.Before(next) {
			next = t.when
		}
	}
	return next, !next.IsZero()
}

type fakeTimer struct {
	f    *Fake
	when time.Time
	c    chan time.Time
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	for i, x := range t.f.timers {
		if x == t {
			t.f.timers = append(t.f.timers[:i], t.f.timers[i+1:]...)
			return true
		}
	}
	return false
}
