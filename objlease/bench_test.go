//go:build unix

package objlease_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/mem"
)

// The library's own cost per operation on the in-memory store. A fake
// clock that never moves keeps background renewal out of the loop.
func BenchmarkRenew(b *testing.B) {
	ctx := context.Background()
	c, err := newOn(mem.New(), "jobs/nightly", objlease.SessionOptions{Clock: clock.NewFake(epoch)}, objlease.Options{})
	if err != nil {
		b.Fatal(err)
	}
	l, err := c.TryAcquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Release(ctx)
	b.ReportAllocs()
	for b.Loop() {
		if err := l.Renew(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTryAcquireRelease(b *testing.B) {
	ctx := context.Background()
	c, err := newOn(mem.New(), "jobs/nightly", objlease.SessionOptions{Clock: clock.NewFake(epoch)}, objlease.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		l, err := c.TryAcquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// renewClock records when each replace (a renewal, here) reaches the store.
type renewClock struct {
	providers.Store
	start time.Time
	at    []atomic.Int64 // ns since start; preallocated so recording allocates nothing
	n     atomic.Int64
}

func (s *renewClock) Replace(ctx context.Context, key string, data []byte, md map[string]string, v string) (providers.WriteResult, error) {
	if i := s.n.Add(1) - 1; i < int64(len(s.at)) {
		s.at[i].Store(int64(time.Since(s.start)))
	}
	return s.Store.Replace(ctx, key, data, md, v)
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkManyLeases holds 10,000 leases in one process (mem store, real
// clock, TTL 30 s, so a renewal every 10 s each) and reports the memory
// per lease (heap, and stack: goroutines of its own), the CPU per
// lease-second over two renew intervals, and how the renewals fall within
// the renew interval, both ways side by side: New, one Client and so one
// session (with a scheduler of its own) per lease, as one process per
// lease would have; and Session, one session's Clients holding every
// lease. It runs once each; use -benchtime=1x.
func BenchmarkManyLeases(b *testing.B) {
	for _, shared := range []bool{false, true} {
		name := map[bool]string{false: "New", true: "Session"}[shared]
		b.Run(name, func(b *testing.B) { benchManyLeases(b, shared) })
	}
}

// clientMaker returns a function that makes each Client of a benchmark:
// from New, or from one Session on store.
func clientMaker(b *testing.B, store providers.Store, shared bool) func(key string, opts objlease.Options) *objlease.Client {
	var sess *objlease.Session
	if shared {
		var err error
		if sess, err = objlease.NewSession(store, objlease.SessionOptions{}); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { sess.Close(context.Background()) })
	}
	return func(key string, opts objlease.Options) *objlease.Client {
		var c *objlease.Client
		var err error
		if sess != nil {
			c, err = sess.Client(key, opts)
		} else {
			c, err = objlease.New(store, key, opts)
		}
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
}

func benchManyLeases(b *testing.B, shared bool) {
	const (
		n     = 10_000
		ttl   = 30 * time.Second
		renew = ttl / 3
	)
	ctx := context.Background()
	store := &renewClock{Store: mem.New(), at: make([]atomic.Int64, 4*n)}
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("leases/%05d", i)
	}
	leases := make([]*objlease.Lease, n)
	var m0, m1, m2 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	g0 := runtime.NumGoroutine()
	began := time.Now()
	client := clientMaker(b, store, shared)
	for i, key := range keys {
		var err error
		if leases[i], err = client(key, objlease.Options{TTL: ttl}).TryAcquire(ctx); err != nil {
			b.Fatal(err)
		}
	}
	acquiring := time.Since(began)
	runtime.GC()
	runtime.ReadMemStats(&m1)
	goroutines := runtime.NumGoroutine() - g0

	// Renewals during two renew intervals, from a moment after every
	// lease's first renewal is due to have started.
	store.n.Store(0)
	window := 2 * renew
	store.start = time.Now()
	cpu0 := cpuTime()
	time.Sleep(window)
	cpu := cpuTime() - cpu0
	renewals := min(int(store.n.Load()), len(store.at))
	var bins [10]int
	for i := range renewals {
		at := time.Duration(store.at[i].Load())
		bins[int(at%renew)*len(bins)/int(renew)]++
	}

	for i, l := range leases {
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
		leases[i] = nil
	}
	// What is left is the records the mem store keeps: the store's share,
	// which a remote store would hold instead.
	runtime.GC()
	runtime.ReadMemStats(&m2)
	runtime.KeepAlive(store)

	heapHeld := float64(m1.HeapAlloc) - float64(m0.HeapAlloc)
	heapStore := float64(m2.HeapAlloc) - float64(m0.HeapAlloc)
	b.ReportMetric((heapHeld-heapStore)/n, "heap-B/lease")
	b.ReportMetric(heapStore/n, "store-heap-B/lease")
	b.ReportMetric((float64(m1.StackInuse)-float64(m0.StackInuse))/n, "stack-B/lease")
	b.ReportMetric(float64(goroutines)/n, "goroutines/lease")
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/(n*window.Seconds()), "cpu-µs/lease-s")
	b.ReportMetric(100*cpu.Seconds()/window.Seconds(), "%core")
	b.ReportMetric(float64(renewals)/window.Seconds(), "renewals/s")
	b.ReportMetric(float64(slices.Max(bins[:]))/float64(max(renewals, 1)), "max-bin-share")
	b.Logf("%d leases acquired in %v; %d renewals in %v; by time modulo the %v renew interval, in tenths of it: %v "+
		"(max-bin-share 0.10 is an even spread, 1.00 a single burst)", n, acquiring.Round(time.Millisecond), renewals, window, renew, bins)
	b.ReportMetric(0, "ns/op") // one run, not a per-op cost
}

// getCounter counts reads.
type getCounter struct {
	providers.Store
	n atomic.Int64
}

func (s *getCounter) Get(ctx context.Context, key string, max int64) (*providers.Object, error) {
	s.n.Add(1)
	return s.Store.Get(ctx, key, max)
}

// BenchmarkManyWaiters has 10,000 contenders, one Client each, wait for a
// lease held elsewhere (mem store, real clock, TTL 30 s, so a poll every
// 8–10 s each), side by side: each in a goroutine blocked in Acquire, and
// all through AcquireFunc. It reports the memory per waiter (heap, and
// goroutine stacks: the callers' blocked in Acquire, the scheduler's
// workers for AcquireFunc), the CPU per waiter-second and the reads per
// second over 20 s, short of the 30.3 s after which they could take over.
// Each runs once; use -benchtime=1x.
func BenchmarkManyWaiters(b *testing.B) {
	for _, shared := range []bool{false, true} {
		name := map[bool]string{false: "New", true: "Session"}[shared]
		b.Run("Acquire/"+name, func(b *testing.B) {
			benchWaiters(b, shared, func(ctx context.Context, c *objlease.Client, done func(error)) {
				go func() {
					_, err := c.Acquire(ctx)
					done(err)
				}()
			})
		})
		b.Run("AcquireFunc/"+name, func(b *testing.B) {
			benchWaiters(b, shared, func(ctx context.Context, c *objlease.Client, done func(error)) {
				c.AcquireFunc(ctx, func(_ *objlease.Lease, err error) { done(err) })
			})
		})
	}
}

// benchWaiters has wait start each waiter and call done when it gives up;
// shared: every waiter's Client is one Session's.
func benchWaiters(b *testing.B, shared bool, wait func(ctx context.Context, c *objlease.Client, done func(error))) {
	const (
		n   = 10_000
		ttl = 30 * time.Second
	)
	store := &getCounter{Store: mem.New()}
	// The holder's clock never moves: it holds without renewing.
	holder, err := newOn(store, "leases/shared", objlease.SessionOptions{Clock: clock.NewFake(epoch)}, objlease.Options{TTL: ttl})
	if err != nil {
		b.Fatal(err)
	}
	l, err := holder.TryAcquire(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	defer l.Release(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	g0 := runtime.NumGoroutine()
	done := make(chan struct{}, n)
	client := clientMaker(b, store, shared)
	for range n {
		wait(ctx, client("leases/shared", objlease.Options{TTL: ttl}), func(err error) {
			if err == nil {
				b.Error("a waiter took the lease")
			}
			done <- struct{}{}
		})
	}
	// Every waiter has made its first attempt and is asleep.
	for store.n.Load() < n {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(time.Second)
	runtime.GC()
	runtime.ReadMemStats(&m1)
	goroutines := runtime.NumGoroutine() - g0
	window := 20 * time.Second
	reads0 := store.n.Load()
	cpu0 := cpuTime()
	time.Sleep(window)
	cpu := cpuTime() - cpu0
	reads := store.n.Load() - reads0
	cancel()
	for range n {
		<-done
	}
	b.ReportMetric((float64(m1.HeapAlloc)-float64(m0.HeapAlloc))/n, "heap-B/waiter")
	b.ReportMetric((float64(m1.StackInuse)-float64(m0.StackInuse))/n, "stack-B/waiter")
	b.ReportMetric(float64(goroutines)/n, "goroutines/waiter")
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/(n*window.Seconds()), "cpu-µs/waiter-s")
	b.ReportMetric(100*cpu.Seconds()/window.Seconds(), "%core")
	b.ReportMetric(float64(reads)/window.Seconds(), "reads/s")
	b.ReportMetric(0, "ns/op") // one run, not a per-op cost
}
