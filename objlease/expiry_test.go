package objlease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/objlease/fence"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/mem"
)

// TestJudgeIsInspectsRule: a record read elsewhere (a listing's Get) means
// for a Client exactly what its own read would, under either rule; later
// sightings of the same version count from the first, and a fenced
// object is never taken for a record.
func TestJudgeIsInspectsRule(t *testing.T) {
	ctx := context.Background()
	sc := &storeClock{now: time.Date(2030, 5, 5, 0, 0, 0, 0, time.UTC)}
	store := mem.New(mem.WithClock(sc.Now))
	if _, err := newClient(t, store, "dead", clock.NewFake(epoch)).TryAcquire(ctx); err != nil {
		t.Fatal(err)
	}
	rule := func(o *objlease.Options) { o.StoreClock, o.StoreClockMargin = true, time.Second }
	judge := func(c *objlease.Client) *objlease.Status {
		t.Helper()
		obj, err := store.Get(ctx, "jobs/nightly", objlease.MaxRecordSize)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := objlease.DecodeRecord("jobs/nightly", obj.Data)
		if err != nil {
			t.Fatal(err)
		}
		st, err := c.Judge(rec, obj.Attrs)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	for _, tc := range []struct {
		name    string
		age     time.Duration
		mod     []func(*objlease.Options)
		in      time.Duration
		byStore bool
		expired bool
	}{
		{"observed", 5 * time.Second, nil, 10*time.Second + 100*time.Millisecond, false, false},
		{"observed, old by the store", time.Hour, nil, 10*time.Second + 100*time.Millisecond, false, false},
		{"store clock, young", 5 * time.Second, []func(*objlease.Options){rule}, 6*time.Second + time.Nanosecond, true, false},
		{"store clock, old", time.Hour, []func(*objlease.Options){rule}, 0, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc.mu.Lock()
			sc.now = time.Date(2030, 5, 5, 0, 0, 0, 0, time.UTC).Add(tc.age)
			sc.mu.Unlock()
			judged := judge(newClient(t, store, "a", clock.NewFake(epoch), tc.mod...))
			inspected, err := newClient(t, store, "b", clock.NewFake(epoch), tc.mod...).Inspect(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, st := range []*objlease.Status{judged, inspected} {
				if st.ExpiresIn != tc.in || st.ByStoreClock != tc.byStore || st.Expired != tc.expired || !st.AgeByStore || st.Age != tc.age {
					t.Errorf("expires in %v (by the store's clock %v), expired %v, age %v (by store %v); want %v (%v), expired %v, age %v by the store",
						st.ExpiresIn, st.ByStoreClock, st.Expired, st.Age, st.AgeByStore, tc.in, tc.byStore, tc.expired, tc.age)
				}
			}
		})
	}

	// The same version judged again counts from its first sighting.
	clk := clock.NewFake(epoch)
	c := newClient(t, store, "c", clk)
	judge(c)
	clk.Advance(10*time.Second + 100*time.Millisecond)
	if st := judge(c); !st.Expired || st.ExpiresIn != 0 || st.ByStoreClock {
		t.Errorf("seen unchanged for TTL × (1 + drift): expired %v, expires in %v (by the store's clock %v)", st.Expired, st.ExpiresIn, st.ByStoreClock)
	}

	// A fenced object is data, not a record, whatever its bytes say.
	a := providers.Attrs{Key: "jobs/nightly", Version: "v", Metadata: map[string]string{fence.TokenKey: "4"}}
	if _, err := newClient(t, store, "d", clk).Judge(&objlease.Record{Token: 1, State: objlease.StateHeld, TTLMillis: 1000}, a); !errors.Is(err, objlease.ErrFencedObject) {
		t.Errorf("judging a fenced object: %v, want ErrFencedObject", err)
	}
}

// A record's age is never negative: S3's Last-Modified has one-second
// resolution, so it can be ahead of its Date.
func TestStatusAgeNeverNegative(t *testing.T) {
	now := time.Date(2030, 5, 5, 0, 0, 0, 300_000_000, time.UTC)
	a := providers.Attrs{Key: "jobs/nightly", Version: "v", LastModified: now.Add(time.Second).Truncate(time.Second), StoreTime: now}
	st, err := newClient(t, mem.New(), "a", clock.NewFake(epoch)).Judge(&objlease.Record{Token: 1, State: objlease.StateHeld, TTLMillis: 1000}, a)
	if err != nil {
		t.Fatal(err)
	}
	if st.Age != 0 || !st.AgeByStore {
		t.Errorf("age %v (by store %v), want 0 by the store", st.Age, st.AgeByStore)
	}
}
