package objlease_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/mem"
)

// writeLog records, by fake time, every write of each key; a write whose
// context carries userWrite is the caller's own (Renew), the rest are the
// library's.
type writeLog struct {
	providers.Store
	clk      *clock.Fake
	minWrite time.Duration
	stuck    func(key string) bool // replaces of these keys hang until cancelled
	fail     func(key string, n int) bool

	mu     sync.Mutex
	writes map[string][]write
	gets   int
}

type write struct {
	at   time.Duration // since epoch
	user bool
}

type userWrite struct{}

func newWriteLog(s providers.Store, clk *clock.Fake) *writeLog {
	return &writeLog{Store: s, clk: clk, writes: map[string][]write{}}
}

func (w *writeLog) Properties() providers.Properties {
	p := w.Store.Properties()
	p.MinWriteInterval = w.minWrite
	return p
}

func (w *writeLog) log(ctx context.Context, key string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes[key] = append(w.writes[key], write{at: w.clk.Now().Sub(epoch), user: ctx.Value(userWrite{}) != nil})
	return len(w.writes[key])
}

func (w *writeLog) Create(ctx context.Context, key string, data []byte, md map[string]string) (providers.WriteResult, error) {
	w.log(ctx, key)
	return w.Store.Create(ctx, key, data, md)
}

func (w *writeLog) Replace(ctx context.Context, key string, data []byte, md map[string]string, v string) (providers.WriteResult, error) {
	n := w.log(ctx, key)
	if w.stuck != nil && w.stuck(key) {
		<-ctx.Done()
		return providers.WriteResult{}, providers.Wrap("replace", key, providers.ErrUnknownOutcome, ctx.Err())
	}
	if w.fail != nil && w.fail(key, n) {
		return providers.WriteResult{}, providers.Wrap("replace", key, providers.ErrThrottled, nil)
	}
	return w.Store.Replace(ctx, key, data, md, v)
}

func (w *writeLog) Get(ctx context.Context, key string, max int64) (*providers.Object, error) {
	w.mu.Lock()
	w.gets++
	w.mu.Unlock()
	return w.Store.Get(ctx, key, max)
}

func (w *writeLog) times(key string) []write {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.writes[key])
}

// newSession returns a session on store and clk, whose jitter is seeded
// alike every run.
func newSession(t *testing.T, store providers.Store, clk *clock.Fake) *objlease.Session {
	t.Helper()
	s, err := objlease.NewSession(store, objlease.SessionOptions{Clock: clk, Rand: rand.New(rand.NewPCG(7, 7))})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// holdMany acquires n leases (keys leases/00 …) in sess, each through a
// client of its own.
func holdMany(t *testing.T, sess *objlease.Session, n int) []*objlease.Lease {
	t.Helper()
	leases := make([]*objlease.Lease, n)
	for i := range leases {
		c, err := sess.Client(fmt.Sprintf("leases/%02d", i), objlease.Options{
			TTL: 10 * time.Second, RenewInterval: 2 * time.Second, Holder: fmt.Sprintf("h%d", i),
		})
		if err != nil {
			t.Fatal(err)
		}
		if leases[i], err = c.TryAcquire(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return leases
}

// step advances clk in 100 ms steps up to d past epoch, letting every
// goroutine of the bubble act after each step, and calls each(now).
func step(clk *clock.Fake, d time.Duration, each func(now time.Duration)) {
	for now := clk.Now().Sub(epoch); now < d; {
		clk.Advance(100 * time.Millisecond)
		synctest.Wait()
		now = clk.Now().Sub(epoch)
		if each != nil {
			each(now)
		}
	}
}

// One scheduler renews every lease of a store. A renewal hung in a request
// must neither delay the other leases' renewals nor keep its own lease
// alive past its safe validity.
func TestSchedulerStuckRenewalDelaysNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clock.NewFake(epoch)
		store := newWriteLog(mem.New(), clk)
		store.stuck = func(key string) bool { return key == "leases/07" }
		leases := holdMany(t, newSession(t, store, clk), 40)
		var lostAt time.Duration
		step(clk, 30*time.Second, func(now time.Duration) {
			if lostAt == 0 && leases[7].Err() != nil {
				lostAt = now
			}
		})
		// Safe validity: TTL × (1 − 1 %) − 100 ms after the acquiring write was sent.
		if lostAt != 9800*time.Millisecond || !errors.Is(leases[7].Err(), objlease.ErrLeaseLost) {
			t.Errorf("lease with a hung renewal ended at %v (%v), want exactly 9.8s", lostAt, leases[7].Err())
		}
		for i, l := range leases {
			if i == 7 {
				continue
			}
			if l.Err() != nil {
				t.Fatalf("lease %d: %v", i, l.Err())
			}
			w := store.times(l.Key())
			// The first renewal within (R/2, R] of acquiring, then one every
			// R exactly: none waited for the hung one.
			if first := w[1].at; first <= time.Second || first > 2*time.Second {
				t.Errorf("lease %d: first renewal at %v, want within (1s, 2s]", i, first)
			}
			for j := 2; j < len(w); j++ {
				if gap := w[j].at - w[j-1].at; gap != 2*time.Second {
					t.Errorf("lease %d: renewals %d and %d %v apart, want 2s: %v", i, j-1, j, gap, w)
				}
			}
			if len(w) < 15 {
				t.Errorf("lease %d: %d writes in 30s, want 15 or 16", i, len(w))
			}
			_ = l.Release(context.Background())
		}
		_ = leases[7].Release(context.Background())
	})
}

