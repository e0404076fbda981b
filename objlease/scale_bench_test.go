//go:build unix

package objlease_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/mem"
)

// scaleStore records when each replace (a renewal, here) reaches the store
// while recording is on, and fails every replace once cut is set: the
// store is then unreachable for renewals.
type scaleStore struct {
	providers.Store
	start     time.Time
	recording atomic.Bool
	cut       atomic.Bool
	at        []atomic.Int64 // ns since start; preallocated so recording allocates nothing
	n         atomic.Int64
}

func (s *scaleStore) Replace(ctx context.Context, key string, data []byte, md map[string]string, v string) (providers.WriteResult, error) {
	if s.cut.Load() {
		return providers.WriteResult{}, providers.Wrap("replace", key, providers.ErrUnreachable, nil)
	}
	if s.recording.Load() {
		if i := s.n.Add(1) - 1; i < int64(len(s.at)) {
			s.at[i].Store(int64(time.Since(s.start)))
		}
	}
	return s.Store.Replace(ctx, key, data, md, v)
}

// BenchmarkScale is the scale curve of one Session holding 1,000, 10,000
// and 100,000 leases (mem store, real clock, TTL 30 s, so a renewal every
// 10 s each). For each size it reports:
//
//   - heap-B/lease: the library's heap per held lease, its Client
//     included (HeapInuse after a GC, less what the mem store keeps);
//     store-heap-B/lease: the mem store's records, which a remote store
//     would hold instead; stack-B/lease and goroutines: the stacks and
//     goroutines the session runs for all of its leases;
//   - acquire-µs/lease: the time to acquire them one after another;
//   - cpu-µs/lease-s and %core: process CPU (getrusage user + sys) over two
//     renewal intervals (20 s) right after acquiring;
//   - renewals/lease-TTL: renewals in that window per lease per TTL (3 at
//     the default RenewInterval TTL/3); peak/mean-1s: the renewals of the
//     busiest 1 s bin of the renewal interval (by time modulo the
//     interval) over the mean bin: 1 is an even spread, 2 the spread over
//     half the interval that leases acquired at once start with, 10 one
//     burst;
//   - worst-late-ms, p99-late-ms: how late past its safe validity a
//     lease's context ends once renewals fail for every lease at once
//     (as BenchmarkCancelLateness, each validity end read with ValidFor
//     after the cut, so early by that read, never late).
//
// Each size runs once and takes about a minute (20 s holding, up to 30 s
// for the validities to run out); use -benchtime=1x.
//
//	go test -run '^$' -bench Scale -benchtime 1x ./objlease
func BenchmarkScale(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("leases=%d", n), func(b *testing.B) {
			for range b.N {
				benchScale(b, n)
			}
		})
	}
}

func benchScale(b *testing.B, n int) {
	const (
		ttl   = 30 * time.Second
		renew = ttl / 3
	)
	ctx := context.Background()
	store := &scaleStore{Store: mem.New(), at: make([]atomic.Int64, 4*n)}
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("leases/%06d", i)
	}
	leases := make([]*objlease.Lease, n)
	ends := make([]time.Time, n)
	late := make([]time.Duration, n)
	var m0, m1, m2 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	g0 := runtime.NumGoroutine()

	sess, err := objlease.NewSession(store, objlease.SessionOptions{})
	if err != nil {
		b.Fatal(err)
	}
	began := time.Now()
	for i, key := range keys {
		c, err := sess.Client(key, objlease.Options{TTL: ttl, Holder: "h"})
		if err != nil {
			b.Fatal(err)
		}
		if leases[i], err = c.TryAcquire(ctx); err != nil {
			b.Fatal(err)
		}
	}
	acquiring := time.Since(began)
	runtime.GC()
	runtime.ReadMemStats(&m1)
	goroutines := runtime.NumGoroutine() - g0

	// Renewals and CPU during two renewal intervals: each lease renews
	// exactly twice in any such window.
	window := 2 * renew
	store.start = time.Now()
	store.recording.Store(true)
	cpu0 := cpuTime()
	time.Sleep(window)
	cpu := cpuTime() - cpu0
	store.recording.Store(false)
	renewals := min(int(store.n.Load()), len(store.at))
	bins := make([]int, int(renew/time.Second))
	for i := range renewals {
		at := time.Duration(store.at[i].Load())
		bins[int(at%renew/time.Second)]++
	}

	// Every renewal fails from now on. A renewal already past the cut
	// may still extend a validity after it is read below: that makes the
	// end read early and the lateness measured larger, never smaller.
	store.cut.Store(true)
	time.Sleep(200 * time.Millisecond)
	var wg sync.WaitGroup
	wg.Add(n)
	for i, l := range leases {
		ends[i] = time.Now().Add(l.ValidFor())
		context.AfterFunc(l.Context(), func() {
			late[i] = time.Since(ends[i])
			wg.Done()
		})
	}
	wg.Wait()
	slices.Sort(late)

	// The leases are gone and the session idle; what is left is the
	// records the mem store keeps.
	clear(leases)
	runtime.GC()
	runtime.ReadMemStats(&m2)
	runtime.KeepAlive(store)

	held := float64(m1.HeapInuse) - float64(m0.HeapInuse)
	kept := float64(m2.HeapInuse) - float64(m0.HeapInuse)
	nf := float64(n)
	b.ReportMetric((held-kept)/nf, "heap-B/lease")
	b.ReportMetric(kept/nf, "store-heap-B/lease")
	b.ReportMetric((float64(m1.StackInuse)-float64(m0.StackInuse))/nf, "stack-B/lease")
	b.ReportMetric(float64(goroutines), "goroutines")
	b.ReportMetric(float64(acquiring.Microseconds())/nf, "acquire-µs/lease")
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/(nf*window.Seconds()), "cpu-µs/lease-s")
	b.ReportMetric(100*cpu.Seconds()/window.Seconds(), "%core")
	b.ReportMetric(float64(renewals)/nf/(window.Seconds()/ttl.Seconds()), "renewals/lease-TTL")
	b.ReportMetric(float64(slices.Max(bins))*float64(len(bins))/float64(max(renewals, 1)), "peak/mean-1s")
	b.ReportMetric(float64(late[n-1])/1e6, "worst-late-ms")
	b.ReportMetric(float64(late[n*99/100])/1e6, "p99-late-ms")
	b.ReportMetric(0, "ns/op") // one run, not a per-op cost
	b.Logf("%d leases acquired in %v; %d renewals in %v; by second of the %v renewal interval: %v; %d goroutines for all of them",
		n, acquiring.Round(time.Millisecond), renewals, window, renew, bins, goroutines)
}
