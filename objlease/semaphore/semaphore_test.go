package semaphore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/objlease/semaphore"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/faulty"
	"github.com/objlease/objlease/providers/file"
	"github.com/objlease/objlease/providers/mem"
)

// stores are the stores every scenario runs on. "lossy" loses the reply of
// half the writes after applying them: the protocol must resolve each one
// by reading back, with the same outcome as on a clean store.
func stores(t *testing.T) map[string]func(t *testing.T) providers.Store {
	var mu sync.Mutex
	var lossy []*faulty.Driver
	t.Cleanup(func() {
		var lost int64
		for _, s := range lossy {
			lost += s.Counts()[faulty.KindLostReply]
		}
		if lost == 0 && len(lossy) > 0 {
			t.Error("no reply was lost: the lossy store tested nothing")
		}
		t.Logf("lossy store: %d replies lost", lost)
	})
	return map[string]func(t *testing.T) providers.Store{
		"mem": func(*testing.T) providers.Store { return mem.New() },
		"file": func(t *testing.T) providers.Store {
			s, err := file.New(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		"lossy": func(t *testing.T) providers.Store {
			lost := faulty.Rates{LostReply: 0.5}
			f, err := faulty.New(mem.NewDriver(), faulty.Config{Seed: seed(t.Name()), Ops: map[faulty.Op]faulty.Rates{
				faulty.Create: lost, faulty.Replace: lost, faulty.Delete: lost}})
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			lossy = append(lossy, f)
			mu.Unlock()
			return providers.NewBucket(f)
		},
	}
}

func TestSemaphore(t *testing.T) {
	scenarios := []struct {
		name string
		run  func(t *testing.T, store providers.Store)
	}{
		{"DistinctSlotsThenHeldNamesEarliest", testDistinctSlots},
		{"ReleaseFreesSlotAtOnce", testReleaseFrees},
		{"AcquireWaitsForRelease", testAcquireWaitsForRelease},
		{"DeadHolderTakenAfterExpiry", testDeadHolder},
		{"AcquireWaitsForEarliestExpiry", testAcquireWaitsForExpiry},
		{"TokensIncreasePerSlot", testTokensIncrease},
		{"RaceHasNWinners", testRaceHasNWinners},
		{"SizeMismatchRefused", testSizeMismatch},
		{"ForeignObjectsKept", testForeignObjects},
		{"Resize", testResize},
	}
	for name, mk := range stores(t) {
		t.Run(name, func(t *testing.T) {
			for _, sc := range scenarios {
				t.Run(sc.name, func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) { sc.run(t, mk(t)) })
				})
			}
		})
	}
}

func mustAcquire(t *testing.T, s *semaphore.Semaphore) *semaphore.Slot {
	t.Helper()
	sl, err := s.TryAcquire(context.Background())
	if err != nil {
		t.Fatalf("%s: %v", s.Holder(), err)
	}
	return sl
}

func testDistinctSlots(t *testing.T, store providers.Store) {
	ctx := context.Background()
	clk := clock.NewFake(epoch)
	ttl := func(d time.Duration) func(*objlease.Options) { return func(o *objlease.Options) { o.TTL = d } }
	holders := map[string]*semaphore.Slot{
		"a": mustAcquire(t, newSem(t, store, 3, "a", clk, ttl(30*time.Second))),
		"b": mustAcquire(t, newSem(t, store, 3, "b", clk, ttl(10*time.Second))),
		"c": mustAcquire(t, newSem(t, store, 3, "c", clk, ttl(20*time.Second))),
	}
	seen := map[int]bool{}
	for h, sl := range holders {
		defer sl.Release(ctx)
		if seen[sl.Index()] || sl.Index() < 0 || sl.Index() > 2 {
			t.Fatalf("%s got slot %d; slots so far %v", h, sl.Index(), seen)
		}
		seen[sl.Index()] = true
		if sl.Token() != 1 || sl.Key() != semaphore.SlotKey(prefix, sl.Index()) {
			t.Fatalf("%s: slot %d key %q token %d, want token 1 at %q", h, sl.Index(), sl.Key(), sl.Token(), semaphore.SlotKey(prefix, sl.Index()))
		}
	}
	// Several fourth contenders, each trying the slots in its own order.
	for _, h := range []string{"d", "e", "f", "g", "h", "i"} {
		_, err := newSem(t, store, 3, h, clk).TryAcquire(ctx)
		var he *objlease.Error
		if !errors.Is(err, objlease.ErrHeld) || !errors.As(err, &he) {
			t.Fatalf("fourth holder %s: %v, want ErrHeld", h, err)
		}
		// b's TTL is the shortest: its slot expires first for the fourth.
		if he.Key != holders["b"].Key() || he.Record.Holder != "b" || he.Record.Token != 1 || he.Wait != 10100*time.Millisecond {
			t.Fatalf("%s: held %+v, want b's slot %q, token 1, wait 10.1s", h, he, holders["b"].Key())
		}
	}
}

