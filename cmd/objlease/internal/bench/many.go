package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/objlease/objlease/internal/ctxsleep"
	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/providers"
)

// manyReport is what the many section measured: --leases leases held by
// this one process, then as many contenders waiting through AcquireFunc.
type manyReport struct {
	Leases      int     `json:"leases"`
	AcquireMs   float64 `json:"acquire_ms"` // to acquire them all, 16 at a time
	WindowMs    float64 `json:"window_ms"`
	Renewals    int64   `json:"renewals"` // background writes in the window
	RenewalsPS  float64 `json:"renewals_per_s"`
	ExpectedPS  float64 `json:"expected_renewals_per_s"` // leases / renew interval
	Lost        int     `json:"lost"`                    // leases that ended in the window
	MinGapMs    float64 `json:"min_write_gap_ms"`        // shortest time between two writes of one record
	MinWriteMs  float64 `json:"store_min_write_interval_ms"`
	HeapBLease  float64 `json:"heap_bytes_per_lease"`  // the whole process's, SDK included
	StackBLease float64 `json:"stack_bytes_per_lease"` // goroutine stacks
	Goroutines  float64 `json:"goroutines_per_lease"`
	CPUPercent  float64 `json:"cpu_percent"` // of one core, the whole process, while holding

	Waiters      int     `json:"waiters"`
	WaitReadsPS  float64 `json:"waiter_reads_per_s"`
	WaitExpected float64 `json:"waiter_expected_reads_per_s"` // waiters / mean poll gap
	HeapBWaiter  float64 `json:"heap_bytes_per_waiter"`
	GoroutinesW  float64 `json:"goroutines_per_waiter"`
	CPUWaitPct   float64 `json:"waiter_cpu_percent"`
}

// writeGaps wraps a store to find the shortest interval between two writes
// of one key.
type writeGaps struct {
	providers.Store
	mu     sync.Mutex
	last   map[string]time.Time
	minGap time.Duration
	writes atomic.Int64
}

func (g *writeGaps) wrote(key string) {
	now := time.Now()
	g.writes.Add(1)
	g.mu.Lock()
	defer g.mu.Unlock()
	if t, ok := g.last[key]; ok && (g.minGap == 0 || now.Sub(t) < g.minGap) {
		g.minGap = now.Sub(t)
	}
	g.last[key] = now
}

func (g *writeGaps) Create(ctx context.Context, key string, data []byte, md map[string]string) (providers.WriteResult, error) {
	g.wrote(key)
	return g.Store.Create(ctx, key, data, md)
}

func (g *writeGaps) Replace(ctx context.Context, key string, data []byte, md map[string]string, v string) (providers.WriteResult, error) {
	g.wrote(key)
	return g.Store.Replace(ctx, key, data, md, v)
}

