package sim

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/objlease/clock/clocktest"
)

// driftClock is one process's machine. Its boot clock's rate against
// simulated real time (the bubble's clock) changes from segment to segment
// but always stays in [1 − b, 1 + b]; its reading starts far from every
// other clock's, since the protocol must not care. Segments are drawn
// lazily from the clock's own generator, in order, so the clock depends
// only on its seed.
//
// Its kind (see machineKind) says what the library is given: the boot
// clock itself (plain), the readings Go's time.Now gives on this machine
// (goNow: a wall reading that steps by up to an hour, a monotonic reading
// that does not), or the clock the library builds from the machine's
// three clocks (fromSource: the same steps, and suspends, during which the
// monotonic clock stops).
type driftClock struct {
	mu     sync.Mutex
	rnd    *rand.Rand
	bound  float64
	origin time.Time // real time at which the clock reads base
	base   time.Time
	segs   []segment

	kind     machineKind
	machRnd  *rand.Rand  // suspends; steps are drawn up front
	steps    []wallStep  // the wall clock's offset from base + boot reading, from a real offset on
	suspends []realSpan  // real offsets during which the monotonic clock stood
	lib      clock.Clock // what the library is given
}

// machineKind: see driftClock.
type machineKind int

const (
	plain machineKind = iota
	goNow
	fromSource
)

func (k machineKind) String() string { return [...]string{"plain", "time.Now", "FromSource"}[k] }

// realSpan is [from, to) in real offsets since the clock's origin.
type realSpan struct{ from, to time.Duration }

// maxWallStep bounds the machine's wall-clock steps: an hour, either way,
// as `date -s` or NTP after a long outage makes.
const maxWallStep = time.Hour

// segment: from real offset real (since origin), the clock reads
// base + local and runs at rate.
type segment struct {
	real, local time.Duration
	rate        float64
}

func newDriftClock(rnd *rand.Rand, bound float64, origin time.Time, kind machineKind, seed uint64) *driftClock {
	c := &driftClock{rnd: rnd, bound: bound, origin: origin,
		base: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rnd.Int64N(int64(10000 * time.Hour)))),
		kind: kind, machRnd: rand.New(rand.NewPCG(seed, 0x5eed))}
	c.segs = []segment{{rate: c.drawRate()}}
	c.steps = []wallStep{{0, 0}}
	if kind != plain {
		for at := time.Duration(0); at < time.Hour; {
			at += 5*time.Second + time.Duration(c.machRnd.Int64N(int64(time.Minute)))
			c.steps = append(c.steps, wallStep{at, time.Duration(c.machRnd.Int64N(int64(2*maxWallStep))) - maxWallStep})
		}
	}
	switch kind {
	case plain:
		c.lib = c
	case goNow:
		c.lib = goNowClock{c}
	case fromSource:
		c.lib = clock.FromSource(c, c.base)
	}
	return c
}

// drawRate picks the extremes two times in three: they are where a
// protocol without a drift margin breaks.
func (c *driftClock) drawRate() float64 {
	switch c.rnd.IntN(3) {
	case 0:
		return 1 - c.bound
	case 1:
		return 1 + c.bound
	}
	return 1 - c.bound + 2*c.bound*c.rnd.Float64()
}

// extend draws segments until one starts after real offset r; c.mu held.
func (c *driftClock) extend(r time.Duration) {
	for last := c.segs[len(c.segs)-1]; last.real <= r; last = c.segs[len(c.segs)-1] {
		n := time.Second + time.Duration(c.rnd.Int64N(int64(30*time.Second)))
		c.segs = append(c.segs, segment{real: last.real + n, local: last.local + scale(n, last.rate), rate: c.drawRate()})
	}
}

func scale(d time.Duration, rate float64) time.Duration {
	return time.Duration(math.Round(float64(d) * rate))
}

// localAt is the clock's reading, as an offset from base, at real offset r.
func (c *driftClock) localAt(r time.Duration) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.extend(r)
	i := len(c.segs) - 1
	for c.segs[i].real > r {
		i--
	}
	s := c.segs[i]
	return s.local + scale(r-s.real, s.rate)
}

// realAt is the earliest real offset at which the clock reads at least
// base + l.
func (c *driftClock) realAt(l time.Duration) time.Duration {
	c.mu.Lock()
	for c.segs[len(c.segs)-1].local <= l {
		c.extend(c.segs[len(c.segs)-1].real)
	}
	i := len(c.segs) - 1
	for c.segs[i].local > l {
		i--
	}
	s := c.segs[i]
	c.mu.Unlock()
	r := s.real + time.Duration(math.Ceil(float64(l-s.local)/s.rate))
	for c.localAt(r) < l { // float rounding
		r++
	}
	for r > 0 && c.localAt(r-1) >= l {
		r--
	}
	return r
}

// Now implements clock.Clock.
func (c *driftClock) Now() time.Time { return c.base.Add(c.localAt(time.Since(c.origin))) }

// NewTimer implements clock.Clock: it fires once the clock has advanced
// by d, by a timer on simulated real time. It never fires at the instant
// it is made, even for d <= 0, but a nanosecond later: a goroutine that
// selects on it and on another channel made ready at this very instant
// (the renewal loop of a lease whose validity watcher is ending it) then
// always sees the other channel first, instead of one chosen at random.
func (c *driftClock) NewTimer(d time.Duration) clock.Timer {
	now := time.Since(c.origin)
	return driftTimer{time.NewTimer(max(c.realAt(c.localAt(now)+d)-now, 1))}
}