func testReleaseFrees(t *testing.T, store providers.Store) {
	ctx := context.Background()
	clk := clock.NewFake(epoch)
	var slots []*semaphore.Slot
	for _, h := range []string{"a", "b", "c"} {
		slots = append(slots, mustAcquire(t, newSem(t, store, 3, h, clk)))
	}
	d := newSem(t, store, 3, "d", clk)
	if _, err := d.TryAcquire(ctx); !errors.Is(err, objlease.ErrHeld) {
		t.Fatalf("%v, want ErrHeld", err)
	}
	if err := slots[1].Release(ctx); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(context.Cause(slots[1].Context()), objlease.ErrReleased) {
		t.Fatalf("released slot's cause %v", context.Cause(slots[1].Context()))
	}
	// No time passes: a released slot is free at once, and its token goes on.
	sl := mustAcquire(t, d)
	defer sl.Release(ctx)
	if sl.Index() != slots[1].Index() || sl.Token() != 2 {
		t.Fatalf("got slot %d token %d, want the released slot %d with token 2", sl.Index(), sl.Token(), slots[1].Index())
	}
	slots[0].Release(ctx)
	slots[2].Release(ctx)
}

func testAcquireWaitsForRelease(t *testing.T, store providers.Store) {
	ctx := context.Background()
	clk := clock.NewFake(epoch)
	var slots []*semaphore.Slot
	for _, h := range []string{"a", "b", "c"} {
		slots = append(slots, mustAcquire(t, newSem(t, store, 3, h, clk)))
	}
	type result struct {
		sl  *semaphore.Slot
		at  time.Time
		err error
	}
	got := make(chan result, 1)
	go func() {
		sl, err := newSem(t, store, 3, "d", clk).Acquire(ctx)
		got <- result{sl, clk.Now(), err}
	}()
	waitSettled(t, clk, 1) // the waiting contender
	select {
	case r := <-got:
		t.Fatalf("acquired %v while every slot was held", r)
	default:
	}
	if err := slots[2].Release(ctx); err != nil {
		t.Fatal(err)
	}
	released := clk.Now()
	// The contender notices within one poll interval (2 s).
	for {
		next, _ := clk.NextDeadline()
		clk.Advance(next.Sub(clk.Now()))
		select {
		case r := <-got:
			if r.err != nil {
				t.Fatal(r.err)
			}
			defer r.sl.Release(ctx)
			if r.sl.Index() != slots[2].Index() || r.sl.Token() != 2 {
				t.Fatalf("got slot %d token %d, want %d token 2", r.sl.Index(), r.sl.Token(), slots[2].Index())
			}
			if w := r.at.Sub(released); w > 2*time.Second {
				t.Fatalf("noticed the release after %v, more than the poll interval", w)
			}
			slots[0].Release(ctx)
			slots[1].Release(ctx)
			return
		case <-time.After(50 * time.Millisecond): // let the woken goroutines run
		}
		if clk.Now().Sub(released) > 3*time.Second {
			t.Fatal("contender did not take the released slot")
		}
		// Asleep again, unless it took the slot meanwhile.
		eventually(t, "renewals asleep", func() bool { return settled(clk, 1) || len(got) > 0 })
	}
}

