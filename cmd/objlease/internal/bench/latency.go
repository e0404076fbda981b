package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/fence"
)

// The latency section's operations, in the order each round runs them.
const (
	opRaw          = "raw conditional PUT"
	opAcquire      = "acquire"
	opRenew        = "renew"
	opFenced       = "fenced put"
	opFencedKnown  = "fenced put, version known"
	opRelease      = "release"
	renewGoalRatio = 1.05
)

var latencyOps = []string{opAcquire, opRenew, opFenced, opFencedKnown, opRelease}

// latencyReport is the latency section's result.
type latencyReport struct {
	Samples     int         `json:"samples"`
	RecordBytes int64       `json:"record_bytes"`
	Keys        int         `json:"lease_keys"`
	Ops         []opLatency `json:"ops"`
	RenewRatio  float64     `json:"renew_ratio"`
	RenewGoal   bool        `json:"renew_goal_met"`
}

// opLatency is one operation's latency, and its median's ratio to the raw
// conditional PUT's.
type opLatency struct {
	Op       string  `json:"op"`
	Requests float64 `json:"requests_per_op"`
	dist
	Ratio float64 `json:"ratio_to_raw"` // p50 over the p50 of the raw PUTs paired with it
	Over  float64 `json:"p50_over_raw_ms"`
}

// latencySet is one lease key with its raw and fenced objects. On a store
// that limits writes per object the bench rotates over many sets.
type latencySet struct {
	c          *objlease.Client
	l          *objlease.Lease
	raw        string
	rawVersion string
	fenced     string
	lastFenced string
}

// latency measures each lease operation in alternation with a raw
// conditional PUT of a lease record's size: one raw, one lease op, so that
// both see the same store at the same moment.
func (b *bench) latency(ctx context.Context) (*latencyReport, error) {
	sets := 1
	if b.props.MinWriteInterval > 0 {
		sets = min(b.samples, 50)
	}
	pace := newPacer(b.props.MinWriteInterval)
	// A long TTL keeps background renewal out of the samples; the TTL does
	// not change what a write costs.
	opts := b.options("latency")
	opts.TTL, opts.RenewInterval, opts.PollInterval = 10*time.Minute, 0, 0
	ls := make([]*latencySet, sets)
	defer func() {
		for _, s := range ls {
			if s != nil && s.l != nil {
				_ = s.l.Release(context.WithoutCancel(ctx))
			}
		}
	}()
	var size int64
	for i := range ls {
		c, err := b.client(b.cs, b.key(fmt.Sprintf("latency/lease-%d", i)), opts)
		if err != nil {
			return nil, err
		}
		s := &latencySet{c: c, raw: b.key(fmt.Sprintf("latency/raw-%d", i)), fenced: b.key(fmt.Sprintf("latency/fenced-%d", i))}
		ls[i] = s
		if i == 0 {
			// The raw object is as large as a record: take the lease once
			// to see how large that is.
			_ = pace.wait(ctx, c.Key())
			l, err := c.TryAcquire(ctx)
			if err != nil {
				return nil, err
			}
			if err := pace.wait(ctx, c.Key()); err != nil {
				return nil, err
			}
			if err := l.Release(ctx); err != nil {
				return nil, err
			}
			a, err := b.store.Stat(ctx, c.Key())
			if err != nil {
				return nil, err
			}
			size = a.Size
		}
		_ = pace.wait(ctx, s.raw)
		res, err := b.store.Create(ctx, s.raw, text(size), nil)
		if err != nil {
			return nil, err
		}
		s.rawVersion = res.Version
		_ = pace.wait(ctx, s.fenced)
		if res, err = fence.Put(ctx, b.store, s.fenced, 1, text(size), fence.Options{UniquePayloads: true}); err != nil {
			return nil, err
		}
		s.lastFenced = res.Version
	}

	samples := map[string][]time.Duration{}
	pairedRaw := map[string][]time.Duration{} // the raw PUTs next to each operation's samples
	reqs := map[string]int64{}
	pairs := 0
	for done := 0; done < b.samples; {
		batch := min(sets, b.samples-done)
		for _, op := range latencyOps {
			for _, s := range ls[:batch] {
				key := s.c.Key()
				if op == opFenced || op == opFencedKnown {
					key = s.fenced
				}
				if err := errors.Join(pace.wait(ctx, s.raw), pace.wait(ctx, key)); err != nil {
					return nil, err
				}
				data := text(size)
				raw := func() error {
					start := time.Now()
					res, err := b.cs.Replace(ctx, s.raw, data, nil, s.rawVersion)
					d := time.Since(start)
					samples[opRaw] = append(samples[opRaw], d)
					pairedRaw[op] = append(pairedRaw[op], d)
					s.rawVersion = res.Version
					return err
				}
				lease := func() error {
					before := b.cs.counts()
					start := time.Now()
					err := s.do(ctx, b, op, data)
					samples[op] = append(samples[op], time.Since(start))
					reqs[op] += b.cs.counts().sub(before).total()
					if err != nil {
						return fmt.Errorf("%s of %q: %w", op, key, err)
					}
					return nil
				}
				// Alternate which goes first, so that neither always pays
				// for being the first request after a pause.
				first, second := raw, lease
				if pairs++; pairs%2 == 0 {
					first, second = lease, raw
				}
				if err := first(); err != nil {
					return nil, err
				}
				if err := second(); err != nil {
					return nil, err
				}
			}
			// What has been taken by now: this batch of op's samples too.
			b.prog.show(false, "latency: %d/%d samples of %s", done+batch, b.samples, op)
		}
		done += batch
	}
	// The last line shown ends the phase with what it took, not a count
	// from before its last samples.
	b.prog.show(true, "latency: %d/%d samples of each operation", b.samples, b.samples)

	r := &latencyReport{Samples: b.samples, RecordBytes: size, Keys: sets}
	raw := summarise(samples[opRaw])
	r.Ops = append(r.Ops, opLatency{Op: opRaw, Requests: 1, dist: raw, Ratio: 1})
	for _, op := range latencyOps {
		d := summarise(samples[op])
		// Against the raw PUTs made next to it: the store's pace drifts
		// (other load, its own housekeeping) over a run.
		paired := summarise(pairedRaw[op]).P50
		o := opLatency{Op: op, Requests: float64(reqs[op]) / float64(d.N), dist: d, Ratio: d.P50 / paired, Over: d.P50 - paired}
		r.Ops = append(r.Ops, o)
		if op == opRenew {
			r.RenewRatio, r.RenewGoal = o.Ratio, o.Ratio <= renewGoalRatio
		}
	}
	return r, nil
}

