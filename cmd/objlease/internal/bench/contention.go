package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/objlease/objlease/internal/ctxsleep"
	"github.com/objlease/objlease/objlease"
)

// contentionReport is one contention run's result.
type contentionReport struct {
	Contenders   int     `json:"contenders"`
	DurationMs   float64 `json:"duration_ms"`
	Acquisitions int     `json:"acquisitions"`
	Handoffs     int     `json:"handoffs"` // acquisitions by another contender than the last
	MinPer       int     `json:"min_per_contender"`
	MaxPer       int     `json:"max_per_contender"`
	// Overlaps counts acquisitions that began before the previous holder's
	// interval ended; TokenRegressions, acquisitions whose token was not
	// above the previous one. Both must be zero.
	Overlaps         int     `json:"overlaps"`
	TokenRegressions int     `json:"token_regressions"`
	FirstViolation   string  `json:"first_violation,omitempty"`
	IdleShare        float64 `json:"idle_share"`
	// Reads, Writes and Rate count from the end of the warm-up.
	Reads      int64   `json:"reads"`
	Writes     int64   `json:"writes"`
	Rate       float64 `json:"requests_per_second"`
	GoalRate   float64 `json:"goal_requests_per_second"`
	RateGoal   bool    `json:"rate_goal_met"`
	Errors     int     `json:"errors"`
	FirstError string  `json:"first_error,omitempty"`
}

// holding is one holder's tenure on the process's monotonic clock: from
// Acquire's return to the start of its release, or to the end of its
// validity if that came first.
type holding struct {
	who        int
	token      uint64
	start, end time.Time
}