func testDeadHolder(t *testing.T, store providers.Store) {
	ctx := context.Background()
	clk := clock.NewFake(epoch)
	a := mustAcquire(t, newSem(t, store, 3, "a", clk))
	// A holder whose clock never moves is frozen: it never renews.
	dead := mustAcquire(t, newSem(t, store, 3, "dead", clock.NewFake(epoch)))
	b := mustAcquire(t, newSem(t, store, 3, "b", clk))
	defer a.Release(ctx)
	defer b.Release(ctx)
	e := newSem(t, store, 3, "e", clk)
	if _, err := e.TryAcquire(ctx); !errors.Is(err, objlease.ErrHeld) {
		t.Fatalf("%v, want ErrHeld", err)
	}
	// TTL 10 s, drift 1 %: the dead slot is free after 10.1 s, not before.
	advance(t, clk, 10099*time.Millisecond, time.Second)
	var he *objlease.Error
	if _, err := e.TryAcquire(ctx); !errors.Is(err, objlease.ErrHeld) || !errors.As(err, &he) {
		t.Fatalf("1 ms before TTL × (1 + drift): %v, want ErrHeld", err)
	}
	if he.Key != dead.Key() || he.Wait != time.Millisecond {
		t.Fatalf("held %+v, want the dead slot %q with 1ms to go", he, dead.Key())
	}
	advance(t, clk, time.Millisecond, time.Millisecond)
	sl := mustAcquire(t, e)
	defer sl.Release(ctx)
	if sl.Index() != dead.Index() || sl.Token() != dead.Token()+1 {
		t.Fatalf("took slot %d token %d, want the dead slot %d with token %d", sl.Index(), sl.Token(), dead.Index(), dead.Token()+1)
	}
	if err := dead.Renew(ctx); !errors.Is(err, objlease.ErrLeaseLost) {
		t.Fatalf("dead holder's renewal: %v, want ErrLeaseLost", err)
	}
	if a.Err() != nil || b.Err() != nil {
		t.Fatalf("live holders lost their slots: %v, %v", a.Err(), b.Err())
	}
}

func testAcquireWaitsForExpiry(t *testing.T, store providers.Store) {
	ctx := context.Background()
	clk := clock.NewFake(epoch)
	a := mustAcquire(t, newSem(t, store, 2, "a", clk))
	dead := mustAcquire(t, newSem(t, store, 2, "dead", clock.NewFake(epoch)))
	defer a.Release(ctx)
	type result struct {
		sl  *semaphore.Slot
		at  time.Time
		err error
	}
	got := make(chan result, 1)
	go func() {
		sl, err := newSem(t, store, 2, "e", clk).Acquire(ctx)
		got <- result{sl, clk.Now(), err}
	}()
	// The contender first sees every slot at epoch; drive the clock from
	// deadline to deadline so that each wake-up happens at its exact time.
	for {
		eventually(t, "renewals asleep", func() bool { return settled(clk, 1) || len(got) > 0 })
		select {
		case r := <-got:
			if r.err != nil {
				t.Fatal(r.err)
			}
			defer r.sl.Release(ctx)
			if r.sl.Index() != dead.Index() || r.sl.Token() != 2 {
				t.Fatalf("took slot %d token %d, want dead slot %d token 2", r.sl.Index(), r.sl.Token(), dead.Index())
			}
			// Not before TTL × (1 + drift), and at the next wake-up after it
			// (Acquire waits for the earliest expiry + 1 ms).
			if w := r.at.Sub(epoch); w < 10100*time.Millisecond || w > 10102*time.Millisecond {
				t.Fatalf("took over after %v, want 10.1s + 1ms", w)
			}
			return
		default:
		}
		if clk.Now().Sub(epoch) > 15*time.Second {
			t.Fatal("contender did not take the dead slot")
		}
		next, _ := clk.NextDeadline()
		clk.Advance(next.Sub(clk.Now()))
		time.Sleep(time.Millisecond) // let the woken goroutine act before counting timers
	}
}

