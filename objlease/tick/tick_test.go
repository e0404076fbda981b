package tick_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/objlease/fence"
	"github.com/objlease/objlease/objlease/tick"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/mem"
)

var epoch = time.Date(2026, 12, 4, 2, 59, 50, 0, time.UTC)

// trigger is one delivery of a schedule's trigger: a client of its own, on
// a clock of its own.
func trigger(t *testing.T, store providers.Store, holder string, clk clock.Clock) *objlease.Lease {
	t.Helper()
	c, err := objlease.New(store, "jobs/nightly", objlease.Options{TTL: 30 * time.Second, Holder: holder, Clock: clk})
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
	c, err := objlease.New(store, "jobs/nightly", objlease.Options{TTL: 30 * time.Second, Holder: holder, Clock: clk})
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
	ran, prev, err := tick.Once(ctx, store, first, "T1", job)
	if err != nil || !ran || prev != nil {
		t.Fatalf("first trigger: ran %v, prev %+v, %v; want it to run", ran, prev, err)
	}
	first.Release(ctx)

	second := trigger(t, store, "b", clock.NewFake(epoch))
	ran, prev, err = tick.Once(ctx, store, second, "T1", job)
	if err != nil || ran || prev == nil || prev.Token != 1 || prev.Holder != "a" {
		t.Fatalf("second trigger of T1: ran %v, prev %+v, %v; want not run, done by token 1 of a", ran, prev, err)
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
	if m, err := tick.Last(ctx, store, dying.Key()); err != nil || m != nil {
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
	if m, _ := tick.Last(ctx, store, "jobs/nightly"); m == nil || m.Token != 2 {
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