// contention runs n contenders, each its own Client, on one lease for
// --duration: each takes the lease, holds it for half to one poll interval,
// releases it, pauses for about one poll interval and competes again.
func (b *bench) contention(ctx context.Context, n int) (*contentionReport, error) {
	key := b.key(fmt.Sprintf("contention-%d", n))
	b.prog.show(true, "contention: %d contenders on %s for %v", n, key, b.duration)
	clients := make([]*objlease.Client, n)
	for i := range clients {
		var err error
		if clients[i], err = b.client(b.cs, key, b.options(fmt.Sprintf("contender-%d", i))); err != nil {
			return nil, err
		}
	}
	var (
		mu       sync.Mutex
		held     []holding
		errCount int
		firstErr error
		wg       sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if errCount++; firstErr == nil {
			firstErr = err
		}
	}
	runCtx, cancel := context.WithTimeout(ctx, b.duration)
	defer cancel()
	began := time.Now()
	// Requests are counted once the start is over: every contender's first
	// attempt (n creates and n-1 reads at once) is not the steady state.
	warm := time.After(min(b.poll/2, b.duration/4))
	var before counts
	var counted time.Time
	for i, c := range clients {
		wg.Go(func() {
			for runCtx.Err() == nil {
				l, err := c.Acquire(runCtx)
				if err != nil {
					if runCtx.Err() == nil {
						fail(err)
						_ = ctxsleep.For(runCtx, b.poll)
					}
					continue
				}
				h := holding{who: i, token: l.Token(), start: time.Now()}
				// The holder's validity as it stands: no renewal falls in
				// the hold. A holder that loses its lease stops holding at
				// this moment, whenever its goroutines get to run.
				validEnd := h.start.Add(l.ValidFor())
				// Well inside a renew interval: the tenure costs its
				// acquisition and release, and no renewal.
				t := time.NewTimer(time.Duration((0.5 + 0.4*rand.Float64()) * float64(min(b.poll, b.renew))))
				select {
				case <-t.C:
				case <-runCtx.Done():
				case <-l.Done(): // lost
				}
				t.Stop()
				if h.end = time.Now(); validEnd.Before(h.end) {
					h.end = validEnd
				}
				mu.Lock()
				held = append(held, h)
				mu.Unlock()
				rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), b.ttl)
				if err := l.Release(rctx); err != nil {
					fail(fmt.Errorf("release of %q: %w", key, err))
				}
				rcancel()
				// Pause as a poll would (the library jitters polls by ±20 %),
				// so that the others get their turn.
				_ = ctxsleep.For(runCtx, time.Duration((0.8+0.4*rand.Float64())*float64(b.poll)))
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for running := true; running; {
		select {
		case <-done:
			running = false
		case <-warm:
			before, counted = b.cs.counts(), time.Now()
		case <-tick.C:
			mu.Lock()
			k := len(held)
			mu.Unlock()
			b.prog.show(false, "contention: %d contenders, %v of %v, %d acquisitions", n, time.Since(began).Round(time.Second), b.duration, k)
		}
	}
	elapsed, window := time.Since(began), time.Since(counted)
	used := b.cs.counts().sub(before)
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	if counted.IsZero() {
		return nil, fmt.Errorf("contention on %q ended before the warm-up", key)
	}

	r := &contentionReport{Contenders: n, DurationMs: ms(elapsed), Acquisitions: len(held),
		Reads: used.reads(), Writes: used.writes(), Errors: errCount}
	if firstErr != nil {
		r.FirstError = firstErr.Error()
	}
	r.Rate = float64(used.total()) / window.Seconds()
	r.GoalRate = float64(n) / b.poll.Seconds()
	r.RateGoal = r.Rate <= r.GoalRate
	r.check(held, elapsed)
	per := make([]int, n)
	for _, h := range held {
		per[h.who]++
	}
	r.MinPer, r.MaxPer = slices.Min(per), slices.Max(per)
	if r.Acquisitions == 0 {
		return r, errors.Join(fmt.Errorf("no contender acquired %q in %v", key, b.duration), firstErr)
	}
	return r, nil
}

// check verifies that the tenures never overlap and that tokens rise with
// every tenure, and measures the share of the run with no holder.
func (r *contentionReport) check(held []holding, elapsed time.Duration) {
	slices.SortFunc(held, func(a, b holding) int { return a.start.Compare(b.start) })
	var busy time.Duration
	var last holding
	for i, h := range held {
		busy += h.end.Sub(h.start)
		if i == 0 {
			continue
		}
		prev := held[i-1]
		if h.who != prev.who {
			r.Handoffs++
		}
		if prev.end.After(last.end) {
			last = prev // the earlier tenure that ends latest
		}
		var what string
		if h.start.Before(last.end) {
			r.Overlaps++
			what = fmt.Sprintf("contender %d (token %d) acquired %v before contender %d (token %d) stopped holding",
				h.who, h.token, last.end.Sub(h.start), last.who, last.token)
		}
		if h.token <= prev.token {
			r.TokenRegressions++
			what = fmt.Sprintf("contender %d got token %d after contender %d had token %d", h.who, h.token, prev.who, prev.token)
		}
		if what != "" && r.FirstViolation == "" {
			r.FirstViolation = what
		}
	}
	r.IdleShare = max(0, 1-busy.Seconds()/elapsed.Seconds())
}

func printContention(w io.Writer, rs []contentionReport, poll time.Duration) {
	fmt.Fprintf(w, "\nCONTENTION: each contender: acquire, hold 0.5-0.9 × %v, release, pause ~%v, again; tenures checked on one monotonic clock; requests counted after the first half poll\n", poll.Round(time.Millisecond), poll.Round(time.Millisecond))
	fmt.Fprintln(w, "CONTENDERS\tTIME\tACQUISITIONS\tHANDOFFS\tPER CONTENDER\tOVERLAPS\tIDLE\tREADS\tWRITES\tREQ/S\tGOAL N/POLL\t")
	for _, r := range rs {
		exclusive := "0"
		if r.Overlaps+r.TokenRegressions > 0 {
			exclusive = fmt.Sprintf("%d EXCLUSIVITY VIOLATED: %s", r.Overlaps+r.TokenRegressions, r.FirstViolation)
		}
		fmt.Fprintf(w, "%d\t%v\t%d\t%d\t%d-%d\t%s\t%.0f%%\t%d\t%d\t%.1f\t<= %.1f: %s\n", r.Contenders, fromMs(r.DurationMs).Round(100*time.Millisecond),
			r.Acquisitions, r.Handoffs, r.MinPer, r.MaxPer, exclusive, 100*r.IdleShare, r.Reads, r.Writes, r.Rate, r.GoalRate, goal(r.RateGoal))
		if r.Errors > 0 {
			fmt.Fprintf(w, "\t%d errors, first: %s\n", r.Errors, r.FirstError)
		}
	}
}