func testTokensIncrease(t *testing.T, store providers.Store) {
	ctx := context.Background()
	clk := clock.NewFake(epoch)
	a := newSem(t, store, 2, "a", clk)
	b := newSem(t, store, 2, "b", clk)
	last := map[int]uint64{}
	for i := range 8 {
		s := a
		if i%2 == 1 {
			s = b
		}
		sl := mustAcquire(t, s)
		if sl.Token() != last[sl.Index()]+1 {
			t.Fatalf("acquisition %d: slot %d token %d after %d", i, sl.Index(), sl.Token(), last[sl.Index()])
		}
		last[sl.Index()] = sl.Token()
		if err := sl.Renew(ctx); err != nil {
			t.Fatal(err)
		}
		if err := sl.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	st, err := a.Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Recorded != 2 || len(st.Slots) != 2 || len(st.Held()) != 0 {
		t.Fatalf("status %+v, want 2 slots, none held", st)
	}
	for i, sl := range st.Slots {
		if sl.Record == nil {
			continue // never used: the random start may favour one slot
		}
		if sl.Record.State != objlease.StateReleased || sl.Record.Token != last[i] {
			t.Fatalf("slot %d: %+v, want released with token %d (the record is kept)", i, sl.Record, last[i])
		}
	}
}

func testRaceHasNWinners(t *testing.T, store providers.Store) {
	ctx := context.Background()
	for round := range 5 {
		var wg sync.WaitGroup
		var mu sync.Mutex
		var winners []*semaphore.Slot
		start := make(chan struct{})
		for i := range 10 {
			s := newSemOpts(t, store, objlease.SessionOptions{Clock: clock.NewFake(epoch)}, fmt.Sprintf("race-%d", round), 3, objlease.Options{
				TTL: 10 * time.Second, RenewInterval: 2 * time.Second, Holder: fmt.Sprint("racer-", i)})
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				sl, err := s.TryAcquire(ctx)
				switch {
				case err == nil:
					mu.Lock()
					winners = append(winners, sl)
					mu.Unlock()
				case !errors.Is(err, objlease.ErrHeld):
					t.Error(err)
				}
			}()
		}
		close(start)
		wg.Wait()
		idx := map[int]bool{}
		for _, w := range winners {
			if idx[w.Index()] || w.Token() != 1 {
				t.Fatalf("round %d: slot %d won twice or with token %d", round, w.Index(), w.Token())
			}
			idx[w.Index()] = true
			defer w.Release(ctx)
		}
		if len(winners) != 3 {
			t.Fatalf("round %d: %d winners, want 3", round, len(winners))
		}
	}
}

