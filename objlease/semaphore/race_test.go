package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/objlease/semaphore"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/driver"
	"github.com/objlease/objlease/providers/faulty"
	"github.com/objlease/objlease/providers/mem"
)

// hold is one holder's tenure of a slot, by the shared fake clock: from
// when TryAcquire returned to when the holder stopped relying on the slot
// (before it called Release, or when it saw its slot's context end).
type hold struct {
	who         string
	slot        int
	token       uint64
	enter, exit time.Time // exit zero: still held at the end
}

// checker records tenures and finds violations of the semaphore's
// guarantees: at most n holders at any instant, at most one per slot, and
// each slot's tokens increasing from one holder to the next.
type checker struct {
	n       int
	mu      sync.Mutex
	holds   []*hold
	working int // holders between enter and exit right now, in real time
	maxWork int
	errs    []string
}

func (c *checker) enter(who string, now time.Time, sl *semaphore.Slot) *hold {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := &hold{who: who, slot: sl.Index(), token: sl.Token(), enter: now}
	c.holds = append(c.holds, h)
	c.working++
	c.maxWork = max(c.maxWork, c.working)
	if c.working > c.n {
		c.errs = append(c.errs, fmt.Sprintf("%d holders at once in real time when %s entered slot %d", c.working, who, h.slot))
	}
	return h
}

func (c *checker) exit(h *hold, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h.exit = now
	c.working--
}

// violations checks the recorded tenures as half-open intervals.
func (c *checker) violations() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	errs := append([]string(nil), c.errs...)
	end := func(h *hold) time.Time {
		if h.exit.IsZero() {
			return time.Unix(1<<40, 0)
		}
		return h.exit
	}
	type event struct {
		at    time.Time
		delta int
		h     *hold
	}
	var evs []event
	for _, h := range c.holds {
		if end(h).After(h.enter) {
			evs = append(evs, event{h.enter, +1, h}, event{end(h), -1, h})
		}
	}
	// Exits before enters at the same instant: the intervals are half-open.
	sort.SliceStable(evs, func(i, j int) bool {
		if !evs[i].at.Equal(evs[j].at) {
			return evs[i].at.Before(evs[j].at)
		}
		return evs[i].delta < evs[j].delta
	})
	holding, perSlot := 0, map[int]int{}
	for _, e := range evs {
		holding += e.delta
		perSlot[e.h.slot] += e.delta
		if e.delta > 0 && holding > c.n {
			errs = append(errs, fmt.Sprintf("%d holders at %v when %s entered slot %d", holding, e.at.Sub(epoch), e.h.who, e.h.slot))
		}
		if e.delta > 0 && perSlot[e.h.slot] > 1 {
			errs = append(errs, fmt.Sprintf("slot %d held twice at %v when %s entered with token %d", e.h.slot, e.at.Sub(epoch), e.h.who, e.h.token))
		}
	}
	bySlot := map[int][]*hold{}
	for _, h := range c.holds {
		bySlot[h.slot] = append(bySlot[h.slot], h)
	}
	for slot, hs := range bySlot {
		sort.SliceStable(hs, func(i, j int) bool { return hs[i].enter.Before(hs[j].enter) })
		for i := 1; i < len(hs); i++ {
			if hs[i].token <= hs[i-1].token {
				errs = append(errs, fmt.Sprintf("slot %d: %s got token %d after %s had %d", slot, hs[i].who, hs[i].token, hs[i-1].who, hs[i-1].token))
			}
		}
	}
	return errs
}

func TestCheckerFindsViolations(t *testing.T) {
	at := func(s int) time.Time { return epoch.Add(time.Duration(s) * time.Second) }
	for _, c := range []struct {
		name  string
		holds []*hold
		want  int
	}{
		{"fine", []*hold{
			{who: "a", slot: 0, token: 1, enter: at(0), exit: at(5)},
			{who: "b", slot: 1, token: 1, enter: at(1), exit: at(6)},
			{who: "c", slot: 0, token: 2, enter: at(5), exit: at(9)}, // a's exit is c's entry
			{who: "d", slot: 1, token: 4, enter: at(6)},
		}, 0},
		{"three holders", []*hold{
			{who: "a", slot: 0, token: 1, enter: at(0), exit: at(5)},
			{who: "b", slot: 1, token: 1, enter: at(1), exit: at(6)},
			{who: "c", slot: 2, token: 1, enter: at(4), exit: at(9)},
		}, 1},
		{"slot held twice", []*hold{
			{who: "a", slot: 0, token: 1, enter: at(0), exit: at(5)},
			{who: "b", slot: 0, token: 2, enter: at(4), exit: at(6)},
		}, 1},
		{"token repeated", []*hold{
			{who: "a", slot: 0, token: 1, enter: at(0), exit: at(5)},
			{who: "b", slot: 0, token: 1, enter: at(5), exit: at(6)},
		}, 1},
	} {
		chk := &checker{n: 2, holds: c.holds}
		if v := chk.violations(); len(v) != c.want {
			t.Errorf("%s: violations %q, want %d", c.name, v, c.want)
		}
	}
}

// worker is one contender: a process that takes a slot, works a while and
// gives it back, and now and then is cut off from the store while holding.
type worker struct {
	name  string
	gen   int
	gate  *gate
	sem   *semaphore.Semaphore
	slot  *semaphore.Slot
	hold  *hold
	until time.Time
	cut   bool
	rnd   *rand.Rand
}