// many holds --leases leases in this process for --duration, then has as
// many contenders wait for one held lease through AcquireFunc for as long.
func (b *bench) many(ctx context.Context) (*manyReport, error) {
	n := b.leases
	r := &manyReport{Leases: n, Waiters: n, MinWriteMs: ms(b.props.MinWriteInterval)}
	gaps := &writeGaps{Store: b.cs, last: map[string]time.Time{}}
	b.prog.show(true, "many: acquiring %d leases", n)
	m0, g0 := memNow()
	start := time.Now()
	leases := make([]*objlease.Lease, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	// One session: one scheduler renews every lease, as in a process
	// holding many.
	sess, err := objlease.NewSession(gaps, objlease.SessionOptions{Clock: b.clk, Logger: b.log})
	if err != nil {
		return nil, err
	}
	for range 16 {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				c, err := sess.Client(b.key(fmt.Sprintf("many/%05d", i)), b.options("many"))
				if err == nil {
					leases[i], err = c.TryAcquire(ctx)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	defer releaseAll(context.WithoutCancel(ctx), leases)
	if err := <-errs; err != nil {
		return nil, err
	}
	r.AcquireMs = ms(time.Since(start))
	m1, g1 := memNow()
	r.HeapBLease = float64(m1.HeapAlloc-min(m0.HeapAlloc, m1.HeapAlloc)) / float64(n)
	r.StackBLease = float64(m1.StackInuse-min(m0.StackInuse, m1.StackInuse)) / float64(n)
	r.Goroutines = float64(g1-g0) / float64(n)

	b.prog.show(true, "many: holding %d leases for %v", n, b.duration)
	w0, cpu0, t0 := gaps.writes.Load(), cpuTime(), time.Now()
	if err := ctxsleep.For(ctx, b.duration); err != nil {
		return nil, err
	}
	window := time.Since(t0)
	r.CPUPercent = 100 * (cpuTime() - cpu0).Seconds() / window.Seconds()
	r.WindowMs, r.Renewals = ms(window), gaps.writes.Load()-w0
	r.RenewalsPS = float64(r.Renewals) / window.Seconds()
	r.ExpectedPS = float64(n) / max(b.renew, b.props.MinWriteInterval).Seconds()
	for _, l := range leases {
		if l.Err() != nil {
			r.Lost++
		}
	}
	gaps.mu.Lock()
	r.MinGapMs = ms(gaps.minGap)
	gaps.mu.Unlock()
	releaseAll(context.WithoutCancel(ctx), leases[1:])
	if err := b.waiters(ctx, r, leases[0]); err != nil {
		return nil, err
	}
	return r, nil
}

// waiters has r.Waiters contenders wait for held through AcquireFunc for
// --duration and counts their reads.
func (b *bench) waiters(ctx context.Context, r *manyReport, held *objlease.Lease) error {
	b.prog.show(true, "many: %d contenders waiting for %v", r.Waiters, b.duration)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	m0, g0 := memNow()
	done := make(chan error, r.Waiters)
	sess, err := objlease.NewSession(b.cs, objlease.SessionOptions{Clock: b.clk, Logger: b.log})
	if err != nil {
		return err
	}
	for i := range r.Waiters {
		c, err := sess.Client(held.Key(), b.options(fmt.Sprintf("waiter-%d", i)))
		if err != nil {
			return err
		}
		c.AcquireFunc(wctx, func(l *objlease.Lease, err error) {
			if l != nil {
				_ = l.Release(context.WithoutCancel(ctx))
				err = fmt.Errorf("a waiter took %q from a live holder", held.Key())
			}
			done <- err
		})
	}
	// One poll interval for every waiter's first attempt, then count.
	if err := ctxsleep.For(ctx, b.poll); err != nil {
		return err
	}
	m1, g1 := memNow()
	// Reads only: the one holder left renews with writes.
	c0, cpu0, t0 := b.cs.counts(), cpuTime(), time.Now()
	if err := ctxsleep.For(ctx, b.duration); err != nil {
		return err
	}
	window := time.Since(t0)
	r.CPUWaitPct = 100 * (cpuTime() - cpu0).Seconds() / window.Seconds()
	r.WaitReadsPS = float64(b.cs.counts().sub(c0).reads()) / window.Seconds()
	r.WaitExpected = float64(r.Waiters) / (0.9 * b.poll.Seconds()) // polls are jittered over [0.8, 1.0] × poll
	r.HeapBWaiter = float64(m1.HeapAlloc-min(m0.HeapAlloc, m1.HeapAlloc)) / float64(r.Waiters)
	r.GoroutinesW = float64(g1-g0) / float64(r.Waiters)
	cancel()
	for range r.Waiters {
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
	}
	return nil
}

func releaseAll(ctx context.Context, leases []*objlease.Lease) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for _, l := range leases {
		if l == nil {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			_ = l.Release(ctx)
		})
	}
	wg.Wait()
}

// memNow is the heap and stack in use after a collection, and the number
// of goroutines.
func memNow() (runtime.MemStats, int) {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m, runtime.NumGoroutine()
}

func printMany(w io.Writer, r *manyReport) {
	fmt.Fprintf(w, "\nMANY: %d leases held by this process (acquired in %.0f ms), then %d contenders waiting through AcquireFunc; whole-process figures, SDK included\n",
		r.Leases, r.AcquireMs, r.Waiters)
	fmt.Fprintln(w, "WHAT\tHEAP B/EACH\tSTACK B/EACH\tGOROUTINES/EACH\tCPU % CORE\tREQUESTS/S\tEXPECTED/S\t")
	fmt.Fprintf(w, "holding\t%.0f\t%.0f\t%.4f\t%.2f\t%.1f\t%.1f\tlost %d; shortest gap between writes of one record %.0f ms (store minimum %.0f ms)\n",
		r.HeapBLease, r.StackBLease, r.Goroutines, r.CPUPercent, r.RenewalsPS, r.ExpectedPS, r.Lost, r.MinGapMs, r.MinWriteMs)
	fmt.Fprintf(w, "waiting\t%.0f\t-\t%.4f\t%.2f\t%.1f\t%.1f\t\n", r.HeapBWaiter, r.GoroutinesW, r.CPUWaitPct, r.WaitReadsPS, r.WaitExpected)
}
