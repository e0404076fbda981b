package objlease_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/objlease/fence"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/mem"
)

// putRecord stores body at the test key, replacing what is there.
func putRecord(t *testing.T, s providers.Store, body string) providers.WriteResult {
	t.Helper()
	ctx := context.Background()
	a, err := s.Stat(ctx, "jobs/nightly")
	var res providers.WriteResult
	switch {
	case errors.Is(err, providers.ErrNotFound):
		res, err = s.Create(ctx, "jobs/nightly", []byte(body), nil)
	case err == nil:
		res, err = s.Replace(ctx, "jobs/nightly", []byte(body), nil, a.Version)
	}
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func unchanged(t *testing.T, s providers.Store, version string, body []byte) {
	t.Helper()
	obj, err := s.Get(context.Background(), "jobs/nightly", 0)
	if err != nil {
		t.Fatal(err)
	}
	if obj.Version != version || !bytes.Equal(obj.Data, body) {
		t.Fatalf("the object was changed: %s", obj.Data)
	}
}

// An object written through package fence at a lease key is data, not a
// lease record: every lease operation refuses it, naming what it is, and
// Force does not change that, however long it is seen unchanged.
func TestFencedObjectIsNotALeaseRecord(t *testing.T) {
	ctx := context.Background()
	m := mem.New()
	// The worst case: the fenced object's bytes are a valid released record.
	body := []byte(`{"objlease":1,"name":"jobs/nightly","token":3,"nonce":"n","state":"released","ttl_ms":10000,"written_at":"2026-01-01T00:00:00Z","renewals":0}`)
	res, err := fence.Put(ctx, m, "jobs/nightly", 7, body, fence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(epoch)
	c := newClient(t, m, "a", clk, func(o *objlease.Options) { o.Force = true })
	check := func(op string, err error) {
		t.Helper()
		var re *objlease.Error
		if !errors.Is(err, objlease.ErrFencedObject) || !errors.As(err, &re) || re.Key != "jobs/nightly" {
			t.Fatalf("%s: %v, want ErrFencedObject naming the key", op, err)
		}
		if msg := err.Error(); !strings.Contains(msg, `lease "jobs/nightly": object is a fenced data object (written through fence with token 7), not a lease record`) ||
			strings.Contains(msg, "use force") {
			t.Fatalf("%s: message %q", op, msg)
		}
		if errors.Is(err, objlease.ErrBadRecord) {
			t.Fatalf("%s: %v matches ErrBadRecord, which callers may force", op, err)
		}
	}
	for range 2 {
		_, err := c.TryAcquire(ctx)
		check("TryAcquire", err)
		_, err = c.Acquire(ctx) // permanent: must not wait
		check("Acquire", err)
		_, err = c.Break(ctx)
		check("Break", err)
		_, err = c.Inspect(ctx)
		check("Inspect", err)
		check("Release", c.Release(ctx))
		clk.Advance(time.Minute) // seen unchanged for long: still not a record
	}
	unchanged(t, m, res.Version, body)

	// A fenced tombstone is no record either.
	if err := fence.Delete(ctx, m, "jobs/nightly", 8, fence.Options{}); err != nil {
		t.Fatal(err)
	}
	_, err = c.TryAcquire(ctx)
	if !errors.Is(err, objlease.ErrFencedObject) || !strings.Contains(err.Error(), "token 8") {
		t.Fatalf("over a tombstone: %v", err)
	}
}

// A released record with the largest token cannot be taken: the next token
// would wrap to 0. Acquire and Break refuse, naming the key.
func TestTokenExhausted(t *testing.T) {
	ctx := context.Background()
	m := mem.New()
	body := fmt.Sprintf(`{"objlease":1,"name":"jobs/nightly","token":%d,"holder":"x","nonce":"n","state":"released","ttl_ms":10000,"written_at":"2026-01-01T00:00:00Z","renewals":0}`, uint64(math.MaxUint64))
	res := putRecord(t, m, body)
	c := newClient(t, m, "a", clock.NewFake(epoch))
	check := func(op string, err error) {
		t.Helper()
		if !errors.Is(err, objlease.ErrTokenExhausted) || !strings.Contains(err.Error(), `"jobs/nightly"`) {
			t.Fatalf("%s: %v, want ErrTokenExhausted naming the key", op, err)
		}
	}
	_, err := c.TryAcquire(ctx)
	check("TryAcquire", err)
	_, err = c.Acquire(ctx) // permanent: must not wait
	check("Acquire", err)
	_, err = c.Break(ctx)
	check("Break", err)
	unchanged(t, m, res.Version, []byte(body))

	// Forced over a foreign object whose token is the largest.
	foreign := fmt.Sprintf(`{"token":%d}`, uint64(math.MaxUint64))
	res = putRecord(t, m, foreign)
	clk := clock.NewFake(epoch)
	f := newClient(t, m, "f", clk, func(o *objlease.Options) { o.Force = true })
	_, _ = f.TryAcquire(ctx) // the first sight of the object starts the forced wait
	clk.Advance(time.Minute)
	_, err = f.TryAcquire(ctx)
	check("forced TryAcquire", err)
	_, err = f.Break(ctx)
	check("forced Break", err)
	unchanged(t, m, res.Version, []byte(foreign))
}

// Two processes whose SessionOptions.Rand have the same seed still write
// different nonces.
func TestNoncesUniqueWhateverTheSeed(t *testing.T) {
	ctx := context.Background()
	m := mem.New()
	var nonces []string
	for _, key := range []string{"jobs/a", "jobs/b"} {
		c, err := newOn(m, key, objlease.SessionOptions{Clock: clock.NewFake(epoch), Rand: rand.New(rand.NewPCG(1, 2))}, objlease.Options{TTL: 10 * time.Second, Holder: "same"})
		if err != nil {
			t.Fatal(err)
		}
		l, err := c.TryAcquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		nonces = append(nonces, l.Record().Nonce)
		l.Release(ctx)
	}
	if nonces[0] == nonces[1] {
		t.Fatalf("two clients seeded alike wrote the same nonce %s", nonces[0])
	}
}

// A's create meets a conflict (nothing written) while B, seeded like A,
// creates the record. A's re-read finds B's record: whatever its nonce, it
// is not A's write, and A must report the lease held by B.
func TestSameSeedRaceIsNotMistakenForOwnWrite(t *testing.T) {
	sameSeedRace(t)
}

// sameSeedRace is the race of TestSameSeedRaceIsNotMistakenForOwnWrite.
func sameSeedRace(t *testing.T) {
	ctx := context.Background()
	m, hs := newMem()
	clk := clock.NewFake(epoch)
	seeded := objlease.SessionOptions{Clock: clk, Rand: rand.New(rand.NewPCG(7, 7))}
	a := newClientOn(t, hs, "a", seeded)
	seeded.Rand = rand.New(rand.NewPCG(7, 7))
	b := newClientOn(t, m, "b", seeded)
	var lb *objlease.Lease
	hs.setHooks(func(op, key string) error {
		if op == "create" && lb == nil {
			var err error
			if lb, err = b.TryAcquire(ctx); err != nil {
				t.Error(err)
			}
			return providers.Wrap(op, key, providers.ErrConflict, nil)
		}
		return nil
	}, nil)
	la, err := a.TryAcquire(ctx)
	if err == nil {
		t.Fatalf("a and b both hold token %d (nonces %s, %s)", la.Token(), la.Record().Nonce, lb.Record().Nonce)
	}
	var he *objlease.Error
	if !errors.Is(err, objlease.ErrHeld) || !errors.As(err, &he) || he.Record.Holder != "b" {
		t.Fatalf("%v, want held by b", err)
	}
	lb.Release(ctx)
}

// A holds token 1; the record is deleted by hand and B creates token 1.
// A's Release must not mark B's record released (C could then take it
// while B still holds it): B's record carries none of A's writes.
func TestReleaseLeavesARecreatedRecordAlone(t *testing.T) {
	ctx := context.Background()
	m := mem.New()
	clk := clock.NewFake(epoch)
	a := newClient(t, m, "a", clk)
	la, err := a.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	obj, _ := m.Get(ctx, "jobs/nightly", 0)
	if err := m.Delete(ctx, "jobs/nightly", obj.Version); err != nil {
		t.Fatal(err)
	}
	b := newClient(t, m, "b", clk)
	lb, err := b.TryAcquire(ctx)
	if err != nil || lb.Token() != 1 {
		t.Fatalf("b: %v", err)
	}
	defer lb.Release(ctx)
	err = la.Release(ctx)
	if !errors.Is(err, objlease.ErrLeaseLost) {
		t.Fatalf("a's release over b's record: %v, want ErrLeaseLost", err)
	}
	if rec := readRecord(t, m); rec.State != objlease.StateHeld || rec.Holder != "b" {
		t.Fatalf("b's record was changed: %+v", rec)
	}
	c := newClient(t, m, "c", clk)
	if _, err := c.TryAcquire(ctx); !errors.Is(err, objlease.ErrHeld) {
		t.Fatalf("c: %v, want ErrHeld while b holds the lease", err)
	}
}

// A renewal whose outcome could not be resolved may land after all; the
// release that follows recognises it as this lease's own write and
// releases over it.
func TestReleaseOverAbandonedRenewal(t *testing.T) {
	ctx := context.Background()
	m, hs := newMem()
	clk := clock.NewFake(epoch)
	a := newClient(t, hs, "a", clk)
	l, err := a.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The renewal lands, its reply is lost, and the store is unreadable
	// until the renewal gives up.
	var reads atomic.Bool
	hs.setHooks(func(op, key string) error {
		if op == "get" && !reads.Load() {
			return providers.Wrap(op, key, providers.ErrThrottled, nil)
		}
		return nil
	}, func(op, key string, err error) error {
		if op == "replace" && err == nil && !reads.Load() {
			return providers.Wrap(op, key, providers.ErrUnknownOutcome, nil)
		}
		return err
	})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- l.Renew(rctx) }()
	waitTimers(t, clk, 3) // the renewal backs off between re-reads
	cancel()
	if err := <-done; !errors.Is(err, objlease.ErrAmbiguous) {
		t.Fatalf("renew: %v, want ErrAmbiguous", err)
	}
	reads.Store(true)
	if rec := readRecord(t, m); rec.Renewals != 1 {
		t.Fatalf("the renewal did not land: %+v", rec)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("release over this lease's own renewal: %v", err)
	}
	if rec := readRecord(t, m); rec.State != objlease.StateReleased || rec.Token != 1 {
		t.Fatalf("after release: %+v", rec)
	}
}

// A bad object (here: a record of a newer schema, whose holder renews it;
// a record whose token went back) may be a live holder's: Force replaces
// it only once it has been seen unchanged for its TTL × (1 + b), and then
// above the highest token known.
func TestForceWaitsOutABadObject(t *testing.T) {
	ctx := context.Background()
	t.Run("newer schema", func(t *testing.T) {
		m := mem.New()
		newer := `{"objlease":2,"name":"jobs/nightly","token":9,"holder":"new","ttl_ms":5000,"renewals":%d}`
		putRecord(t, m, fmt.Sprintf(newer, 0))
		clk := clock.NewFake(epoch)
		f := newClient(t, m, "f", clk, func(o *objlease.Options) { o.Force = true })
		var he *objlease.Error
		if _, err := f.TryAcquire(ctx); !errors.Is(err, objlease.ErrHeld) || !errors.As(err, &he) || he.Wait != 5050*time.Millisecond || he.Record.Token != 9 ||
			!errors.Is(err, objlease.ErrHeld) || !strings.Contains(err.Error(), "schema 2") {
			t.Fatalf("first sight: %v (%+v), want to wait its own ttl_ms × 1.01 = 5.05s", err, he)
		}
		// Its holder renews: the count starts again.
		clk.Advance(4 * time.Second)
		putRecord(t, m, fmt.Sprintf(newer, 1))
		clk.Advance(2 * time.Second)
		if _, err := f.TryAcquire(ctx); !errors.Is(err, objlease.ErrHeld) || !errors.As(err, &he) || he.Wait != 5050*time.Millisecond {
			t.Fatalf("after a renewal: %v, want the full wait again", err)
		}
		clk.Advance(5049 * time.Millisecond)
		if _, err := f.TryAcquire(ctx); !errors.Is(err, objlease.ErrHeld) {
			t.Fatalf("1 ms early: %v, want ErrHeld", err)
		}
		clk.Advance(time.Millisecond)
		l, err := f.TryAcquire(ctx)
		if err != nil || l.Token() != 10 {
			t.Fatalf("after the wait: %v, %v; want token 10", l, err)
		}
		l.Release(ctx)
	})
	t.Run("token went back", func(t *testing.T) {
		m := mem.New()
		clk := clock.NewFake(epoch)
		f := newClient(t, m, "f", clk, func(o *objlease.Options) { o.Force = true })
		for range 5 {
			l, err := f.TryAcquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			l.Release(ctx)
		}
		putRecord(t, m, `{"objlease":1,"name":"jobs/nightly","token":2,"holder":"x","nonce":"x","state":"held","ttl_ms":10000,"written_at":"2026-01-01T00:00:00Z","renewals":0}`)
		var he *objlease.Error
		if _, err := f.TryAcquire(ctx); !errors.Is(err, objlease.ErrHeld) || !errors.As(err, &he) || he.Wait != 10100*time.Millisecond || !strings.Contains(err.Error(), "token went back from 5 to 2") {
			t.Fatalf("first sight: %v", err)
		}
		clk.Advance(he.Wait)
		l, err := f.TryAcquire(ctx)
		if err != nil || l.Token() != 6 {
			t.Fatalf("after the wait: %v, %v; want token 6 (above the highest seen)", l, err)
		}
		l.Release(ctx)
	})
	t.Run("foreign object", func(t *testing.T) {
		m := mem.New()
		putRecord(t, m, "leader=host-a\n")
		clk := clock.NewFake(epoch)
		// It shows no token: only the word that none was issued lets
		// Force start from 1 (see TestForceNeverSendsTheTokenBack).
		f := newClient(t, m, "f", clk, func(o *objlease.Options) { o.Force, o.MinToken = true, new(uint64(0)) })
		var he *objlease.Error
		if _, err := f.TryAcquire(ctx); !errors.Is(err, objlease.ErrHeld) || !errors.As(err, &he) || he.Wait != 10100*time.Millisecond {
			t.Fatalf("first sight: %v, want to wait this client's TTL × 1.01", err)
		}
		clk.Advance(he.Wait)
		l, err := f.TryAcquire(ctx)
		if err != nil || l.Token() != 1 {
			t.Fatalf("after the wait: %v, %v", l, err)
		}
		l.Release(ctx)
	})
}

// Force never sends the token back. A record that reached token 5 was
// overwritten by something else: a forcing client refuses to start again
// from 1 (a paused holder with token 5 would then write over the new
// holder's fenced data, which would refuse the new holder) unless
// something shows the highest token: the object's own token, what the
// client has seen, a floor given, or a fenced object the lease guards. It
// continues above the highest of them, Break and Acquire alike, and
// Acquire still waits the bad object out first.
func TestForceNeverSendsTheTokenBack(t *testing.T) {
	ctx := context.Background()
	const (
		token5  = `{"objlease":1,"name":"jobs/nightly","token":5,"holder":"old","nonce":"n","state":"held","ttl_ms":10000,"written_at":"2026-01-01T00:00:00Z","renewals":0}`
		foreign = "leader=host-a\n"
	)
	for _, tc := range []struct {
		name    string
		body    string // what overwrote the record
		seen    bool   // the forcing client read the record at token 5 first
		floor   *uint64
		fenced  map[string]uint64 // fenced objects named, with their tokens (0: named but absent)
		want    uint64            // 0: refused with ErrTokenUnknown
		mention string            // what the refusal names
	}{
		{name: "nothing shows a token", body: foreign, mention: "MinToken"},
		{name: "a floor", body: foreign, floor: new(uint64(5)), want: 6},
		{name: "a floor of 0 says no token was issued", body: foreign, floor: new(uint64(0)), want: 1},
		{name: "a fenced object", body: foreign, fenced: map[string]uint64{"out/a": 7, "out/b": 3}, want: 8},
		{name: "a named fenced object is absent", body: foreign, fenced: map[string]uint64{"out/a": 7, "out/none": 0}, mention: `"out/none"`},
		{name: "the client saw token 5", body: foreign, seen: true, want: 6},
		{name: "the object still carries a token", body: `{"token": 9, "note": "not a lease"}`, want: 10},
		{name: "the object's token is below a floor", body: `{"token": 3}`, floor: new(uint64(5)), want: 6},
		{name: "the object's token is below a fenced object", body: `{"token": 3}`, fenced: map[string]uint64{"out/a": 7}, want: 8},
	} {
		for _, op := range []string{"Break", "Acquire"} {
			t.Run(tc.name+"/"+op, func(t *testing.T) {
				m := mem.New()
				clk := clock.NewFake(epoch)
				var keys []string
				for k, tok := range tc.fenced {
					keys = append(keys, k)
					if tok > 0 {
						if _, err := fence.Put(ctx, m, k, tok, []byte("data"), fence.Options{}); err != nil {
							t.Fatal(err)
						}
					}
				}
				f := newClient(t, m, "f", clk, func(o *objlease.Options) {
					o.Force, o.MinToken, o.FencedKeys = true, tc.floor, keys
				})
				putRecord(t, m, token5)
				if tc.seen {
					if _, err := f.Inspect(ctx); err != nil {
						t.Fatal(err)
					}
				}
				res := putRecord(t, m, tc.body)

				var tok uint64
				var err error
				if op == "Break" {
					tok, err = f.Break(ctx)
				} else {
					var he *objlease.Error
					var l *objlease.Lease
					l, err = f.TryAcquire(ctx)
					if errors.Is(err, objlease.ErrHeld) && errors.As(err, &he) {
						if he.Reason == "" || he.Wait != 10100*time.Millisecond {
							t.Fatalf("first sight: %v, want to wait the bad object out for 10.1s", err)
						}
						clk.Advance(he.Wait - time.Millisecond)
						if _, err := f.TryAcquire(ctx); !errors.Is(err, objlease.ErrHeld) {
							t.Fatalf("1 ms early: %v, want ErrHeld", err)
						}
						clk.Advance(time.Millisecond)
						l, err = f.TryAcquire(ctx)
					}
					if err == nil {
						tok = l.Token()
						defer l.Release(ctx)
					}
				}

				if tc.want == 0 {
					if err == nil {
						t.Fatalf("%s wrote token %d over a lease whose token had reached 5; want ErrTokenUnknown", op, tok)
					}
					if !errors.Is(err, objlease.ErrTokenUnknown) || !objlease.IsPermanent(err) ||
						!strings.Contains(err.Error(), `"jobs/nightly"`) || !strings.Contains(err.Error(), tc.mention) {
						t.Fatalf("%s: %v, want a permanent ErrTokenUnknown naming the key and %s", op, err, tc.mention)
					}
					if op == "Acquire" {
						actx, cancel := context.WithTimeout(ctx, 5*time.Second)
						defer cancel()
						if _, err := f.Acquire(actx); !errors.Is(err, objlease.ErrTokenUnknown) {
							t.Fatalf("Acquire: %v, want ErrTokenUnknown at once", err)
						}
					}
					unchanged(t, m, res.Version, []byte(tc.body))
					return
				}
				if err != nil || tok != tc.want {
					t.Fatalf("%s: token %d, %v; want token %d", op, tok, err, tc.want)
				}
				if rec := readRecord(t, m); rec.Token != tc.want {
					t.Fatalf("record after %s: %+v, want token %d", op, rec, tc.want)
				}
			})
		}
	}
}

// The floor and the fenced objects apply to every token a client issues,
// not only over a bad object: a lease recreated after its record was
// deleted continues above them.
func TestTokenFloorAppliesToEveryNewToken(t *testing.T) {
	ctx := context.Background()
	m := mem.New()
	if _, err := fence.Put(ctx, m, "out/a", 7, []byte("data"), fence.Options{}); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, m, "a", clock.NewFake(epoch), func(o *objlease.Options) { o.FencedKeys = []string{"out/a"} })
	l, err := c.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l.Token() != 8 {
		t.Fatalf("created with token %d, want 8, above the fenced object's", l.Token())
	}
	l.Release(ctx)
	c = newClient(t, m, "b", clock.NewFake(epoch), func(o *objlease.Options) { o.MinToken = new(uint64(20)) })
	if tok, err := c.Break(ctx); err != nil || tok != 21 {
		t.Fatalf("break over token 8 with a floor of 20: %d, %v; want 21", tok, err)
	}
}