// do runs one lease operation on the set.
func (s *latencySet) do(ctx context.Context, b *bench, op string, data []byte) error {
	var err error
	switch op {
	case opAcquire:
		s.l, err = s.c.TryAcquire(ctx)
	case opRenew:
		err = s.l.Renew(ctx)
	case opFenced, opFencedKnown:
		o := fence.Options{UniquePayloads: true} // every payload is fresh random text
		if op == opFencedKnown {
			o.LastVersion = s.lastFenced
		}
		res, perr := fence.Put(ctx, b.cs, s.fenced, s.l.Token(), data, o)
		s.lastFenced, err = res.Version, perr
	case opRelease:
		err = s.l.Release(ctx)
		s.l = nil
	}
	return err
}

// text returns n random printable bytes, fresh each time as a record's
// nonce makes every record.
func text(n int64) []byte {
	b := []byte(rand.Text())
	for int64(len(b)) < n {
		b = append(b, rand.Text()...)
	}
	return b[:n]
}

func printLatency(w io.Writer, r *latencyReport) {
	fmt.Fprintf(w, "\nLATENCY: %d samples per operation, each paired with a raw conditional PUT of %d bytes (a lease record's size), in alternating order", r.Samples, r.RecordBytes)
	if r.Keys > 1 {
		fmt.Fprintf(w, "; spread over %d keys to respect the store's per-object write rate", r.Keys)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "OPERATION\tREQUESTS\tP50\tP90\tP99\tP50 / RAW P50\tP50 - RAW P50\t")
	for _, o := range r.Ops {
		note, over := "", "-"
		if o.Op != opRaw {
			over = fmt.Sprintf("%+dµs", fromMs(o.Over).Microseconds())
		}
		if o.Op == opRenew {
			note = fmt.Sprintf("goal <= %.2f: %s", renewGoalRatio, goal(r.RenewGoal))
		}
		fmt.Fprintf(w, "%s\t%.2f\t%v\t%v\t%v\t%.2f\t%s\t%s\n", o.Op, o.Requests,
			roundMs(o.P50), roundMs(o.P90), roundMs(o.P99), o.Ratio, over, note)
	}
	fmt.Fprintln(w, "(ratios and differences are to the raw PUTs made next to each operation)")
}