func testSizeMismatch(t *testing.T, store providers.Store) {
	ctx := context.Background()
	clk := clock.NewFake(epoch)
	sl := mustAcquire(t, newSem(t, store, 3, "a", clk))
	defer sl.Release(ctx)
	before, err := store.Get(ctx, semaphore.SizeKey(prefix), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{2, 4} {
		s := newSem(t, store, n, "b", clk)
		var se *semaphore.SizeError
		if _, err := s.TryAcquire(ctx); !errors.Is(err, semaphore.ErrSizeMismatch) || !errors.As(err, &se) {
			t.Fatalf("n=%d: %v, want ErrSizeMismatch", n, err)
		}
		if se.Key != semaphore.SizeKey(prefix) || se.Recorded != 3 || se.Requested != n {
			t.Fatalf("SizeError %+v", se)
		}
		// Waiting will not cure it: Acquire gives up at once.
		if _, err := s.Acquire(ctx); !errors.Is(err, semaphore.ErrSizeMismatch) {
			t.Fatalf("Acquire n=%d: %v, want ErrSizeMismatch", n, err)
		}
	}
	after, err := store.Get(ctx, semaphore.SizeKey(prefix), 0)
	if err != nil || after.Version != before.Version {
		t.Fatalf("size object changed: %v", err)
	}
}

func testForeignObjects(t *testing.T, store providers.Store) {
	ctx := context.Background()
	clk := clock.NewFake(epoch)
	body := []byte(`{"not":"a semaphore"}`)
	unchanged := func(key string) {
		t.Helper()
		obj, err := store.Get(ctx, key, 0)
		if err != nil || !bytes.Equal(obj.Data, body) {
			t.Fatalf("foreign object at %q changed: %v", key, err)
		}
	}
	// A foreign object at a slot is reported and kept; the other slot
	// still serves.
	if _, err := store.Create(ctx, semaphore.SlotKey(prefix, 1), body, nil); err != nil && !errors.Is(err, providers.ErrUnknownOutcome) {
		t.Fatal(err)
	}
	first := mustAcquire(t, newSem(t, store, 2, "a", clk))
	if first.Index() != 0 {
		t.Fatalf("took slot %d, want 0 (slot 1 is foreign)", first.Index())
	}
	var re *objlease.Error
	if _, err := newSem(t, store, 2, "b", clk).Acquire(ctx); !errors.As(err, &re) || re.Key != semaphore.SlotKey(prefix, 1) {
		t.Fatalf("%v, want an *Error naming slot 1", err)
	}
	unchanged(semaphore.SlotKey(prefix, 1))
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// A foreign size object is reported, kept, and replaced only by force.
	size := semaphore.SizeKey(prefix)
	a, err := store.Stat(ctx, size)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Replace(ctx, size, body, nil, a.Version); err != nil && !errors.Is(err, providers.ErrUnknownOutcome) {
		t.Fatal(err)
	}
	if _, err := newSem(t, store, 2, "c", clk).Acquire(ctx); !errors.As(err, &re) || re.Key != size {
		t.Fatalf("%v, want an *Error naming the size object", err)
	}
	if _, err := newSem(t, store, 2, "c", clk).Inspect(ctx); !errors.As(err, &re) || re.Key != size {
		t.Fatalf("Inspect: %v, want an *Error naming the size object", err)
	}
	unchanged(size)
	sl := mustAcquire(t, newSem(t, store, 2, "forcer", clk, func(o *objlease.Options) { o.Force = true }))
	defer sl.Release(ctx)
	if n, _, err := readSize(ctx, store); err != nil || n != 2 {
		t.Fatalf("size after force: %d %v, want 2", n, err)
	}
}

// readSize reads the size object as a process without a semaphore would.
func readSize(ctx context.Context, store providers.Store) (int, string, error) {
	obj, err := store.Get(ctx, semaphore.SizeKey(prefix), 0)
	if err != nil {
		return 0, "", err
	}
	var d struct {
		Slots int `json:"slots"`
	}
	err = json.Unmarshal(obj.Data, &d)
	return d.Slots, obj.Version, err
}

func testResize(t *testing.T, store providers.Store) {
	ctx := context.Background()
	clk := clock.NewFake(epoch)
	olds := map[string]*semaphore.Semaphore{}
	bySlot := map[int]*semaphore.Slot{}
	for _, h := range []string{"a", "b", "c"} {
		olds[h] = newSem(t, store, 3, h, clk)
		sl := mustAcquire(t, olds[h])
		bySlot[sl.Index()] = sl
	}
	admin := newSem(t, store, 3, "admin", clk)

	// Shrinking while slot 2 is held: recorded at once, drained later.
	err := admin.Resize(ctx, 2)
	var de *semaphore.DrainError
	if !errors.Is(err, semaphore.ErrDraining) || !errors.As(err, &de) || len(de.Held) != 1 || de.Held[0].Key != semaphore.SlotKey(prefix, 2) {
		t.Fatalf("shrink with slot 2 held: %v, want a *DrainError naming slot 2", err)
	}
	if _, err := newSem(t, store, 3, "late", clk).TryAcquire(ctx); !errors.Is(err, semaphore.ErrSizeMismatch) {
		t.Fatalf("new process with the old size: %v, want ErrSizeMismatch", err)
	}
	if _, err := newSem(t, store, 2, "new", clk).TryAcquire(ctx); !errors.Is(err, objlease.ErrHeld) {
		t.Fatalf("new process with the new size: %v, want ErrHeld", err)
	}
	// The holder of slot 2 still runs with size 3: once it gives the slot
	// back, it cannot take it again, since only slot 2 is free.
	s2 := bySlot[2]
	if err := s2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := admin.Resize(ctx, 2); err != nil {
		t.Fatalf("shrink after drain: %v", err)
	}
	var owner *semaphore.Semaphore
	for _, s := range olds {
		if s.Holder() == s2.Record().Holder {
			owner = s
		}
	}
	var se *semaphore.SizeError
	if _, err := owner.TryAcquire(ctx); !errors.As(err, &se) || se.Recorded != 2 || se.Requested != 3 {
		t.Fatalf("re-taking slot 2 after the shrink: %v, want a SizeError (recorded 2)", err)
	}
	st, err := admin.Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if held := st.Held(); len(held) != 2 || held[0] != 0 || held[1] != 1 {
		t.Fatalf("held slots %v after the refused take, want [0 1] (slot 2 given back)", held)
	}

	// Growing is free, and holders with the smaller size carry on.
	if err := admin.Resize(ctx, 4); err != nil {
		t.Fatalf("grow: %v", err)
	}
	var fresh []*semaphore.Slot
	for _, h := range []string{"d", "e"} {
		sl := mustAcquire(t, newSem(t, store, 4, h, clk))
		if sl.Index() < 2 {
			t.Fatalf("%s took slot %d, which is held", h, sl.Index())
		}
		fresh = append(fresh, sl)
	}
	for _, sl := range append(fresh, bySlot[0], bySlot[1]) {
		if err := sl.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if sl := mustAcquire(t, owner); sl.Index() >= owner.Size() {
		t.Fatalf("old-size holder took slot %d; it must stay below its own size", sl.Index())
	} else {
		sl.Release(ctx)
	}
}

func memSession(t *testing.T) *objlease.Session {
	t.Helper()
	s, err := objlease.NewSession(mem.New(), objlease.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNewValidates(t *testing.T) {
	for _, c := range []struct {
		prefix string
		n      int
	}{{"", 3}, {"/", 3}, {"p", 0}, {"p", -1}, {"p", semaphore.MaxSlots + 1}} {
		if _, err := semaphore.New(memSession(t), c.prefix, c.n, objlease.Options{}); !errors.Is(err, objlease.ErrInvalidOptions) {
			t.Errorf("New(%q, %d): %v, want ErrInvalidOptions", c.prefix, c.n, err)
		}
	}
	if _, err := semaphore.New(nil, "p", 1, objlease.Options{}); !errors.Is(err, objlease.ErrInvalidOptions) {
		t.Errorf("nil session: %v", err)
	}
	if _, err := semaphore.New(memSession(t), "p", 1, objlease.Options{TTL: time.Second, RenewInterval: time.Second}); !errors.Is(err, objlease.ErrInvalidOptions) {
		t.Errorf("bad lease options: %v", err)
	}
	s, err := semaphore.New(memSession(t), "pools/x/", 2, objlease.Options{})
	if err != nil || s.Prefix() != "pools/x" || s.Size() != 2 || s.Holder() == "" {
		t.Fatalf("%v %v", s, err)
	}
}

// The request costs docs/semaphore.md quotes.
func TestRequestCosts(t *testing.T) {
	ctx := context.Background()
	cs := newCounter(mem.New())
	clk := clock.NewFake(epoch)
	var slots []*semaphore.Slot
	for i, h := range []string{"a", "b", "c"} {
		sl := mustAcquire(t, newSem(t, cs, 3, h, clk))
		slots = append(slots, sl)
		got := cs.take()
		if i == 0 {
			// Size read (absent) and recorded, slot created; a slot above 0
			// re-reads the size.
			want := map[string]int{"get": 1, "create": 2}
			if sl.Index() > 0 {
				want["get"]++
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("first acquisition cost %v, want %v", got, want)
			}
		}
		t.Logf("acquisition %d (slot %d): %v", i+1, sl.Index(), got)
	}
	d := newSem(t, cs, 3, "d", clk)
	if _, err := d.TryAcquire(ctx); !errors.Is(err, objlease.ErrHeld) {
		t.Fatal(err)
	}
	if got := cs.take(); got["get"] != 1+3 || got["create"] != 3 || len(got) != 2 {
		t.Fatalf("a new process's first look at a full semaphore cost %v, want the size read and a create and a read per slot", got)
	}
	if _, err := d.TryAcquire(ctx); !errors.Is(err, objlease.ErrHeld) {
		t.Fatal(err)
	}
	if got := cs.take(); got["get"] != 3 || len(got) != 1 {
		t.Fatalf("a poll of a full semaphore cost %v, want one read per slot", got)
	}
	if err := slots[0].Renew(ctx); err != nil {
		t.Fatal(err)
	}
	if got := cs.take(); got["replace"] != 1 || len(got) != 1 {
		t.Fatalf("a renewal cost %v, want one write", got)
	}
	if err := slots[1].Release(ctx); err != nil {
		t.Fatal(err)
	}
	if got := cs.take(); got["replace"] != 1 || len(got) != 1 {
		t.Fatalf("a release cost %v, want one write", got)
	}
	sl := mustAcquire(t, d)
	got := cs.take()
	t.Logf("taking a released slot after polling: %v", got)
	if got["replace"] != 1 || got["get"] > 3+1 {
		t.Fatalf("taking a released slot cost %v, want one write, at most a read per slot and the size", got)
	}
	for _, s := range append(slots, sl) {
		s.Release(ctx)
	}
}

func TestAcquireEndsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := mem.New()
		clk := clock.NewFake(epoch)
		sl := mustAcquire(t, newSem(t, store, 1, "a", clk))
		defer sl.Release(context.Background())
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := newSem(t, store, 1, "b", clk).Acquire(ctx)
			done <- err
		}()
		waitSettled(t, clk, 1)
		cancel()
		err := <-done
		if !errors.Is(err, context.Canceled) || !errors.Is(err, objlease.ErrHeld) {
			t.Fatalf("%v, want the context's cause and the last attempt's ErrHeld", err)
		}
	})
}

func TestAcquireReportingNamesTheSlotDueFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := mem.New()
		clk := clock.NewFake(epoch)
		a := mustAcquire(t, newSem(t, store, 2, "a", clk))
		defer a.Release(context.Background())
		b := mustAcquire(t, newSem(t, store, 2, "b", clk))
		defer b.Release(context.Background())
		ctx, cancel := context.WithCancel(context.Background())
		seen := make(chan objlease.Progress, 16)
		done := make(chan error, 1)
		go func() {
			_, err := newSem(t, store, 2, "c", clk).AcquireReporting(ctx, func(p objlease.Progress) {
				select {
				case seen <- p:
				default:
				}
			})
			done <- err
		}()
		waitSettled(t, clk, 1)
		cancel()
		<-done
		select {
		case p := <-seen:
			if p.Held == nil || (p.Held.Record.Holder != "a" && p.Held.Record.Holder != "b") || p.Takeover.IsZero() {
				t.Fatalf("progress %+v (held %+v), want the slot due first, held by a or b, with a takeover time", p, p.Held)
			}
		default:
			t.Fatal("no progress reported while every slot was held")
		}
	})
}
