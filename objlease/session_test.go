package objlease_test

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/mem"
)

// Close releases every lease of the session (the next holder takes over
// at once, with a higher token), ends its waiters, stops its scheduler,
// and leaves its clients refusing with ErrSessionClosed.
func TestSessionCloseReleasesAndRefuses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clock.NewFake(epoch)
		store := mem.New()
		sess := newSession(t, store, clk)
		before := bubbleGoroutines()
		leases := holdMany(t, sess, 3)
		waiter, err := sess.Client(leases[0].Key(), objlease.Options{TTL: 10 * time.Second, Holder: "waiter"})
		if err != nil {
			t.Fatal(err)
		}
		waited := make(chan error, 1)
		waiter.AcquireFunc(context.Background(), func(l *objlease.Lease, err error) { waited <- err })
		step(clk, 5*time.Second, nil)
		if err := sess.Close(context.Background()); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := <-waited; !errors.Is(err, objlease.ErrSessionClosed) {
			t.Errorf("waiter ended with %v, want ErrSessionClosed", err)
		}
		for i, l := range leases {
			if err := l.Err(); !errors.Is(err, objlease.ErrReleased) {
				t.Errorf("lease %d: Err() = %v after Close, want ErrReleased", i, err)
			}
			other, err := newOn(store, l.Key(), objlease.SessionOptions{Clock: clk}, objlease.Options{TTL: 10 * time.Second, Holder: "next"})
			if err != nil {
				t.Fatal(err)
			}
			nl, err := other.TryAcquire(context.Background())
			if err != nil {
				t.Fatalf("lease %d not free after Close: %v", i, err)
			}
			if nl.Token() <= l.Token() {
				t.Errorf("lease %d: next token %d, want above %d", i, nl.Token(), l.Token())
			}
			if err := nl.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		if n := bubbleGoroutines(); n > before {
			t.Errorf("%d goroutines after Close, %d before the session held anything: its scheduler still runs", n, before)
		}

		c, err := sess.Client("leases/new", objlease.Options{})
		if !errors.Is(err, objlease.ErrSessionClosed) {
			t.Errorf("Client after Close: %v, want ErrSessionClosed", err)
		}
		if c != nil {
			t.Error("Client after Close returned a client")
		}
		if _, err := waiter.TryAcquire(context.Background()); !errors.Is(err, objlease.ErrSessionClosed) {
			t.Errorf("TryAcquire after Close: %v, want ErrSessionClosed", err)
		}
		if _, err := waiter.Acquire(context.Background()); !errors.Is(err, objlease.ErrSessionClosed) {
			t.Errorf("Acquire after Close: %v, want ErrSessionClosed", err)
		}
		if _, err := waiter.Inspect(context.Background()); !errors.Is(err, objlease.ErrSessionClosed) {
			t.Errorf("Inspect after Close: %v, want ErrSessionClosed", err)
		}
		if _, err := waiter.Break(context.Background()); !errors.Is(err, objlease.ErrSessionClosed) {
			t.Errorf("Break after Close: %v, want ErrSessionClosed", err)
		}
		late := make(chan error, 1)
		waiter.AcquireFunc(context.Background(), func(_ *objlease.Lease, err error) { late <- err })
		if err := <-late; !errors.Is(err, objlease.ErrSessionClosed) {
			t.Errorf("AcquireFunc after Close: %v, want ErrSessionClosed", err)
		}
		if err := sess.Close(context.Background()); err != nil {
			t.Errorf("second Close: %v", err)
		}
	})
}

// A lease that Close cannot release still ends, so that nothing of the
// session keeps running, and Close says why: here a Renew of the caller's
// hangs in a store that stopped answering, and Close's context ends while
// the release waits for it.
func TestSessionCloseEndsLeaseItCannotRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clock.NewFake(epoch)
		store := newWriteLog(mem.New(), clk)
		sess := newSession(t, store, clk)
		l := holdMany(t, sess, 1)[0]
		store.stuck = func(string) bool { return true }
		renewCtx, stopRenew := context.WithCancel(context.Background())
		renewed := make(chan error, 1)
		go func() { renewed <- l.Renew(renewCtx) }()
		synctest.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := sess.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Close: %v, want the release's context.DeadlineExceeded", err)
		}
		if err := l.Err(); !errors.Is(err, objlease.ErrLeaseLost) || !errors.Is(err, objlease.ErrSessionClosed) {
			t.Errorf("lease Err() = %v after Close could not release it, want ErrLeaseLost and ErrSessionClosed", err)
		}
		stopRenew()
		<-renewed
	})
}

