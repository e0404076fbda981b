package objlease_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/providers"
)

// scriptedHolder writes a holder's record at the times a test chooses,
// counting renewals as a holder does.
type scriptedHolder struct {
	t       *testing.T
	store   providers.Store
	rec     objlease.Record
	version string
	n       int
}

func (h *scriptedHolder) write() {
	h.t.Helper()
	h.n++
	h.rec.Nonce = fmt.Sprintf("nonce-%d", h.n)
	if h.n > 1 {
		h.rec.Renewals++
	}
	b, err := json.Marshal(h.rec)
	if err != nil {
		h.t.Fatal(err)
	}
	var res providers.WriteResult
	if h.version == "" {
		res, err = h.store.Create(context.Background(), "jobs/nightly", b, nil)
	} else {
		res, err = h.store.Replace(context.Background(), "jobs/nightly", b, nil, h.version)
	}
	if err != nil {
		h.t.Fatalf("holder's write %d: %v", h.n, err)
	}
	h.version = res.Version
}

// waitRun is one contender waiting in Acquire beside a holder renewing
// every R with jitter, until the holder stops.
type waitRun struct {
	reads       int           // the contender's reads while the holder lived, after its first attempt
	lived       time.Duration // from the contender's first attempt to the holder's last write
	lastWrite   time.Time
	firstSeen   time.Time // the contender's first read after the holder's last write
	silentReads int       // its reads after the holder's last write, the takeover's included
	takeover    time.Time // when Acquire returned
	lateRenews  int
}

// runWaiter lets a holder renew every renew (each renewal sent renew after
// the previous one was sent, up to 5 ms late, landing up to 20 ms after it
// is sent; a few renewals retried a quarter interval late, as after a
// failed attempt) for writes renewals, then stop, while a contender waits
// in Acquire on a fake clock.
func runWaiter(t *testing.T, seed uint64, ttl, renew time.Duration, writes int) waitRun {
	t.Helper()
	clk := clock.NewFake(epoch)
	_, hs := newMem()
	rnd := rand.New(rand.NewPCG(seed, 7))
	h := &scriptedHolder{t: t, store: hs.Store, rec: objlease.Record{
		Schema: objlease.SchemaVersion, Name: "jobs/nightly", Token: 4, Holder: "holder", State: objlease.StateHeld, TTLMillis: ttl.Milliseconds()}}
	h.write()
	c := newClient(t, hs, "contender", clk, func(o *objlease.Options) {
		o.TTL, o.RenewInterval, o.Rand = ttl, renew, rand.New(rand.NewPCG(seed, 11))
	})

	var mu sync.Mutex
	var gets []time.Time
	hs.setHooks(nil, func(op, key string, err error) error {
		if op == "get" {
			mu.Lock()
			gets = append(gets, clk.Now())
			mu.Unlock()
		}
		return err
	})
	type result struct {
		at  time.Time
		err error
	}
	done := make(chan result, 1)
	start := clk.Now()
	go func() {
		l, err := c.Acquire(context.Background())
		r := result{at: clk.Now(), err: err}
		if err == nil {
			_ = l.Release(context.Background())
		}
		done <- r
	}()

	var run waitRun
	sent := epoch
	nextWrite := func() time.Time {
		sent = sent.Add(renew + time.Duration(rnd.Int64N(int64(5*time.Millisecond))))
		if rnd.IntN(40) == 0 {
			sent = sent.Add(renew / 4)
			run.lateRenews++
		}
		return sent.Add(time.Duration(rnd.Int64N(int64(20 * time.Millisecond))))
	}
	next, written := nextWrite(), 1
	run.lastWrite = epoch
	for {
		var r result
		idle := false
		deadline := time.Now().Add(10 * time.Second)
		for !idle {
			select {
			case r = <-done:
				idle = true
			default:
				if clk.Timers() == 1 {
					idle = true
				} else if time.Now().After(deadline) {
					t.Fatal("the contender never went back to waiting")
				} else {
					time.Sleep(50 * time.Microsecond)
				}
			}
		}
		if !r.at.IsZero() || r.err != nil {
			if r.err != nil {
				t.Fatalf("Acquire: %v", r.err)
			}
			run.takeover = r.at
			break
		}
		dl, _ := clk.NextDeadline()
		if written < writes && !next.After(dl) {
			clk.Advance(next.Sub(clk.Now()))
			h.write()
			run.lastWrite, written = next, written+1
			next = nextWrite()
			continue
		}
		clk.Advance(dl.Sub(clk.Now()))
	}
	mu.Lock()
	defer mu.Unlock()
	run.lived = run.lastWrite.Sub(start)
	for _, g := range gets[1:] { // the first attempt (a create, refused, then this read) is not a wait
		if !g.After(run.lastWrite) {
			run.reads++
		} else {
			run.silentReads++
			if run.firstSeen.IsZero() {
				run.firstSeen = g
			}
		}
	}
	return run
}