func TestTokenEvidenceOptionsValidated(t *testing.T) {
	m := mem.New()
	for _, tc := range []struct {
		keys []string
		want string
	}{
		{[]string{"out/a", ""}, "FencedKeys has an empty key"},
		{[]string{"jobs/nightly"}, `FencedKeys names the lease's own key "jobs/nightly"`},
	} {
		_, err := objlease.New(m, "jobs/nightly", objlease.Options{FencedKeys: tc.keys})
		if !errors.Is(err, objlease.ErrInvalidOptions) || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("FencedKeys %q: %v, want ErrInvalidOptions saying %q", tc.keys, err, tc.want)
		}
	}
}

// Work tied to the lease's context must have been told to stop before the
// released record is written, which is when anyone else may acquire.
func TestReleaseEndsContextBeforeWriting(t *testing.T) {
	ctx := context.Background()
	_, hs := newMem()
	clk := clock.NewFake(epoch)
	l, err := newClient(t, hs, "a", clk).TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var causeAtWrite error
	var once sync.Once
	hs.setHooks(func(op, key string) error {
		if op == "replace" {
			once.Do(func() {
				causeAtWrite = context.Cause(l.Context())
				if l.ValidFor() > 0 {
					t.Error("ValidFor positive while releasing")
				}
			})
		}
		return nil
	}, nil)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(causeAtWrite, objlease.ErrReleased) {
		t.Fatalf("when the released record was written the lease's context cause was %v, want ErrReleased", causeAtWrite)
	}
	if !errors.Is(l.Err(), objlease.ErrReleased) || !errors.Is(context.Cause(l.Context()), objlease.ErrReleased) {
		t.Fatalf("after release: Err %v, cause %v", l.Err(), context.Cause(l.Context()))
	}
}

