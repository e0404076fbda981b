package clocktest

import (
	"sync"
	"time"

	"github.com/objlease/objlease/objlease/clock"
)

// Machine is a machine's three clocks (see package clock) driven by the
// test's time (time.Now: in a synctest bubble, the bubble's): its monotonic
// clock stops while the machine is suspended, its boot clock only while it
// is frozen (a paused VM, whose clocks all stop), and its wall clock runs
// with the boot clock and can be stepped. It is a clock.Source, so
// clock.FromSource(m, …) is the clock the library builds on such a
// machine, and GoClock is time.Now on it.
type Machine struct {
	mu    sync.Mutex
	start time.Time // test time at which Mono and Boot read zero and Wall wall0
	wall0 time.Time
	step  time.Duration // wall-clock steps so far
	stops []stop
}

// stop is a stretch of test time during which the machine's clocks stood.
type stop struct {
	from, to time.Time
	frozen   bool // the boot and wall clocks too, not only the monotonic one
}

// NewMachine returns a machine whose wall clock reads wall now.
func NewMachine(wall time.Time) *Machine {
	return &Machine{start: time.Now(), wall0: wall}
}

// Step moves the wall clock by d, as NTP or `date -s` does.
func (m *Machine) Step(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.step += d
}

// Suspend suspends the machine to RAM for d from now: its monotonic clock
// stops meanwhile. Freeze pauses it as a hypervisor pauses a VM: every
// clock stops. Neither stops the test's goroutines: a test that wants them
// stopped too sees to that itself.
func (m *Machine) Suspend(d time.Duration) { m.halt(d, false) }

// Freeze: see Suspend.
func (m *Machine) Freeze(d time.Duration) { m.halt(d, true) }

func (m *Machine) halt(d time.Duration, frozen bool) {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stops = append(m.stops, stop{now, now.Add(d), frozen})
}

// elapsed is the test time since start less the stops that stopped this
// clock (all of them for the monotonic clock, frozen ones for the others).
func (m *Machine) elapsed(mono bool) time.Duration {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	e := now.Sub(m.start)
	for _, s := range m.stops {
		if (mono || s.frozen) && now.After(s.from) {
			to := s.to
			if now.Before(to) {
				to = now
			}
			e -= to.Sub(s.from)
		}
	}
	return e
}

// Boot implements clock.Source.
func (m *Machine) Boot() time.Duration { return m.elapsed(false) }

// Mono implements clock.Source.
func (m *Machine) Mono() time.Duration { return m.elapsed(true) }

// Wall implements clock.Source.
func (m *Machine) Wall() time.Time {
	e := m.elapsed(false)
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.wall0.Add(e + m.step)
}

// AfterFunc implements clock.Source: f runs once the monotonic clock has
// advanced by d, so a suspend delays it.
func (m *Machine) AfterFunc(d time.Duration, f func()) func() bool {
	at := m.Mono() + d
	var mu sync.Mutex
	var t *time.Timer
	stopped := false
	var arm func()
	arm = func() {
		left := at - m.Mono()
		if left <= 0 {
			f()
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			t = time.AfterFunc(left, arm) // the test's time: at least left, more if suspended meanwhile
		}
	}
	mu.Lock()
	t = time.AfterFunc(max(d, 0), arm)
	mu.Unlock()
	return func() bool {
		mu.Lock()
		defer mu.Unlock()
		was := !stopped && t.Stop()
		stopped = true
		return was
	}
}

// GoClock returns the clock time.Now would be on this machine: readings
// with the wall clock (stepped) as their wall reading and the monotonic
// clock (stopped while suspended) as their monotonic reading, and timers
// on the monotonic clock. It is what a clock built on time.Now gives; the
// library must order and compare its readings by their monotonic reading.
func (m *Machine) GoClock() clock.Clock { return goClock{m} }

type goClock struct{ m *Machine }

func (c goClock) Now() time.Time { return GoTime(c.m.Wall(), c.m.Mono()) }

func (c goClock) NewTimer(d time.Duration) clock.Timer {
	t := &goTimer{c: make(chan time.Time, 1)}
	t.stop = c.m.AfterFunc(d, func() { t.c <- c.Now() })
	return t
}

type goTimer struct {
	c    chan time.Time
	stop func() bool
}

func (t *goTimer) C() <-chan time.Time { return t.c }
func (t *goTimer) Stop() bool          { return t.stop() }