// TestWaitingContenderReadsAfterEverySecondRenewal: beside a live holder, a
// contender under the observed-time rule reads about once per two renewal
// intervals, not once per poll interval; after the holder stops it still
// takes over within TTL × (1 + b) + R + ε of the holder's last write, and
// never before it has seen that write unchanged for TTL × (1 + b).
func TestWaitingContenderReadsAfterEverySecondRenewal(t *testing.T) {
	const (
		ttl   = 9 * time.Second
		renew = 3 * time.Second
		drift = objlease.DefaultDriftBound
	)
	expiry := time.Duration(float64(ttl) * (1 + drift))
	// Every write is seen within R + R/32 + 2 × R/64 of landing (the
	// phase window, and the slack either side of it), then read again at
	// expiry, a millisecond past it.
	failoverBound := expiry + renew + renew/16 + time.Millisecond
	// client-go's follower at LeaseDuration = TTL: one GET per 1.6 ×
	// RetryPeriod, RetryPeriod = 2/15 TTL, 4.69 per TTL; half is 2.34.
	// Reading after every second renewal is 1.5 per TTL at R = TTL/3;
	// learning the phase and re-learning it after a late renewal cost the
	// rest.
	const maxPerTTL = 2.1
	var reads int
	var lived time.Duration
	var late int
	for seed := uint64(1); seed <= 16; seed++ {
		run := runWaiter(t, seed, ttl, renew, 60+int(seed)) // about 20 TTLs, stopping at different phases
		reads, lived, late = reads+run.reads, lived+run.lived, late+run.lateRenews
		if got := run.takeover.Sub(run.lastWrite); got > failoverBound {
			t.Errorf("seed %d: took over %v after the holder's last write, want <= TTL × (1 + b) + R + R/16 = %v", seed, got, failoverBound)
		}
		if got := run.takeover.Sub(run.firstSeen); got < expiry {
			t.Errorf("seed %d: took over %v after first seeing the last write, before TTL × (1 + b) = %v", seed, got, expiry)
		} else if got > expiry+time.Millisecond {
			t.Errorf("seed %d: took over %v after first seeing the last write, later than the read at TTL × (1 + b) = %v", seed, got, expiry)
		}
	}
	perTTL := float64(reads) / (lived.Seconds() / ttl.Seconds())
	t.Logf("%d reads in %v of waiting: %.2f per TTL (%d renewals a quarter interval late)", reads, lived, perTTL, late)
	if perTTL > maxPerTTL {
		t.Errorf("%.2f reads per TTL while the holder renewed, want <= %.1f (client-go's follower: 4.69)", perTTL, maxPerTTL)
	}
}

// TestWaitingContenderChasesNoSilentHolder: a holder that stops renewing
// (dead, or paused) must cost a waiting contender no more reads than plain
// polling until the record expires: a schedule that kept narrowing in on
// a renewal that never comes would read ever more often.
func TestWaitingContenderChasesNoSilentHolder(t *testing.T) {
	const (
		ttl   = 9 * time.Second
		renew = 3 * time.Second
	)
	for seed := uint64(1); seed <= 8; seed++ {
		// The holder renews 12 times, then stops; count the contender's
		// reads from its last write to the takeover.
		run := runWaiter(t, seed, ttl, renew, 12)
		polls := run.silentReads
		// Plain polling reads every 0.8–1.0 R: at most ceil(TTL × (1 + b)
		// / 0.8 R) + 1 reads, the takeover's included.
		if most := int(math.Ceil(float64(ttl)*1.01/(0.8*float64(renew)))) + 1; polls > most {
			t.Errorf("seed %d: %d reads while the holder was silent, want at most %d (plain polling)", seed, polls, most)
		}
	}
}
