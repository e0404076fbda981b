package objlease_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/objlease/clock/clocktest"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/mem"
)

// validPoll is how often holdThenPartition looks at ValidFor.
const validPoll = 10 * time.Millisecond

// holdThenPartition has one process hold a 1 s and a 30 s lease on one
// store and clock, lets disturb act on its machine, cuts the process off
// from the store, and has a contender on another machine wait for the 1 s
// lease. It reports when the contender took the 1 s lease over, and when
// the holder's ValidFor reached zero and its context ended.
func holdThenPartition(t *testing.T, holderClock func(*clocktest.Machine) clock.Clock, disturb func(*clocktest.Machine)) (took, invalid, done time.Time) {
	t.Helper()
	ctx := context.Background()
	store := mem.New()
	cut := newHookStore(store)
	m := clocktest.NewMachine(time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC))
	clk := holderClock(m)
	open := func(s providers.Store, key, holder string, ttl time.Duration, c clock.Clock) *objlease.Client {
		cl, err := newOn(s, key, objlease.SessionOptions{Clock: c}, objlease.Options{TTL: ttl, Holder: holder})
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	short, err := open(cut, "short", "holder", time.Second, clk).TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	long, err := open(cut, "long", "holder", 30*time.Second, clk).TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer long.Release(ctx)
	time.Sleep(500 * time.Millisecond)
	disturb(m)
	cut.setHooks(func(op, key string) error { return providers.ErrUnreachable }, nil)

	contender := open(store, "short", "contender", time.Second, clocktest.NewMachine(time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC)).GoClock())
	won, err := contender.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	took = time.Now()
	defer won.Release(ctx)
	for short.ValidFor() > 0 {
		time.Sleep(validPoll)
	}
	invalid = time.Now()
	<-short.Done()
	return took, invalid, time.Now()
}

// A wall-clock step, either way, on a holder's machine: its lease ends
// before a contender can take it over, on a clock whose readings carry a
// stepped wall reading as time.Now's do (they once sat in the scheduler's
// queue by wall reading, and a 1 s lease stayed live for 6–8 s past its
// takeover) and on the real clock's construction.
func TestWallClockStepLetsNoSecondHolderIn(t *testing.T) {
	clocks := map[string]func(*clocktest.Machine) clock.Clock{
		"time.Now":   (*clocktest.Machine).GoClock,
		"FromSource": func(m *clocktest.Machine) clock.Clock { return clock.FromSource(m, time.Now()) },
	}
	for name, holderClock := range clocks {
		for _, step := range []time.Duration{time.Hour, -time.Hour} {
			t.Run(name+"/"+step.String(), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					took, invalid, done := holdThenPartition(t, holderClock, func(m *clocktest.Machine) { m.Step(step) })
					if ctxLate, validLate := done.Sub(took), invalid.Sub(took); ctxLate > 0 || validLate > 0 {
						t.Errorf("after a %v step the holder's context ended %v, and ValidFor reached zero %v, after the contender took over", step, ctxLate, validLate)
					}
				})
			})
		}
	}
}

// A holder's machine stops for 28 s while a contender takes its 1 s lease
// over. On the clock the library builds (clock.FromSource, as clock.Real),
// ValidFor is zero as soon as the machine runs again and the context ends
// within clock.Recheck:
//   - suspended to RAM (the monotonic clock stops; the boot and wall clocks
//     go on): the boot clock tells, and the wall clock;
//   - the same while NTP steps the wall clock back: only the boot clock;
//   - a frozen VM (every clock stops) whose wall clock NTP steps forward on
//     waking: only the wall clock. (Without that step nothing on the
//     machine can tell; the store refuses its next renewal.)
func TestStoppedHolderWakesUpKnowing(t *testing.T) {
	const d = 28 * time.Second
	stops := map[string]func(*clocktest.Machine){
		"suspend":             func(m *clocktest.Machine) { m.Suspend(d) },
		"suspend, wall back":  func(m *clocktest.Machine) { m.Suspend(d); m.Step(-d) },
		"frozen VM, NTP step": func(m *clocktest.Machine) { m.Freeze(d); time.AfterFunc(d, func() { m.Step(d) }) },
	}
	for name, stop := range stops {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var wake time.Time
				took, invalid, done := holdThenPartition(t,
					func(m *clocktest.Machine) clock.Clock { return clock.FromSource(m, time.Now()) },
					func(m *clocktest.Machine) { stop(m); wake = time.Now().Add(d) })
				by := wake // the holder runs no code before it wakes
				if took.After(by) {
					by = took
				}
				if invalid.After(by.Add(validPoll)) || done.Sub(wake) > clock.Recheck {
					t.Errorf("stopped until %v, taken over at %v: ValidFor reached zero at %v, the context ended at %v; want by then (give or take %v), and within %v of waking",
						wake.Format(time.TimeOnly), took.Format(time.TimeOnly), invalid.Format(time.TimeOnly), done.Format(time.TimeOnly), validPoll, clock.Recheck)
				}
			})
		})
	}
}