// RealEnd converts a deadline d after this clock's reading at real time
// now into real time.
func (c *driftClock) realEnd(now time.Time, d time.Duration) time.Time {
	r := now.Sub(c.origin)
	return c.origin.Add(c.realAt(c.localAt(r) + d))
}

// Boot implements clock.Source: the drifting clock, which counts suspend.
func (c *driftClock) Boot() time.Duration { return c.localAt(time.Since(c.origin)) }

// Mono implements clock.Source: Boot less the time suspended.
func (c *driftClock) Mono() time.Duration {
	r := time.Since(c.origin)
	return c.localAt(r) - c.suspendedBy(r)
}

// suspendedBy is how much the boot clock advanced while suspended, up to
// real offset r.
func (c *driftClock) suspendedBy(r time.Duration) time.Duration {
	c.mu.Lock()
	spans := slices.Clone(c.suspends)
	c.mu.Unlock()
	var d time.Duration
	for _, s := range spans {
		if s.from < r {
			d += c.localAt(min(r, s.to)) - c.localAt(s.from)
		}
	}
	return d
}

// Wall implements clock.Source: the boot clock plus the step in force.
func (c *driftClock) Wall() time.Time {
	r := time.Since(c.origin)
	return c.base.Add(c.localAt(r) + offsetAt(c.steps, r))
}

// AfterFunc implements clock.Source: f runs once the monotonic clock has
// advanced by d (a suspend meanwhile delays it).
func (c *driftClock) AfterFunc(d time.Duration, f func()) func() bool {
	target := c.Mono() + d
	var mu sync.Mutex
	var t *time.Timer
	stopped := false
	var arm func()
	arm = func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		r := time.Since(c.origin)
		left := target - (c.localAt(r) - c.suspendedBy(r))
		if left <= 0 {
			stopped = true
			go f()
			return
		}
		// While suspended the monotonic clock stands: wait for the
		// suspend to end, then for what is left.
		from := c.resumesAt(r)
		t = time.AfterFunc(max(c.realAt(c.localAt(from)+left)-r, 1), arm)
	}
	arm()
	return func() bool {
		mu.Lock()
		defer mu.Unlock()
		was := !stopped
		stopped = true
		if t != nil {
			t.Stop()
		}
		return was
	}
}

// resumesAt is r, or the end of the suspend r falls in.
func (c *driftClock) resumesAt(r time.Duration) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.suspends {
		if s.from <= r && r < s.to {
			return s.to
		}
	}
	return r
}

// suspend stops the monotonic clock for d of real time from now (the
// process is paused meanwhile by its caller). Only a fromSource machine
// is ever suspended, with chance one half per pause: a clock that cannot
// count suspend (goNow, plain) is unsafe across one by construction.
func (c *driftClock) maybeSuspend(d time.Duration) bool {
	if c.kind != fromSource {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.machRnd.IntN(2) == 0 {
		return false
	}
	r := time.Since(c.origin)
	c.suspends = append(c.suspends, realSpan{r, r + d})
	return true
}

// steppedAhead reports whether the wall clock stepped forward within real
// offsets (from, to]: a holder's lease then ends early, by design.
func (c *driftClock) steppedAhead(from, to time.Duration) bool {
	for i, s := range c.steps[1:] {
		if s.from > from && s.from <= to && s.offset > c.steps[i].offset {
			return true
		}
	}
	return false
}

// goNowClock is time.Now on a driftClock's machine: readings whose wall
// reading steps and whose monotonic reading does not, and monotonic
// timers.
type goNowClock struct{ c *driftClock }

func (g goNowClock) Now() time.Time                       { return clocktest.GoTime(g.c.Wall(), g.c.Mono()) }
func (g goNowClock) NewTimer(d time.Duration) clock.Timer { return g.c.NewTimer(d) }

type driftTimer struct{ t *time.Timer }

func (t driftTimer) C() <-chan time.Time { return t.t.C }
func (t driftTimer) Stop() bool          { return t.t.Stop() }

// The clock keeps its drift bound over any interval, and its timers fire
// once it has advanced by their duration, not before.
func TestDriftClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const b = 0.1
		r := rand.New(rand.NewPCG(1, 2))
		c := newDriftClock(rand.New(rand.NewPCG(3, 4)), b, time.Now(), plain, 0)
		rates := map[bool]int{}
		for range 2000 {
			from := time.Duration(r.Int64N(int64(time.Hour)))
			d := 1 + time.Duration(r.Int64N(int64(time.Minute)))
			got := c.localAt(from+d) - c.localAt(from)
			lo, hi := time.Duration(float64(d)*(1-b))-2, time.Duration(float64(d)*(1+b))+2
			if got < lo || got > hi {
				t.Fatalf("over [%v, %v] the clock advanced %v, outside [%v, %v]", from, from+d, got, lo, hi)
			}
			rates[got < d]++
			if l := c.localAt(from); c.realAt(l) > from || c.localAt(c.realAt(l)) < l {
				t.Fatalf("realAt(localAt(%v)) = %v", from, c.realAt(l))
			}
		}
		if rates[true] == 0 || rates[false] == 0 {
			t.Fatalf("the clock never ran both slow and fast: %v", rates)
		}
		for range 50 {
			time.Sleep(time.Duration(r.Int64N(int64(time.Minute))))
			d := time.Duration(r.Int64N(int64(time.Minute)))
			start := c.Now()
			<-c.NewTimer(d).C()
			if got := c.Now().Sub(start); got < d || got > d+2 {
				t.Fatalf("a %v timer fired after %v of the clock's time", d, got)
			}
		}
	})
}