// Leases acquired together spread their renewals over half the renewal
// interval instead of renewing in one burst.
func TestSchedulerSpreadsRenewals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clock.NewFake(epoch)
		store := newWriteLog(mem.New(), clk)
		leases := holdMany(t, newSession(t, store, clk), 100)
		step(clk, 2*time.Second, nil)
		var bins [10]int // first renewal, by 100 ms after 1 s
		for _, l := range leases {
			at := store.times(l.Key())[1].at
			bins[(at-time.Second-1)/(100*time.Millisecond)]++
			_ = l.Release(context.Background())
		}
		if slices.Max(bins[:]) > 20 || slices.Min(bins[:]) == 0 {
			t.Errorf("first renewals of 100 leases by 100 ms over (1s, 2s]: %v, want every tenth used, none over 20", bins)
		}
	})
}

// No background write of a record follows this holder's previous write of
// it sooner than the store's MinWriteInterval: not the first renewal, not a
// retry after a failure, not a renewal after the caller's own Renew.
func TestSchedulerKeepsMinWriteInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clock.NewFake(epoch)
		store := newWriteLog(mem.New(), clk)
		store.minWrite = 1500 * time.Millisecond
		store.fail = func(key string, n int) bool { return n%3 == 0 }
		leases := holdMany(t, newSession(t, store, clk), 20)
		user := context.WithValue(context.Background(), userWrite{}, true)
		step(clk, 20*time.Second, func(now time.Duration) {
			if now%(1900*time.Millisecond) == 0 {
				for _, l := range leases {
					_ = l.Renew(user)
				}
			}
		})
		for i, l := range leases {
			if l.Err() != nil {
				t.Fatalf("lease %d: %v", i, l.Err())
			}
			w := store.times(l.Key())
			for j := 1; j < len(w); j++ {
				if gap := w[j].at - w[j-1].at; !w[j].user && gap < store.minWrite {
					t.Errorf("lease %d: background write %d %v after the previous write, want >= 1.5s: %v", i, j, gap, w)
				}
			}
			_ = l.Release(context.Background())
		}
	})
}

// With the store-clock rule a waiting contender reads on the renewal
// schedule (at most one read per 0.8 R against a live holder) and takes
// over by TTL + granularity + margin after the dead holder's last write,
// or sooner by the observed-time rule (here plus the 100 ms step and the
// millisecond Acquire adds).
func TestAcquireByStoreClockReadsOncePerTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clock.NewFake(epoch)
		m := mem.New(mem.WithClock(clk.Now))
		// The holder's own clock never moves: it renews only when told.
		holder := newClient(t, m, "holder", clock.NewFake(epoch))
		l, err := holder.TryAcquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		cs := newWriteLog(m, clk)
		c := newClient(t, cs, "contender", clk, func(o *objlease.Options) { o.StoreClock = true })
		done := make(chan *objlease.Lease, 1)
		go func() {
			l2, err := c.Acquire(context.Background())
			if err != nil {
				t.Error(err)
			}
			done <- l2
		}()
		synctest.Wait()
		alive := true
		var takenAt time.Duration
		step(clk, 90*time.Second, func(now time.Duration) {
			if now == 60*time.Second {
				cs.mu.Lock()
				if cs.gets > 38 {
					t.Errorf("a contender made %d reads in 60s of a live holder's lease (TTL 10 s, R 2 s), want at most 38, one per 0.8 R", cs.gets)
				}
				cs.mu.Unlock()
			}
			if alive && now%(2*time.Second) == 0 {
				if err := l.Renew(context.Background()); err != nil {
					t.Fatal(err)
				}
				alive = now < 60*time.Second // the last write at 60 s
			}
			if takenAt == 0 && len(done) > 0 {
				takenAt = now
			}
		})
		if takenAt == 0 || takenAt > 71100*time.Millisecond || takenAt < 70100*time.Millisecond {
			t.Errorf("took over at %v, want from 70.1 s (TTL × (1 + b) after the last write at 60 s) to 71.1 s (TTL 10 s + margin 1 s after it, at the next 100 ms step)", takenAt)
		}
		if l2 := <-done; l2 != nil {
			_ = l2.Release(context.Background())
		}
		_ = l.Release(context.Background())
	})
}
