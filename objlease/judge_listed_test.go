package objlease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/mem"
)

// listed returns the listing's attributes of key.
func listed(t *testing.T, store providers.Store, key string) providers.Attrs {
	t.Helper()
	p, err := store.List(context.Background(), key, "", 10)
	if err != nil || len(p.Objects) != 1 {
		t.Fatalf("list %q: %v, %v", key, p.Objects, err)
	}
	return p.Objects[0]
}

// judgeListed is c's judgement of a listing's sighting a.
func judgeListed(t *testing.T, c *objlease.Client, a providers.Attrs) *objlease.Status {
	t.Helper()
	st, err := c.Judge(nil, a)
	if err != nil {
		t.Fatalf("judge the listed %q: %v", a.Key, err)
	}
	return st
}

// TestJudgeCountsFromTheListing: a version a listing showed counts as
// seen from then on, so that a contender that lists often and reads late
// still takes over TTL × (1 + b) after the listing; a version it read is
// judged without a request; a new version starts the wait again.
func TestJudgeCountsFromTheListing(t *testing.T) {
	ctx := context.Background()
	store := mem.New()
	clk := clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	opts := objlease.Options{TTL: 10 * time.Second, DriftBound: 0.1}
	// The holder's clock never moves: it writes once and never renews, as
	// a holder that died.
	still := clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	holder, err := newOn(store, "k", objlease.SessionOptions{Clock: still}, objlease.Options{TTL: 10 * time.Second, DriftBound: 0.1, Holder: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := holder.TryAcquire(ctx); err != nil {
		t.Fatal(err)
	}
	opts.Holder = "b"
	c, err := newOn(store, "k", objlease.SessionOptions{Clock: clk}, opts)
	if err != nil {
		t.Fatal(err)
	}
	a := listed(t, store, "k")
	if st := judgeListed(t, c, a); st.Record != nil || st.Unchanged != 0 {
		t.Fatalf("first sighting in a listing: %+v, want no record (not read) and unchanged 0", st)
	}
	clk.Advance(6 * time.Second)
	if st := judgeListed(t, c, a); st.Record != nil || st.Unchanged != 6*time.Second {
		t.Fatalf("listed again: %+v, want no record and unchanged 6s", st)
	}
	st, err := c.Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := 5 * time.Second; st.ExpiresIn != want { // 11 s from the listing
		t.Fatalf("read 6 s after the listing: expires in %v, want %v (counted from the listing)", st.ExpiresIn, want)
	}
	clk.Advance(4 * time.Second)
	if st := judgeListed(t, c, a); st.Record == nil || st.ExpiresIn != time.Second || st.Unchanged != 10*time.Second {
		t.Fatalf("listed after the read: %+v, want the read's status expiring in 1s", st)
	}
	if _, err := c.TryAcquire(ctx); !errors.Is(err, objlease.ErrHeld) {
		t.Fatalf("take 10 s after the listing: %v, want ErrHeld", err)
	}
	clk.Advance(time.Second)
	if st := judgeListed(t, c, a); st.Record == nil || st.ExpiresIn != 0 {
		t.Fatalf("11 s after the listing: %+v, want expired", st)
	}
	taken, err := c.TryAcquire(ctx)
	if err != nil {
		t.Fatalf("take 11 s after the listing: %v", err)
	}
	defer taken.Release(ctx)

	// A new version is a new sighting: the wait starts again.
	other, err := newOn(store, "k", objlease.SessionOptions{Clock: clk}, objlease.Options{TTL: 10 * time.Second, DriftBound: 0.1, Holder: "c"})
	if err != nil {
		t.Fatal(err)
	}
	old := a
	a = listed(t, other.Store(), "k")
	if a.Version == old.Version {
		t.Fatal("the takeover did not change the version")
	}
	clk.Advance(3 * time.Second)
	if st := judgeListed(t, other, a); st.Record != nil || st.Unchanged != 0 {
		t.Fatalf("a version this client never saw: %+v, want a first sighting", st)
	}
	if st, err := other.Inspect(ctx); err != nil || st.ExpiresIn != 11*time.Second {
		t.Fatalf("read right after its first listing: %+v, %v; want the whole 11 s", st, err)
	}
}