func roundMs(v float64) time.Duration { return fromMs(v).Round(time.Microsecond) }

// Advice. A renewal is sent RenewInterval after the previous one returned;
// a failed one is retried RenewInterval/4 after it failed. The holder
// keeps its lease if, after a renewal that took D, the next one can fail
// after D and its retry succeed within D, all before TTL × (1 − drift):
//
//	3D + 1.25 R <= TTL × (1 − b),  with R = TTL/3:  TTL >= 3D / (7/12 − b)
//
// D, the slowest renewal a healthy holder must survive, is 10 × the
// measured p99 (a p99 from a few hundred samples says little about the
// one-in-ten-thousand request), and at least 1 s for the holder's own
// pauses (GC, CPU starvation) that no store measurement shows.
const (
	slowFactor = 10
	slowFloor  = time.Second
)

// adviceReport is a suggested TTL and renew interval for this store.
type adviceReport struct {
	RenewP99Ms   float64 `json:"renew_p99_ms"`
	SlowMs       float64 `json:"slow_renewal_ms"`
	TTLMs        float64 `json:"ttl_ms"`
	RenewMs      float64 `json:"renew_interval_ms"`
	PollMs       float64 `json:"poll_interval_ms"`
	MinWriteMs   float64 `json:"store_min_write_interval_ms"`
	FailoverMs   float64 `json:"failover_watching_ms"`
	WritesPerH   float64 `json:"holder_writes_per_hour"`
	DollarsMonth float64 `json:"holder_dollars_per_month"`
}

func (b *bench) advice(l *latencyReport) *adviceReport {
	var p99 float64
	for _, o := range l.Ops {
		if o.Op == opRenew {
			p99 = o.P99
		}
	}
	slow := max(slowFactor*fromMs(p99), slowFloor)
	ttl := time.Duration(3 * float64(slow) / (7.0/12 - b.drift))
	ttl = max(ttl, 3*b.props.MinWriteInterval)
	ttl = time.Duration(math.Ceil(ttl.Seconds())) * time.Second
	renew := ttl / 3
	writes := float64(time.Hour) / float64(renew)
	return &adviceReport{
		RenewP99Ms: p99, SlowMs: ms(slow), TTLMs: ms(ttl), RenewMs: ms(renew), PollMs: ms(renew),
		MinWriteMs: ms(b.props.MinWriteInterval),
		// A watching contender takes over at most TTL × (1 + b) after the
		// last renewal it saw, which it sees up to one jittered poll late.
		FailoverMs:   ms(time.Duration(float64(ttl)*(1+b.drift) + 1.2*float64(renew))),
		WritesPerH:   writes,
		DollarsMonth: writes * hoursPerMonth * b.priceW / 1000,
	}
}

func printAdvice(w io.Writer, a *adviceReport) {
	fmt.Fprintf(w, "\nADVICE: from the renewal p99 of %v: survive renewals as slow as %v (max(10 × p99, 1s))\n",
		roundMs(a.RenewP99Ms), fromMs(a.SlowMs).Round(time.Millisecond))
	fmt.Fprintf(w, "TTL\t%v\tthe smallest whole second with 3 × slow <= TTL × (7/12 − drift)", fromMs(a.TTLMs))
	if a.MinWriteMs > 0 {
		fmt.Fprintf(w, ", and TTL/3 >= the store's minimum write interval %v", fromMs(a.MinWriteMs))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "renew interval\t%v\tTTL/3, the default\n", fromMs(a.RenewMs).Round(time.Millisecond))
	fmt.Fprintf(w, "failover\t<= %v\tfor a watching contender: TTL × (1 + drift) + a jittered poll (1.2 × TTL/3)\n", fromMs(a.FailoverMs).Round(time.Millisecond))
	fmt.Fprintf(w, "cost\t%.0f writes/h\t$%.2f per lease-month for the holder\n", a.WritesPerH, a.DollarsMonth)
}
