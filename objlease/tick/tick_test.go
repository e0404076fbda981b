package tick_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/objlease/fence"
	"github.com/objlease/objlease/objlease/tick"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/file"
	"github.com/objlease/objlease/providers/mem"
)

var epoch = time.Date(2026, 12, 4, 2, 59, 50, 0, time.UTC)

// trigger is one delivery of a schedule's trigger: a client of its own, on
// a clock of its own.
func trigger(t *testing.T, store providers.Store, holder string, clk clock.Clock) *objlease.Lease {
	t.Helper()
	c, err := newOn(store, "jobs/nightly", objlease.SessionOptions{Clock: clk}, objlease.Options{TTL: 30 * time.Second, Holder: holder})
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.TryAcquire(t.Context())
	if err != nil {
		t.Fatalf("%s: acquire: %v", holder, err)
	}
	return l
}

// takeOver is a trigger that finds the lease held by a holder that stopped
// renewing, watches it for longer than its TTL, and takes it over.
func takeOver(t *testing.T, store providers.Store, holder string) *objlease.Lease {
	t.Helper()
	clk := clock.NewFake(epoch)
	c, err := newOn(store, "jobs/nightly", objlease.SessionOptions{Clock: clk}, objlease.Options{TTL: 30 * time.Second, Holder: holder})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.TryAcquire(t.Context()); !errors.Is(err, objlease.ErrHeld) {
		t.Fatalf("%s: first look: %v, want the lease held", holder, err)
	}
	clk.Advance(time.Minute)
	l, err := c.TryAcquire(t.Context())
	if err != nil {
		t.Fatalf("%s: take over: %v", holder, err)
	}
	return l
}

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		t      time.Time
		period time.Duration
		want   string
	}{
		{time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC), time.Hour, "2026-12-04T03:00:00Z/PT1H"},
		{time.Date(2026, 12, 4, 3, 59, 29, 999, time.UTC), time.Hour, "2026-12-04T03:00:00Z/PT1H"},
		// Within Early (30 s) of the next hour: that hour's.
		{time.Date(2026, 12, 4, 2, 59, 30, 0, time.UTC), time.Hour, "2026-12-04T03:00:00Z/PT1H"},
		{time.Date(2026, 12, 4, 2, 59, 29, 999_999_999, time.UTC), time.Hour, "2026-12-04T02:00:00Z/PT1H"},
		{time.Date(2026, 12, 4, 23, 0, 0, 0, time.FixedZone("x", -5*3600)), 24 * time.Hour, "2026-12-05T00:00:00Z/PT24H"},
		{time.Date(2026, 12, 4, 3, 14, 0, 0, time.UTC), 15 * time.Minute, "2026-12-04T03:00:00Z/PT15M"},
		// A quarter of a 1 s period is 250 ms.
		{time.Date(2026, 12, 4, 3, 14, 0, 749_000_000, time.UTC), time.Second, "2026-12-04T03:14:00Z/PT1S"},
		{time.Date(2026, 12, 4, 3, 14, 0, 750_000_000, time.UTC), time.Second, "2026-12-04T03:14:01Z/PT1S"},
		// 03:14:00 is a whole number of 1.5 s periods since the epoch.
		{time.Date(2026, 12, 4, 3, 14, 1, 200_000_000, time.UTC), 1500 * time.Millisecond, "2026-12-04T03:14:01.5Z/PT1.5S"}, // within 375 ms of it
		{time.Date(2026, 12, 4, 3, 14, 1, 0, time.UTC), 1500 * time.Millisecond, "2026-12-04T03:14:00Z/PT1.5S"},
	} {
		if got := tick.Of(tc.t, tc.period); got != tc.want {
			t.Errorf("Of(%v, %v) = %s, want %s", tc.t, tc.period, got, tc.want)
		}
	}
}