// Clients of one session run on its clock and log to its logger, which
// the session reports to the recipes built on it.
func TestSessionClientsRunOnSessionClock(t *testing.T) {
	if _, err := objlease.NewSession(nil, objlease.SessionOptions{}); !errors.Is(err, objlease.ErrInvalidOptions) {
		t.Fatalf("NewSession(nil): %v, want ErrInvalidOptions", err)
	}
	clk := clock.NewFake(epoch)
	log := slog.New(slog.DiscardHandler)
	sess, err := objlease.NewSession(mem.New(), objlease.SessionOptions{Clock: clk, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close(context.Background()) })
	c, err := sess.Client("leases/a", objlease.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Session() != sess || sess.Clock() != clk || sess.Logger() != log {
		t.Fatalf("client's session, clock or logger is not the session's")
	}
	own, err := objlease.New(mem.New(), "leases/a", objlease.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if own.Session() == nil || own.Session() == sess || own.Session().Clock() == nil || own.Session().Logger() == nil {
		t.Fatalf("a client from New has no session of its own with defaults")
	}
}

// A session's seed makes its clients' jitter reproducible: two sessions
// seeded alike renew the leases of clients made in the same order at the
// same instants, each client with a source of its own.
func TestSessionSeedMakesJitterReproducible(t *testing.T) {
	renewals := func(seed uint64) []time.Duration {
		var at []time.Duration
		synctest.Test(t, func(t *testing.T) {
			clk := clock.NewFake(epoch)
			store := newWriteLog(mem.New(), clk)
			sess, err := objlease.NewSession(store, objlease.SessionOptions{Clock: clk, Rand: rand.New(rand.NewPCG(seed, 1))})
			if err != nil {
				t.Fatal(err)
			}
			defer sess.Close(context.Background())
			holdMany(t, sess, 8)
			step(clk, 5*time.Second, nil)
			for i := range 8 {
				w := store.times(fmt.Sprintf("leases/%02d", i))
				if len(w) < 2 {
					t.Fatalf("lease %d: %d writes in 5 s, want a renewal", i, len(w))
				}
				at = append(at, w[1].at)
			}
		})
		return at
	}
	a, b, other := renewals(1), renewals(1), renewals(2)
	if !slices.Equal(a, b) {
		t.Fatalf("first renewals with one seed: %v, then %v", a, b)
	}
	if slices.Equal(a, other) {
		t.Fatalf("first renewals with seeds 1 and 2 alike: %v", a)
	}
	if slices.Equal(a[:4], a[4:]) {
		t.Fatalf("first renewals repeat from client to client: %v", a)
	}
}

// Two sessions on one store and clock share nothing: closing one leaves
// the other's leases renewing.
func TestSessionsAreIndependent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clock.NewFake(epoch)
		store := mem.New()
		a, b := newSession(t, store, clk), newSession(t, store, clk)
		la := holdMany(t, a, 1)[0]
		cb, err := b.Client("leases/b", objlease.Options{TTL: 10 * time.Second, RenewInterval: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		lb, err := cb.TryAcquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		step(clk, 30*time.Second, nil)
		if err := lb.Err(); err != nil {
			t.Errorf("b's lease ended when a closed: %v", err)
		}
		if !errors.Is(la.Err(), objlease.ErrReleased) {
			t.Errorf("a's lease: %v, want released", la.Err())
		}
		if err := b.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

func ExampleSession() {
	ctx := context.Background()
	store := mem.New() // or providers.Open(ctx, "s3://bucket/leases")

	// One session renews every lease the process holds through it.
	sess, err := objlease.NewSession(store, objlease.SessionOptions{})
	if err != nil {
		panic(err)
	}
	for _, tenant := range []string{"acme", "globex"} {
		c, err := sess.Client("leases/tenant-"+tenant, objlease.Options{TTL: 30 * time.Second, Holder: "worker-1"})
		if err != nil {
			panic(err)
		}
		lease, err := c.Acquire(ctx)
		if err != nil {
			panic(err)
		}
		fmt.Println(tenant, "token", lease.Token())
	}
	// Closing the session releases both leases.
	if err := sess.Close(ctx); err != nil {
		panic(err)
	}
	// Output:
	// acme token 1
	// globex token 1
}

// bubbleGoroutines counts the goroutines of synctest bubbles: those of
// this test's bubble, and none that an earlier test left to wind down
// outside one.
func bubbleGoroutines() int {
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	for n == len(buf) {
		buf = make([]byte, 2*len(buf))
		n = runtime.Stack(buf, true)
	}
	count := 0
	for line := range strings.Lines(string(buf[:n])) {
		if strings.HasPrefix(line, "goroutine ") && strings.Contains(line, "synctest bubble") {
			count++
		}
	}
	return count
}

// Close racing first acquisitions leaves none of the session's records
// held once it returns: an acquisition whose write landed before Close
// and whose reply came after it is refused, and its record given back,
// before Close returns, not after. Each round starts acquisitions of many
// keys at once on a store whose writes take a while to land and a while
// more to answer, and closes the session in the middle of them; the
// latencies are drawn per round and key, and time is the bubble's, so
// every round plays out the same way each run.
func TestSessionCloseRacingAcquisitionsLeavesNothingHeld(t *testing.T) {
	const rounds, keys = 100, 20
	for round := range rounds {
		synctest.Test(t, func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(uint64(round), 1))
			store := &slowCreates{Store: mem.New(), round: uint64(round)}
			sess := newSession(t, store, clock.NewFake(epoch))
			type result struct {
				l   *objlease.Lease
				err error
			}
			results := make(chan result, keys)
			for i := range keys {
				c, err := sess.Client(fmt.Sprintf("leases/%02d", i), objlease.Options{
					TTL: 10 * time.Second, RenewInterval: 2 * time.Second, Holder: fmt.Sprintf("h%d", i),
				})
				if err != nil {
					t.Fatal(err)
				}
				go func() {
					l, err := c.TryAcquire(context.Background())
					results <- result{l, err}
				}()
			}
			// Writes land within 10 ms and answer within 10 ms more: close
			// at an odd microsecond, so that nothing lands at that instant.
			time.Sleep(time.Duration(rnd.IntN(20_000))*time.Microsecond + 500*time.Nanosecond)
			if err := sess.Close(context.Background()); err != nil {
				t.Fatalf("round %d: Close: %v", round, err)
			}
			for i := range keys {
				key := fmt.Sprintf("leases/%02d", i)
				obj, err := store.Get(context.Background(), key, objlease.MaxRecordSize)
				if errors.Is(err, providers.ErrNotFound) {
					continue // its write had not landed
				}
				if err != nil {
					t.Fatal(err)
				}
				rec, err := objlease.DecodeRecord(key, obj.Data)
				if err != nil {
					t.Fatal(err)
				}
				if rec.State == objlease.StateHeld {
					t.Errorf("round %d: %q is held by %s (token %d) after Close returned", round, key, rec.Holder, rec.Token)
				}
			}
			for range keys {
				r := <-results
				switch {
				case r.err == nil && !errors.Is(r.l.Err(), objlease.ErrReleased):
					t.Errorf("round %d: lease %q acquired before Close: Err() = %v after Close, want ErrReleased", round, r.l.Key(), r.l.Err())
				case r.err != nil && !errors.Is(r.err, objlease.ErrSessionClosed):
					t.Errorf("round %d: acquisition: %v, want a lease or ErrSessionClosed", round, r.err)
				}
			}
		})
	}
}

// slowCreates is a store whose creates land after a delay and answer
// after another, each drawn from the round and the key, on the timers of
// a synctest bubble.
type slowCreates struct {
	providers.Store
	round uint64
}

func (s *slowCreates) Create(ctx context.Context, key string, data []byte, md map[string]string) (providers.WriteResult, error) {
	rnd := rand.New(rand.NewPCG(s.round, uint64(crc32.ChecksumIEEE([]byte(key)))))
	time.Sleep(time.Duration(rnd.IntN(10_000)) * time.Microsecond)
	res, err := s.Store.Create(ctx, key, data, md)
	time.Sleep(time.Duration(rnd.IntN(10_000)) * time.Microsecond)
	return res, err
}

// Close waits for an acquisition in flight only as long as its context
// allows: with a store that never answers the acquiring write, Close
// returns its context's cause, and the record expires on its own.
func TestSessionCloseWaitsForAcquisitionsWithinContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sess := newSession(t, unansweredCreates{mem.New()}, clock.NewFake(epoch))
		c, err := sess.Client("leases/a", objlease.Options{TTL: 10 * time.Second, Holder: "h"})
		if err != nil {
			t.Fatal(err)
		}
		actx, stopAcquiring := context.WithCancel(context.Background())
		acquired := make(chan error, 1)
		go func() {
			_, err := c.TryAcquire(actx)
			acquired <- err
		}()
		synctest.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := sess.Close(ctx); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, objlease.ErrSessionClosed) {
			t.Errorf("Close: %v, want ErrSessionClosed and context.DeadlineExceeded", err)
		}
		stopAcquiring()
		if err := <-acquired; err == nil {
			t.Error("TryAcquire succeeded on a closed session")
		}
	})
}

// unansweredCreates is a store whose creates land and are never answered
// until their context ends.
type unansweredCreates struct{ providers.Store }

func (s unansweredCreates) Create(ctx context.Context, key string, data []byte, md map[string]string) (providers.WriteResult, error) {
	if _, err := s.Store.Create(ctx, key, data, md); err != nil {
		return providers.WriteResult{}, err
	}
	<-ctx.Done()
	return providers.WriteResult{}, context.Cause(ctx)
}