func TestTTLMustBeWholeMillisecondsAndRenewable(t *testing.T) {
	m := mem.New()
	for _, tc := range []struct {
		name string
		o    objlease.Options
		want string
	}{
		{"fraction of a millisecond", objlease.Options{TTL: 150900 * time.Microsecond}, "TTL 150.9ms is not a whole number of milliseconds, as the record stores it (try 150ms)"},
		{"too short to renew in", objlease.Options{TTL: time.Millisecond}, "TTL 1ms is too short: the lease could not be renewed in time: a TTL must be from 100ms to 8784h0m0s"},
		{"renewing too often", objlease.Options{TTL: time.Second, RenewInterval: 5 * time.Millisecond}, "RenewInterval 5ms is below 10ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := objlease.New(m, "k", tc.o); !errors.Is(err, objlease.ErrInvalidOptions) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v, want ErrInvalidOptions saying %q", err, tc.want)
			}
		})
	}
	for _, ttl := range []time.Duration{objlease.MinTTL, 1234 * time.Millisecond, objlease.MaxTTL} {
		if _, err := objlease.New(m, "k", objlease.Options{TTL: ttl}); err != nil {
			t.Fatalf("TTL %v: %v", ttl, err)
		}
	}
}

// lateStore delays the first Replace (or Create) after arm: it reports an
// unknown outcome without applying it, and applies it just before the
// next write of the key, as a request stuck in the network that lands late.
type lateStore struct {
	providers.Store
	mu      sync.Mutex
	armed   string // "create" or "replace"
	pending func()
}