// Two triggers of one tick, one after the other: the second finds the
// first's mark and does not run the job.
func TestSecondTriggerOfATickDoesNotRun(t *testing.T) {
	ctx := t.Context()
	store := mem.New()
	runs := 0
	job := func(context.Context) error { runs++; return nil }

	first := trigger(t, store, "a", clock.NewFake(epoch))
	ran, done, err := tick.Once(ctx, store, first, "T1", job)
	if err != nil || !ran || done != nil {
		t.Fatalf("first trigger: ran %v, done %+v, %v; want it to run", ran, done, err)
	}
	first.Release(ctx)

	second := trigger(t, store, "b", clock.NewFake(epoch))
	ran, done, err = tick.Once(ctx, store, second, "T1", job)
	if err != nil || ran || done == nil || done.Token != 1 || done.Holder != "a" {
		t.Fatalf("second trigger of T1: ran %v, done %+v, %v; want not run, done by token 1 of a", ran, done, err)
	}
	if second.Token() != 2 {
		t.Errorf("second trigger's token %d, want 2", second.Token())
	}
	second.Release(ctx)

	third := trigger(t, store, "c", clock.NewFake(epoch))
	if ran, _, err := tick.Once(ctx, store, third, "T2", job); err != nil || !ran {
		t.Fatalf("trigger of the next tick: ran %v, %v; want it to run", ran, err)
	}
	if runs != 2 {
		t.Errorf("job ran %d times for two ticks, want 2", runs)
	}
}

