package clock_test

import (
	"sync"
	"testing"
	"time"

	"github.com/objlease/objlease/objlease/clock"
)

// machine is a scripted clock.Source: a test moves its three clocks by
// hand, and its monotonic timers fire as Run moves the monotonic clock.
type machine struct {
	mu         sync.Mutex
	mono, boot time.Duration
	wall       time.Time
	timers     []*machineTimer
}

type machineTimer struct {
	at      time.Duration
	f       func()
	stopped bool
}

func (m *machine) Mono() time.Duration { m.mu.Lock(); defer m.mu.Unlock(); return m.mono }
func (m *machine) Boot() time.Duration { m.mu.Lock(); defer m.mu.Unlock(); return m.boot }
func (m *machine) Wall() time.Time     { m.mu.Lock(); defer m.mu.Unlock(); return m.wall }

func (m *machine) AfterFunc(d time.Duration, f func()) func() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := &machineTimer{at: m.mono + d, f: f}
	m.timers = append(m.timers, t)
	return func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		was := !t.stopped
		t.stopped = true
		return was
	}
}

// run advances every clock by d (suspend: the monotonic one not at all),
// calling due monotonic timers in order, each in turn.
func (m *machine) run(d time.Duration, suspended bool) {
	const step = 10 * time.Millisecond
	for moved := time.Duration(0); moved < d; moved += step {
		m.mu.Lock()
		m.boot += step
		m.wall = m.wall.Add(step)
		if !suspended {
			m.mono += step
		}
		var due []*machineTimer
		for _, t := range m.timers {
			if !t.stopped && t.at <= m.mono {
				t.stopped = true
				due = append(due, t)
			}
		}
		m.mu.Unlock()
		for _, t := range due {
			t.f() // synchronously, so that the test sees its effect at once
		}
	}
}

func fired(t clock.Timer) bool {
	select {
	case <-t.C():
		return true
	default:
		return false
	}
}

// A suspend stops the monotonic clock but not the one the protocol reads:
// a deadline that passed while suspended is seen within Recheck of waking.
func TestSourceClockCountsSuspend(t *testing.T) {
	m := &machine{wall: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	origin := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	c := clock.FromSource(m, origin)
	timer := c.NewTimer(6 * time.Second)
	m.run(time.Second, false)
	m.run(28*time.Second, true) // suspended to RAM
	if got := c.Now().Sub(origin); got != 29*time.Second {
		t.Fatalf("after 1 s running and 28 s suspended the clock advanced %v, want 29s", got)
	}
	if fired(timer) {
		t.Fatal("the timer fired while the machine was suspended")
	}
	m.run(clock.Recheck, false)
	if !fired(timer) {
		t.Fatalf("a 6 s timer had not fired %v after waking from a 28 s suspend", clock.Recheck)
	}
}

// A wall-clock step, either way, moves Wall and nothing else.
func TestSourceClockIgnoresWallSteps(t *testing.T) {
	m := &machine{wall: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	origin := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	c := clock.FromSource(m, origin)
	timer := c.NewTimer(3 * time.Second)
	for _, step := range []time.Duration{time.Hour, -2 * time.Hour} {
		m.mu.Lock()
		m.wall = m.wall.Add(step)
		m.mu.Unlock()
		m.run(time.Second, false)
	}
	if got := c.Now().Sub(origin); got != 2*time.Second {
		t.Fatalf("clock advanced %v over 2 s with wall steps of +1h and -2h, want 2s", got)
	}
	if w, ok := clock.Wall(c); !ok || !w.Equal(time.Date(2026, 11, 30, 23, 0, 2, 0, time.UTC)) {
		t.Fatalf("Wall = %v, %v; want the stepped wall clock", w, ok)
	}
	if fired(timer) {
		t.Fatal("a 3 s timer fired after 2 s")
	}
	m.run(time.Second, false)
	if !fired(timer) {
		t.Fatal("a 3 s timer had not fired after 3 s")
	}
	stopped := c.NewTimer(time.Second)
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop must report true once, then false")
	}
	m.run(2*time.Second, false)
	if fired(stopped) {
		t.Fatal("a stopped timer fired")
	}
}

// The real clock's readings carry no wall-clock steps: their wall and
// monotonic readings move together, so that even code that (wrongly)
// compared wall readings would order them as their monotonic readings.
func TestRealReadingsMoveTogether(t *testing.T) {
	c := clock.Real()
	a := c.Now()
	time.Sleep(2 * time.Millisecond)
	b := c.Now()
	mono, wall := b.Sub(a), b.Round(0).Sub(a.Round(0))
	if mono <= 0 || wall != mono {
		t.Fatalf("two readings 2 ms apart: monotonic difference %v, wall difference %v; want equal and positive", mono, wall)
	}
	if _, ok := clock.Wall(c); !ok {
		t.Fatal("the real clock has no Wall")
	}
}