func (s *lateStore) arm(op string) { s.mu.Lock(); s.armed = op; s.mu.Unlock() }

func (s *lateStore) write(op string, do func() (providers.WriteResult, error), key string) (providers.WriteResult, error) {
	s.mu.Lock()
	if s.pending != nil {
		s.pending()
		s.pending = nil
	} else if s.armed == op {
		s.armed = ""
		s.pending = func() { _, _ = do() }
		s.mu.Unlock()
		return providers.WriteResult{}, providers.Wrap(op, key, providers.ErrUnknownOutcome, errors.New("timeout"))
	}
	s.mu.Unlock()
	return do()
}

func (s *lateStore) Create(ctx context.Context, key string, data []byte, md map[string]string) (providers.WriteResult, error) {
	return s.write("create", func() (providers.WriteResult, error) { return s.Store.Create(ctx, key, data, md) }, key)
}

func (s *lateStore) Replace(ctx context.Context, key string, data []byte, md map[string]string, v string) (providers.WriteResult, error) {
	return s.write("replace", func() (providers.WriteResult, error) { return s.Store.Replace(ctx, key, data, md, v) }, key)
}

// A write whose outcome was unknown is retried after the re-read found the
// record unchanged; the first attempt then lands and the retry is refused.
// That refusal is this holder's own write, not a lost lease.
func TestLateFirstAttemptIsOwnWrite(t *testing.T) {
	ctx := context.Background()
	m := mem.New()
	s := &lateStore{Store: m}
	clk := clock.NewFake(epoch)
	c := newClient(t, s, "a", clk)
	s.arm("create")
	l, err := c.TryAcquire(ctx)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	if rec := readRecord(t, m); rec.Holder != "a" || rec.Token != 1 || l.Token() != 1 {
		t.Fatalf("after acquire: %+v", rec)
	}
	s.arm("replace")
	clk.Advance(time.Second)
	if err := l.Renew(ctx); err != nil {
		t.Fatalf("renew: %v", err)
	}
	if rec := readRecord(t, m); rec.Renewals != 1 || l.Err() != nil {
		t.Fatalf("after renew: %+v, lease %v", rec, l.Err())
	}
	// The lease goes on: the next renewal writes over the late write.
	if err := l.Renew(ctx); err != nil {
		t.Fatalf("second renew: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// The release lands, its reply is lost, and a contender takes the released
// lease before the re-read. The release happened: it must not be reported
// as a lost lease.
func TestLandedReleaseTakenOverIsReleased(t *testing.T) {
	ctx := context.Background()
	m, hs := newMem()
	clk := clock.NewFake(epoch)
	l, err := newClient(t, hs, "a", clk).TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b := newClient(t, m, "b", clk)
	var lb *objlease.Lease
	hs.setHooks(nil, func(op, key string, err error) error {
		if op == "replace" && err == nil && lb == nil {
			if lb, err = b.TryAcquire(ctx); err != nil {
				t.Error(err)
			}
			return providers.Wrap(op, key, providers.ErrUnknownOutcome, errors.New("connection reset"))
		}
		return err
	})
	if err := l.Release(ctx); err != nil {
		t.Fatalf("release: %v, want success: it landed", err)
	}
	if !errors.Is(l.Err(), objlease.ErrReleased) {
		t.Fatalf("lease err %v", l.Err())
	}
	if lb == nil || lb.Token() != 2 {
		t.Fatal("b did not take over")
	}
	lb.Release(ctx)
}

// A release refused because the lease was broken is a lost lease, even when
// a reply was lost on the way: the broken record (the next token, no
// holder) cannot follow a release.
func TestReleaseAfterBreakIsLost(t *testing.T) {
	ctx := context.Background()
	m, hs := newMem()
	clk := clock.NewFake(epoch)
	l, err := newClient(t, hs, "a", clk).TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newClient(t, m, "op", clk).Break(ctx); err != nil {
		t.Fatal(err)
	}
	lostReply(hs, "replace", false, providers.ErrUnknownOutcome)
	if err := l.Release(ctx); !errors.Is(err, objlease.ErrLeaseLost) {
		t.Fatalf("release after a break: %v, want ErrLeaseLost", err)
	}
}

// A release that landed, whose reply was lost, after which two more holders
// came and went before the re-read, is a release: within the holder's
// validity nothing but its own release lets anyone acquire.
func TestLandedReleaseThenTwoHoldersIsReleased(t *testing.T) {
	ctx := context.Background()
	m, hs := newMem()
	clk := clock.NewFake(epoch)
	l, err := newClient(t, hs, "a", clk).TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The release lands; before its re-read, b acquires and releases and c
	// acquires.
	var lc *objlease.Lease
	hs.setHooks(nil, func(op, key string, err error) error {
		if op == "replace" && err == nil && lc == nil {
			lb, berr := newClient(t, m, "b", clk).TryAcquire(ctx)
			if berr != nil {
				t.Fatalf("b: %v", berr)
			}
			if berr := lb.Release(ctx); berr != nil {
				t.Fatalf("b release: %v", berr)
			}
			if lc, berr = newClient(t, m, "c", clk).TryAcquire(ctx); berr != nil || lc.Token() != 3 {
				t.Fatalf("c: %v", berr)
			}
			return providers.Wrap(op, key, providers.ErrUnknownOutcome, errors.New("connection reset"))
		}
		return err
	})
	if err := l.Release(ctx); err != nil {
		t.Fatalf("release that landed: %v, want nil", err)
	}
	lc.Release(ctx)
}

// lateRenewalStore lets a test script one renewal whose first attempt
// reaches the store only after its retry was throttled, and reads that
// fail.
type lateRenewalStore struct {
	providers.Store
	mu       sync.Mutex
	armed    bool   // the next replace's reply is lost; it lands later
	pending  func() // that replace, applied when the next replace is throttled
	badReads int    // reads still to fail, throttled
}

func (s *lateRenewalStore) Replace(ctx context.Context, key string, data []byte, md map[string]string, v string) (providers.WriteResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.armed:
		s.armed = false
		s.pending = func() { s.Store.Replace(context.Background(), key, data, md, v) }
		return providers.WriteResult{}, providers.Wrap("replace", key, providers.ErrUnknownOutcome, errors.New("timeout"))
	case s.pending != nil:
		s.pending()
		s.pending = nil
		return providers.WriteResult{}, providers.Wrap("replace", key, providers.ErrThrottled, errors.New("slow down"))
	}
	return s.Store.Replace(ctx, key, data, md, v)
}

func (s *lateRenewalStore) Get(ctx context.Context, key string, max int64) (*providers.Object, error) {
	s.mu.Lock()
	if s.badReads > 0 {
		s.badReads--
		s.mu.Unlock()
		return nil, providers.Wrap("get", key, providers.ErrThrottled, errors.New("slow down"))
	}
	s.mu.Unlock()
	return s.Store.Get(ctx, key, max)
}

// A renewal's first attempt lands only after its retry was throttled; the
// next renewal, refused over the version that write moved on, reads the
// record to find its own write there, and the first read fails. A failed
// read says nothing of whose write is there: the holder reads again, finds
// its own write and renews over it, rather than report the lease lost.
func TestLateRenewalFoundDespiteFailedRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		s := &lateRenewalStore{Store: mem.New()}
		clk := clock.NewFake(epoch)
		l, err := newClient(t, s, "a", clk).TryAcquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s.mu.Lock()
		s.armed = true
		s.mu.Unlock()
		if err := l.Renew(ctx); !errors.Is(err, providers.ErrThrottled) {
			t.Fatalf("renew: %v, want the retry's throttling", err)
		}
		s.mu.Lock()
		s.badReads = 1
		s.mu.Unlock()
		done := make(chan error, 1)
		go func() { done <- l.Renew(ctx) }()
		synctest.Wait()
		for i := 0; i < 20 && len(done) == 0; i++ {
			clk.Advance(100 * time.Millisecond)
			synctest.Wait()
		}
		if err := <-done; err != nil || l.Err() != nil {
			t.Errorf("second renew: %v (lease: %v), want it to renew over its own late write", err, l.Err())
			return
		}
		if rec := readRecord(t, s.Store); rec.Holder != "a" || rec.Nonce != l.Record().Nonce {
			t.Errorf("record %+v, want a's second renewal", rec)
		}
		if err := l.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// The re-reads that look for a late own write stop when the lease's
// validity ends, even under a Renew whose context never does: reads that
// keep failing cannot hold the renewal past the lease.
func TestLateRenewalSearchEndsWithValidity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &lateRenewalStore{Store: mem.New()}
		clk := clock.NewFake(epoch)
		l, err := newClient(t, s, "a", clk).TryAcquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		s.mu.Lock()
		s.armed = true
		s.mu.Unlock()
		if err := l.Renew(context.Background()); !errors.Is(err, providers.ErrThrottled) {
			t.Fatalf("renew: %v, want the retry's throttling", err)
		}
		s.mu.Lock()
		s.badReads = 1 << 30 // never recovers
		s.mu.Unlock()
		done := make(chan error, 1)
		go func() { done <- l.Renew(context.Background()) }()
		synctest.Wait()
		for i := 0; i < 300 && len(done) == 0; i++ { // 30 s; TTL 10 s
			clk.Advance(100 * time.Millisecond)
			synctest.Wait()
		}
		select {
		case err := <-done:
			if !errors.Is(err, objlease.ErrLeaseLost) {
				t.Errorf("renew after the validity ended: %v, want ErrLeaseLost", err)
			}
		default:
			t.Fatal("renew still re-reading 20 s after the lease's validity ended")
		}
	})
}