// Two triggers of one tick at once: the second waits for the lease, then
// finds the mark.
func TestOverlappingTriggersRunOnce(t *testing.T) {
	ctx := t.Context()
	store := mem.New()
	var mu sync.Mutex
	runs := 0
	var wg sync.WaitGroup
	for _, holder := range []string{"a", "b", "c"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := objlease.New(store, "jobs/nightly", objlease.Options{TTL: 30 * time.Second, Holder: holder, PollInterval: 10 * time.Millisecond})
			if err != nil {
				t.Error(err)
				return
			}
			l, err := c.Acquire(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			defer l.Release(ctx)
			if _, _, err := tick.Once(ctx, store, l, "T1", func(context.Context) error {
				mu.Lock()
				runs++
				mu.Unlock()
				return nil
			}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if runs != 1 {
		t.Errorf("job ran %d times for one tick, want 1", runs)
	}
}

// A job that fails, or whose holder dies before the mark, leaves the tick
// open: the next trigger runs it, under a higher token.
func TestUnfinishedTickRunsAgain(t *testing.T) {
	ctx := t.Context()
	store := mem.New()
	failing := trigger(t, store, "a", clock.NewFake(epoch))
	ran, _, err := tick.Once(ctx, store, failing, "T1", func(context.Context) error { return errors.New("exit 1") })
	if !ran || err == nil {
		t.Fatalf("failing job: ran %v, %v", ran, err)
	}
	failing.Release(ctx)

	// b's job runs and b dies (its lease expires, no mark).
	dying := trigger(t, store, "b", clock.NewFake(epoch))
	if m, err := tick.Read(ctx, store, dying.Key()); err != nil || m.Last() != nil {
		t.Fatalf("mark after a failed job: %+v, %v; want none", m, err)
	}

	next := takeOver(t, store, "c")
	var token uint64
	ran, _, err = tick.Once(ctx, store, next, "T1", func(context.Context) error { token = next.Token(); return nil })
	if err != nil || !ran || token != 3 {
		t.Fatalf("trigger after a dead holder: ran %v, token %d, %v; want it to run with token 3", ran, token, err)
	}
}

// A holder paused past its lease cannot mark the tick over the mark of the
// holder that took over: the mark is fenced with the token.
func TestStaleHolderCannotMark(t *testing.T) {
	ctx := t.Context()
	store := mem.New()
	paused := trigger(t, store, "a", clock.NewFake(epoch))
	next := takeOver(t, store, "b")
	if err := tick.Done(ctx, store, next, "T1"); err != nil {
		t.Fatal(err)
	}
	err := tick.Done(ctx, store, paused, "T1")
	if !errors.Is(err, fence.ErrStale) {
		t.Fatalf("stale holder's mark: %v, want fence.ErrStale", err)
	}
	if m, _ := tick.Read(ctx, store, "jobs/nightly"); m == nil || m.Last() == nil || m.Last().Token != 2 {
		t.Errorf("mark %+v, want token 2's", m)
	}
}

// The tick is judged on the store's clock: two triggers whose own clocks
// are ten minutes apart, on either side of 03:00, both find the store's
// tick.
func TestTickByTheStoresClock(t *testing.T) {
	ctx := t.Context()
	storeNow := time.Date(2026, 12, 4, 3, 0, 5, 0, time.UTC)
	store := mem.New(mem.WithClock(func() time.Time { return storeNow }))
	var ticks []string
	for i, own := range []time.Time{storeNow.Add(-10 * time.Minute), storeNow.Add(10 * time.Minute)} {
		l := trigger(t, store, string(rune('a'+i)), clock.NewFake(own))
		at, err := tick.Now(ctx, store, l)
		if err != nil {
			t.Fatal(err)
		}
		ticks = append(ticks, tick.Of(at, time.Hour))
		l.Release(ctx)
		storeNow = storeNow.Add(2 * time.Second)
	}
	if ticks[0] != "2026-12-04T03:00:00Z/PT1H" || ticks[1] != ticks[0] {
		t.Errorf("ticks %v, want both 2026-12-04T03:00:00Z/PT1H (the store's), whatever the triggers' clocks say", ticks)
	}
}

// An object at the mark's key that is not a mark is reported, and left
// alone.
func TestForeignMarkIsLeftAlone(t *testing.T) {
	ctx := t.Context()
	store := mem.New()
	if _, err := store.Create(ctx, "jobs/nightly.tick", []byte("notes"), nil); err != nil {
		t.Fatal(err)
	}
	l := trigger(t, store, "a", clock.NewFake(epoch))
	ran, _, err := tick.Once(ctx, store, l, "T1", func(context.Context) error { return nil })
	if ran || !errors.Is(err, tick.ErrBadMark) {
		t.Fatalf("foreign mark: ran %v, %v; want ErrBadMark and no run", ran, err)
	}
	obj, err := store.Get(ctx, "jobs/nightly.tick", 0)
	if err != nil || string(obj.Data) != "notes" {
		t.Errorf("the foreign object is now %q, %v", obj.Data, err)
	}
}

// A tick redelivered after a later one (Pub/Sub redelivers out of order)
// finds itself done: the mark remembers every tick done, not only the
// last.
func TestEveryTickDoneIsRemembered(t *testing.T) {
	ctx := t.Context()
	store := mem.New()
	runs := map[string]int{}
	for i, id := range []string{"build-41", "build-42", "build-41", "build-42", "build-43", "build-41"} {
		l := trigger(t, store, string(rune('a'+i)), clock.NewFake(epoch))
		if _, _, err := tick.Once(ctx, store, l, id, func(context.Context) error { runs[id]++; return nil }); err != nil {
			t.Fatalf("trigger %d (%s): %v", i, id, err)
		}
		l.Release(ctx)
	}
	for id, n := range runs {
		if n != 1 {
			t.Errorf("%s ran %d times, want once", id, n)
		}
	}
}

// The period is part of the tick: the hour that starts at midnight is not
// the day that does, nor is a 1-minute period the 2-minute one starting
// with it.
func TestOfNamesThePeriod(t *testing.T) {
	midnight := time.Date(2026, 12, 4, 0, 0, 10, 0, time.UTC)
	for _, tc := range []struct {
		period time.Duration
		want   string
	}{
		{time.Minute, "2026-12-04T00:00:00Z/PT1M"},
		{2 * time.Minute, "2026-12-04T00:00:00Z/PT2M"},
		{time.Hour, "2026-12-04T00:00:00Z/PT1H"},
		{24 * time.Hour, "2026-12-04T00:00:00Z/PT24H"},
		{90 * time.Minute, "2026-12-04T00:00:00Z/PT1H30M"},
		{time.Second, "2026-12-04T00:00:10Z/PT1S"},
	} {
		if got := tick.Of(midnight, tc.period); got != tc.want {
			t.Errorf("Of(%v, %v) = %s, want %s", midnight, tc.period, got, tc.want)
		}
	}
}

// Periods are aligned to the Unix epoch: weeks start on Thursday
// (1970-01-01 was one), 5-hour periods at 00:00, 05:00, 10:00 ... of
// 1970-01-01 and every 5 hours since.
func TestOfAlignsToTheEpoch(t *testing.T) {
	for _, tc := range []struct {
		t      time.Time
		period time.Duration
		want   string
	}{
		{time.Date(2026, 12, 9, 12, 0, 0, 0, time.UTC), 168 * time.Hour, "2026-12-03T00:00:00Z/PT168H"},
		{time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC), 168 * time.Hour, "2026-12-03T00:00:00Z/PT168H"},
		{time.Date(2026, 12, 4, 3, 30, 0, 0, time.UTC), 5 * time.Hour, "2026-12-04T01:00:00Z/PT5H"},
		{time.Date(1970, 1, 1, 9, 59, 0, 0, time.UTC), 5 * time.Hour, "1970-01-01T05:00:00Z/PT5H"},
		{time.Date(1969, 12, 31, 23, 0, 0, 0, time.UTC), 5 * time.Hour, "1969-12-31T19:00:00Z/PT5H"},
	} {
		if got := tick.Of(tc.t, tc.period); got != tc.want {
			t.Errorf("Of(%v, %v) = %s, want %s", tc.t, tc.period, got, tc.want)
		}
	}
}

// An id that could not be remembered, or would forge a log line, is
// refused before the job runs, and the key works as before.
func TestBadIDsAreRefusedBeforeTheJobRuns(t *testing.T) {
	ctx := t.Context()
	store := mem.New()
	for i, id := range []string{strings.Repeat("x", 5000), "build-\xff", "build-1\nobjlease: forged", "", " build-1"} {
		l := trigger(t, store, string(rune('a'+i)), clock.NewFake(epoch))
		ran, _, err := tick.Once(ctx, store, l, id, func(context.Context) error { return nil })
		if ran || err == nil {
			t.Errorf("id %.40q: ran %v, %v; want refused without running", id, ran, err)
		}
		l.Release(ctx)
	}
	l := trigger(t, store, "z", clock.NewFake(epoch))
	if ran, _, err := tick.Once(ctx, store, l, "build-1", func(context.Context) error { return nil }); !ran || err != nil {
		t.Fatalf("a good id after the refused ones: ran %v, %v", ran, err)
	}
}

// A lease whose token is below the mark's (its record was recreated
// without the mark's token as a floor) does not run a job it could never
// mark done.
func TestTokenBelowTheMarkDoesNotRunTheJob(t *testing.T) {
	ctx := t.Context()
	store := mem.New()
	for i, id := range []string{"a", "b", "c"} {
		l := trigger(t, store, string(rune('a'+i)), clock.NewFake(epoch))
		if _, _, err := tick.Once(ctx, store, l, id, func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
		l.Release(ctx)
	}
	a, err := store.Stat(ctx, "jobs/nightly")
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Delete(ctx, "jobs/nightly", a.Version); err != nil {
		t.Fatal(err)
	}
	l := trigger(t, store, "d", clock.NewFake(epoch))
	if l.Token() != 1 {
		t.Fatalf("token %d after the record was deleted, want 1 (no floor given)", l.Token())
	}
	ran, _, err := tick.Once(ctx, store, l, "d", func(context.Context) error { return nil })
	if ran || err == nil {
		t.Errorf("token 1 under a mark of token 3: ran %v, %v; want refused without running", ran, err)
	}
}

// A trigger is judged on the store's clock at its acquisition. One that
// lands a little before a period's start by the store's clock (the
// scheduler's clock ahead of the store's, or one start of a trigger
// started twice) counts for that period, whichever way the clocks
// disagree; one that lands a period's start late counts for it too.
func TestTriggerAtTheBoundaryCountsForTheNextPeriod(t *testing.T) {
	ctx := t.Context()
	midnight := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	for _, skew := range []time.Duration{-20 * time.Second, -2 * time.Second, -100 * time.Millisecond, 0, 100 * time.Millisecond, 2 * time.Second, time.Hour} {
		storeNow := midnight.Add(skew)
		store := mem.New(mem.WithClock(func() time.Time { return storeNow }))
		// The scheduler fires at its midnight; its clock is the trigger's.
		l := trigger(t, store, "a", clock.NewFake(midnight))
		at, err := tick.Now(ctx, store, l)
		if err != nil {
			t.Fatal(err)
		}
		if got := tick.Of(at, 24*time.Hour); got != "2026-12-05T00:00:00Z/PT24H" {
			t.Errorf("store clock %v off the scheduler's: tick %s, want 2026-12-05T00:00:00Z/PT24H", skew, got)
		}
	}
	// Past Early (30 s for a day) before midnight, a trigger counts for
	// the day before, as documented.
	store := mem.New(mem.WithClock(func() time.Time { return midnight.Add(-31 * time.Second) }))
	l := trigger(t, store, "a", clock.NewFake(midnight))
	if at, err := tick.Now(ctx, store, l); err != nil || tick.Of(at, 24*time.Hour) != "2026-12-04T00:00:00Z/PT24H" {
		t.Errorf("31 s before midnight by the store's clock: tick %s, %v; want 2026-12-04T00:00:00Z/PT24H", tick.Of(at, 24*time.Hour), err)
	}
	// A trigger started twice, its starts straddling midnight by the
	// store's clock: the job runs once.
	storeNow := midnight.Add(-400 * time.Millisecond)
	store = mem.New(mem.WithClock(func() time.Time { return storeNow }))
	runs := 0
	for _, holder := range []string{"a", "b"} {
		l := trigger(t, store, holder, clock.NewFake(midnight))
		at, err := tick.Now(ctx, store, l)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := tick.Once(ctx, store, l, tick.Of(at, 24*time.Hour), func(context.Context) error { runs++; return nil }); err != nil {
			t.Fatal(err)
		}
		l.Release(ctx)
		storeNow = storeNow.Add(800 * time.Millisecond)
	}
	if runs != 1 {
		t.Errorf("a trigger started twice across midnight ran the job %d times, want once", runs)
	}
}

// Another job's lease where the mark belongs is reported as such, left
// alone, and nobody is told to remove it.
func TestLeaseAtTheMarkKeyIsLeftAlone(t *testing.T) {
	ctx := t.Context()
	store := mem.New()
	other, err := objlease.New(store, "jobs/nightly.tick", objlease.Options{TTL: 30 * time.Second, Holder: "other-job"})
	if err != nil {
		t.Fatal(err)
	}
	ol, err := other.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l := trigger(t, store, "a", clock.NewFake(epoch))
	ran, _, err := tick.Once(ctx, store, l, "T1", func(context.Context) error { return nil })
	if ran || !errors.Is(err, tick.ErrBadMark) {
		t.Fatalf("a lease at the mark's key: ran %v, %v; want ErrBadMark and no run", ran, err)
	}
	if strings.Contains(err.Error(), "remove") || !strings.Contains(err.Error(), "lease") {
		t.Errorf("%v: want it to name a lease there, without advice to remove it", err)
	}
	if err := ol.Release(ctx); err != nil {
		t.Errorf("the other job's lease was disturbed: %v", err)
	}
}

// The mark's token is a floor for the lease's: after the lease record was
// deleted, or the mark deleted through fence with a higher token, a
// client given Floor as its MinToken acquires above the mark, runs the
// job once and marks it; a later trigger finds it done.
func TestFloorKeepsTokensAboveTheMark(t *testing.T) {
	ctx := t.Context()
	store := mem.New()
	if f, err := tick.Floor(ctx, store, "jobs/nightly"); err != nil || f != 0 {
		t.Fatalf("Floor with no mark: %d, %v; want 0", f, err)
	}
	for i, id := range []string{"a", "b", "c"} {
		l := trigger(t, store, string(rune('a'+i)), clock.NewFake(epoch))
		if _, _, err := tick.Once(ctx, store, l, id, func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
		l.Release(ctx)
	}
	a, err := store.Stat(ctx, "jobs/nightly")
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Delete(ctx, "jobs/nightly", a.Version); err != nil {
		t.Fatal(err)
	}
	floored := func(holder string) *objlease.Lease {
		t.Helper()
		f, err := tick.Floor(ctx, store, "jobs/nightly")
		if err != nil {
			t.Fatal(err)
		}
		c, err := objlease.New(store, "jobs/nightly", objlease.Options{TTL: 30 * time.Second, Holder: holder, MinToken: &f})
		if err != nil {
			t.Fatal(err)
		}
		l, err := c.TryAcquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	runs := 0
	job := func(context.Context) error { runs++; return nil }
	for i, want := range []uint64{4, 5, 6} {
		l := floored(string(rune('d' + i)))
		if l.Token() != want {
			t.Errorf("trigger %d after the record was deleted: token %d, want %d", i, l.Token(), want)
		}
		if _, _, err := tick.Once(ctx, store, l, "d", job); err != nil {
			t.Fatal(err)
		}
		l.Release(ctx)
	}
	if runs != 1 {
		t.Errorf("three triggers of one tick after the record was deleted ran the job %d times, want once", runs)
	}

	if err := fence.Delete(ctx, store, "jobs/nightly.tick", 9, fence.Options{}); err != nil {
		t.Fatal(err)
	}
	if f, err := tick.Floor(ctx, store, "jobs/nightly"); err != nil || f != 9 {
		t.Fatalf("Floor over a fenced delete of token 9: %d, %v", f, err)
	}
	runs = 0
	for i, want := range []uint64{10, 11} {
		l := floored(string(rune('g' + i)))
		if l.Token() != want {
			t.Errorf("trigger %d after the mark's fenced delete: token %d, want %d", i, l.Token(), want)
		}
		if _, _, err := tick.Once(ctx, store, l, "e", job); err != nil {
			t.Fatal(err)
		}
		l.Release(ctx)
	}
	if runs != 1 {
		t.Errorf("two triggers of one tick after the mark's fenced delete ran the job %d times, want once", runs)
	}
}

// A key the store refuses for the mark (a lease key whose last segment
// leaves no room for ".tick" on a file store) is found by Floor, before
// anything is acquired.
func TestFloorChecksTheMarkKey(t *testing.T) {
	store, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	key := strings.Repeat("k", 252)
	if _, err := tick.Floor(t.Context(), store, key); !errors.Is(err, providers.ErrInvalidKey) {
		t.Errorf("Floor of a key whose mark's key is too long: %v, want ErrInvalidKey", err)
	}
}

// The mark remembers the newest Remembered ticks: the oldest past them is
// forgotten, and a trigger of it runs the job again.
func TestMarkRemembersTheNewestTicks(t *testing.T) {
	ctx := t.Context()
	store := mem.New()
	l := trigger(t, store, "a", clock.NewFake(epoch))
	// A mark that remembers as many ticks as it can, as Done writes one.
	full := struct {
		Version int         `json:"objlease_tick"`
		Ticks   []tick.Mark `json:"ticks"`
	}{Version: 2}
	for i := range tick.Remembered {
		full.Ticks = append(full.Ticks, tick.Mark{Tick: fmt.Sprintf("build-%d", i), Token: 1, Holder: "a", DoneAt: epoch})
	}
	b, err := json.Marshal(full)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Create(ctx, tick.Key("jobs/nightly"), b, map[string]string{fence.TokenKey: "1"}); err != nil {
		t.Fatal(err)
	}
	last := fmt.Sprintf("build-%d", tick.Remembered)
	if err := tick.Done(ctx, store, l, last); err != nil {
		t.Fatal(err)
	}
	m, err := tick.Read(ctx, store, "jobs/nightly")
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Ticks) != tick.Remembered || m.Ticks[0].Tick != "build-1" || m.Last().Tick != last {
		t.Fatalf("mark holds %d ticks, %s to %s; want the newest %d", len(m.Ticks), m.Ticks[0].Tick, m.Last().Tick, tick.Remembered)
	}
	for _, tc := range []struct {
		id  string
		ran bool
	}{{"build-1", false}, {last, false}, {"build-0", true}} {
		if ran, _, err := tick.Once(ctx, store, l, tc.id, func(context.Context) error { return nil }); err != nil || ran != tc.ran {
			t.Errorf("%s: ran %v, %v; want ran %v", tc.id, ran, err, tc.ran)
		}
	}
}

// Ticks marked by several writers at once are all kept: each write reads
// the mark and writes it back on the version it read.
func TestMarkKeepsTicksMarkedMeanwhile(t *testing.T) {
	ctx := t.Context()
	store := mem.New()
	l := trigger(t, store, "a", clock.NewFake(epoch))
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Go(func() {
			if err := tick.Done(ctx, store, l, fmt.Sprintf("t%d", i)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	m, err := tick.Read(ctx, store, "jobs/nightly")
	if err != nil || len(m.Ticks) != 5 {
		t.Fatalf("mark %+v, %v; want the 5 ticks", m, err)
	}
}

func TestCheckID(t *testing.T) {
	for _, id := range []string{"build-41", "2026-12-07T00:00:00Z/PT24H", "projects/p/locations/l/jobs/nightly", "夜間 #42", "a b", `"quoted"`, strings.Repeat("x", tick.MaxIDBytes)} {
		if err := tick.CheckID(id); err != nil {
			t.Errorf("CheckID(%q): %v", id, err)
		}
	}
	for _, id := range []string{"", " ", strings.Repeat("x", tick.MaxIDBytes+1), "a\xffb", "a\nb", "a\tb", "a\x00b", "a\u2028b", "a\u202eb", " a", "a "} {
		err := tick.CheckID(id)
		if !errors.Is(err, tick.ErrBadTick) {
			t.Errorf("CheckID(%.40q): %v, want ErrBadTick", id, err)
			continue
		}
		if strings.ContainsAny(err.Error(), "\n\r") || len(err.Error()) > 400 {
			t.Errorf("CheckID(%.40q): the message spans lines or is long: %q", id, err)
		}
	}
}