type raceStats struct {
	acquired, held, failed, lost, cut atomic.Int64
}

// race runs contenders in rounds of 100 ms on one fake clock. In a round
// every worker acts at once (real races on the store); between rounds the
// clock moves on and the lease goroutines renew.
// A worker that gave its slot back restarts as a new process, which
// remembers no tokens, with probability 1/restart.
func race(t *testing.T, store providers.Store, workers, n, rounds, restart int) (chk *checker, stats *raceStats) {
	synctest.Test(t, func(t *testing.T) { chk, stats = raceIn(t, store, workers, n, rounds, restart) })
	return chk, stats
}

// raceIn is race, in a synctest bubble.
func raceIn(t *testing.T, store providers.Store, workers, n, rounds, restart int) (*checker, *raceStats) {
	ctx := context.Background()
	clk := clock.NewFake(epoch)
	chk := &checker{n: n}
	stats := &raceStats{}
	start := func(w *worker) {
		w.gen++
		w.gate = &gate{Store: store}
		w.sem = newSem(t, w.gate, n, fmt.Sprintf("%s.%d", w.name, w.gen), clk)
	}
	ws := make([]*worker, workers)
	for i := range ws {
		ws[i] = &worker{name: fmt.Sprint("w", i), rnd: rand.New(rand.NewPCG(uint64(i), 7))}
		start(ws[i])
	}
	// settle waits until the renewals of the leases still held are
	// asleep on the clock.
	settle := func() { waitSettled(t, clk, 0) }
	act := func(w *worker) {
		now := clk.Now()
		switch {
		case w.slot != nil && w.slot.Err() != nil: // lost: stop relying on it
			chk.exit(w.hold, now)
			stats.lost.Add(1)
			w.slot = nil
			if w.cut {
				w.cut = false
				start(w) // the cut-off process restarts
			}
		case w.slot != nil && w.cut:
		case w.slot != nil && !now.Before(w.until):
			chk.exit(w.hold, now)
			if err := w.slot.Release(ctx); err != nil && !errors.Is(err, objlease.ErrLeaseLost) {
				stats.failed.Add(1) // the slot expires on its own
			}
			w.slot = nil
			if w.rnd.IntN(restart) == 0 {
				start(w) // a new process, as each run of the CLI is
			}
		case w.slot != nil:
			if w.rnd.IntN(200) == 0 {
				w.cut = true
				w.gate.dead.Store(true)
				stats.cut.Add(1)
			}
		default:
			sl, err := w.sem.TryAcquire(ctx)
			switch {
			case err == nil:
				w.slot = sl
				w.hold = chk.enter(w.sem.Holder(), now, sl)
				w.until = now.Add(200*time.Millisecond + time.Duration(w.rnd.IntN(30))*100*time.Millisecond)
				stats.acquired.Add(1)
			case errors.Is(err, objlease.ErrHeld):
				stats.held.Add(1)
			default:
				stats.failed.Add(1)
			}
		}
	}
	for range rounds {
		var wg sync.WaitGroup
		for _, w := range ws {
			wg.Add(1)
			go func() { defer wg.Done(); act(w) }()
		}
		wg.Wait()
		settle()
		clk.Advance(100 * time.Millisecond)
		settle()
	}
	for _, w := range ws {
		if w.slot != nil {
			w.gate.dead.Store(false)
			w.slot.Release(ctx)
		}
	}
	return chk, stats
}

func faultyStore(t *testing.T, d driver.Driver, seed uint64) providers.Store {
	t.Helper()
	f, err := faulty.New(d, faulty.Config{Seed: seed,
		Default: faulty.Rates{Precondition: 0.01, Conflict: 0.03, Throttled: 0.05, Unknown: 0.05, LostReply: 0.1},
		// Reads never fail, so that no request waits on the fake clock
		// inside a round.
		Ops: map[faulty.Op]faulty.Rates{faulty.Get: {}, faulty.Stat: {}, faulty.List: {}}})
	if err != nil {
		t.Fatal(err)
	}
	return providers.NewBucket(f)
}

// 24 contenders for 3 slots, holders cut off now and then: never more than
// 3 at once, never two on one slot, each slot's tokens increasing.
func TestManyContendersNeverExceedN(t *testing.T) {
	for _, name := range []string{"mem", "faulty"} {
		t.Run(name, func(t *testing.T) {
			var store providers.Store = mem.New()
			if name == "faulty" {
				store = faultyStore(t, mem.NewDriver(), 1)
			}
			chk, st := race(t, store, 24, 3, 400, 2)
			for _, v := range chk.violations() {
				t.Error(v)
			}
			t.Logf("%d acquisitions, %d attempts found every slot held, %d failed, %d holders cut off, %d slots lost; at most %d holders at once",
				st.acquired.Load(), st.held.Load(), st.failed.Load(), st.cut.Load(), st.lost.Load(), chk.maxWork)
			if chk.maxWork != 3 || st.acquired.Load() < 20 || st.cut.Load() == 0 || st.lost.Load() == 0 {
				t.Fatal("the race did not exercise a full semaphore, cut-off holders and takeovers")
			}
			if f := (*faulty.Driver)(nil); store.As(&f) {
				t.Logf("faults injected: %v", f.Counts())
			}
		})
	}
}
