package objlease_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
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
	gets        []time.Time // every read's time, the first attempt's included
}

// waitConfig varies runWaiter's setup.
type waitConfig struct {
	storeClock bool // the contender uses Options.StoreClock (margin 1 s)
	release    bool // the holder releases instead of its last renewal
	fine       bool // the store's timestamps have nanoseconds, not whole seconds
	poll       time.Duration
}

// runWaiter lets a holder renew every renew (each renewal sent renew after
// the previous one was sent, up to 5 ms late, landing up to 20 ms after it
// is sent; a few renewals retried a quarter interval late, as after a
// failed attempt) for writes renewals, then stop, while a contender waits
// in Acquire on a fake clock.
//
// It runs in a synctest bubble, so that "the contender is waiting again"
// is the bubble's goroutines all blocked, not a count of timers that a
// busy machine can catch between two steps.
func runWaiter(t *testing.T, seed uint64, ttl, renew time.Duration, writes int, cfgs ...waitConfig) (run waitRun) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) { run = runWaiterIn(t, seed, ttl, renew, writes, cfgs...) })
	return run
}

func runWaiterIn(t *testing.T, seed uint64, ttl, renew time.Duration, writes int, cfgs ...waitConfig) waitRun {
	var cfg waitConfig
	if len(cfgs) > 0 {
		cfg = cfgs[0]
	}
	clk := clock.NewFake(epoch)
	// The store's clock is the contender's, shifted by a fraction of a
	// second, and its timestamps (Last-Modified, Date) have 1 s
	// granularity, as S3's and Azure's do.
	var st providers.Store = mem.New(mem.WithClock(func() time.Time {
		return clk.Now().Add(time.Duration(seed%10) * 97 * time.Millisecond)
	}))
	if !cfg.fine {
		st = secondStore{st}
	}
	hs := newHookStore(st)
	rnd := rand.New(rand.NewPCG(seed, 7))
	h := &scriptedHolder{t: t, store: hs.Store, rec: objlease.Record{
		Schema: 1, Name: "jobs/nightly", Token: 4, Holder: "holder", State: objlease.StateHeld, TTLMillis: ttl.Milliseconds()}}
	h.write()
	c := newClientOn(t, hs, "contender", objlease.SessionOptions{Clock: clk, Rand: rand.New(rand.NewPCG(seed, 11))}, func(o *objlease.Options) {
		o.TTL, o.RenewInterval, o.PollInterval = ttl, renew, cfg.poll
		if cfg.storeClock {
			o.StoreClock, o.StoreClockMargin = true, time.Second
		}
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
		synctest.Wait() // the contender is back to waiting, or done
		select {
		case r = <-done:
		default:
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
			if written == writes-1 && cfg.release {
				h.rec.State = objlease.StateReleased
			}
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
	run.gets = gets
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

// clientGoPerTTL is what a waiting contender's reads are compared with:
// client-go's follower GETs the lease every RetryPeriod, 2 s for its
// default 15 s lease, 7.5 reads per lease duration. Half of it is the goal.
const clientGoPerTTL = 15.0 / 2.0

// TestWaitingContenderReadsOncePerRenewal: beside a live holder, a
// contender under the observed-time rule reads once per renewal interval
// R, just after each renewal, and never in bursts: no two reads less than
// R/4 apart (minGap), none more than R + R/16 apart once it has learned
// the phase. That is at most half of client-go's reads. After the holder
// stops it takes over within TTL × (1 + b) + P + R/16 of the holder's last
// write, and never before it has seen that write unchanged for
// TTL × (1 + b).
func TestWaitingContenderReadsOncePerRenewal(t *testing.T) {
	const (
		ttl   = 9 * time.Second
		renew = 3 * time.Second
		drift = objlease.DefaultDriftBound
	)
	expiry := time.Duration(float64(ttl) * (1 + drift))
	// Once the phase is learned every renewal is seen within the phase
	// window (R/32) and the slack either side of it (R/64 each) of landing;
	// while learning, or after a late renewal, within one plain poll (P =
	// R here). It is read again at expiry, a millisecond past it.
	failoverBound := expiry + renew + renew/16 + time.Millisecond
	var reads int
	var lived time.Duration
	var late int
	for seed := uint64(1); seed <= 16; seed++ {
		run := runWaiter(t, seed, ttl, renew, 60+int(seed)) // about 20 TTLs, stopping at different phases
		reads, lived, late = reads+run.reads, lived+run.lived, late+run.lateRenews
		if got := run.takeover.Sub(run.lastWrite); got > failoverBound {
			t.Errorf("seed %d: took over %v after the holder's last write, want <= TTL × (1 + b) + P + R/16 = %v", seed, got, failoverBound)
		}
		if got := run.takeover.Sub(run.firstSeen); got < expiry {
			t.Errorf("seed %d: took over %v after first seeing the last write, before TTL × (1 + b) = %v", seed, got, expiry)
		} else if got > expiry+time.Millisecond {
			t.Errorf("seed %d: took over %v after first seeing the last write, later than the read at TTL × (1 + b) = %v", seed, got, expiry)
		}
		for i := 2; i < len(run.gets); i++ {
			if !run.gets[i].After(run.lastWrite) {
				if gap := run.gets[i].Sub(run.gets[i-1]); gap < renew/4 {
					t.Errorf("seed %d: reads %d and %d %v apart, a burst (want >= R/4)", seed, i-1, i, gap)
				}
			}
		}
	}
	perTTL := float64(reads) / (lived.Seconds() / ttl.Seconds())
	t.Logf("%d reads in %v of waiting: %.2f per TTL (%d renewals a quarter interval late); client-go: %.1f", reads, lived, perTTL, late, clientGoPerTTL)
	if perTTL > clientGoPerTTL/2 {
		t.Errorf("%.2f reads per TTL while the holder renewed, want <= %.2f, half of client-go's %.1f", perTTL, clientGoPerTTL/2, clientGoPerTTL)
	}
}

// TestPollIntervalSetsReadsOnThePhase: a PollInterval of k whole renewal
// intervals R (k >= 2) makes the waiter read just after every k-th
// renewal once it has learned their phase, TTL / (k R) times per TTL. One
// that is not near a multiple of R (here 1.5 R) polls plainly, at 0.8 to 1
// PollInterval, which then reads less. Either way every write, and so the
// holder's last, is seen within one PollInterval (+ R/16) of landing; on
// the phase within (k − 1) R + R/16, which the median over the runs must
// meet where plain polling at the same rate would not. A release is seen
// within one PollInterval.
func TestPollIntervalSetsReadsOnThePhase(t *testing.T) {
	const (
		ttl   = 9 * time.Second
		renew = 3 * time.Second
	)
	expiry := time.Duration(float64(ttl) * (1 + objlease.DefaultDriftBound))
	for _, tc := range []struct {
		poll   time.Duration
		perTTL float64 // reads per TTL beside a live holder
		k      time.Duration
	}{
		{poll: ttl / 2, perTTL: 1 / (0.5 * 0.9)},
		{poll: 2 * renew, perTTL: 1.5, k: 2},
		{poll: ttl, perTTL: 1, k: 3},
	} {
		t.Run(tc.poll.String(), func(t *testing.T) {
			var reads int
			var lived time.Duration
			var seen []time.Duration
			for seed := uint64(1); seed <= 16; seed++ {
				run := runWaiter(t, seed, ttl, renew, 60+int(seed), waitConfig{poll: tc.poll})
				reads, lived = reads+run.reads, lived+run.lived
				seen = append(seen, run.firstSeen.Sub(run.lastWrite))
				if got := run.firstSeen.Sub(run.lastWrite); got > tc.poll+renew/16 {
					t.Errorf("seed %d: saw the holder's last write %v after it landed, want within one poll, %v", seed, got, tc.poll+renew/16)
				}
				if got := run.takeover.Sub(run.firstSeen); got < expiry || got > expiry+time.Millisecond {
					t.Errorf("seed %d: took over %v after first seeing the last write, want the read at TTL × (1 + b) = %v", seed, got, expiry)
				}
				rel := runWaiter(t, seed, ttl, renew, 40+int(seed), waitConfig{poll: tc.poll, release: true})
				if got := rel.takeover.Sub(rel.lastWrite); got > tc.poll+renew/16 {
					t.Errorf("seed %d: took a released lease %v after the release, want within one poll, %v", seed, got, tc.poll+renew/16)
				}
			}
			slices.Sort(seen)
			med := seen[len(seen)/2]
			if onPhase := (tc.k-1)*renew + renew/16; tc.k > 0 && med > onPhase {
				t.Errorf("the last write seen %v after landing (median), want <= %v on the renewal phase; all: %v", med, onPhase, seen)
			}
			perTTL := float64(reads) / (lived.Seconds() / ttl.Seconds())
			t.Logf("%.2f reads per TTL (want about %.2f); the last write seen after %v (median)", perTTL, tc.perTTL, med)
			// A renewal a quarter interval late (one in 40 here) costs
			// reads while the phase is learned again.
			if perTTL > tc.perTTL*1.1 {
				t.Errorf("%.2f reads per TTL, want <= %.2f", perTTL, tc.perTTL*1.1)
			}
		})
	}
}

// TestWaitingContenderSeesReleaseWithinOnePoll: a graceful release, which
// lands at no renewal's beat, is seen at the next read: within one renewal
// interval R and the phase window (R/16) of landing, not 2 R.
func TestWaitingContenderSeesReleaseWithinOnePoll(t *testing.T) {
	const (
		ttl   = 9 * time.Second
		renew = 3 * time.Second
	)
	for seed := uint64(1); seed <= 16; seed++ {
		run := runWaiter(t, seed, ttl, renew, 40+int(seed), waitConfig{release: true})
		if got := run.takeover.Sub(run.lastWrite); got > renew+renew/16 {
			t.Errorf("seed %d: took a released lease %v after the release, want within one poll, R + R/16 = %v", seed, got, renew+renew/16)
		}
	}
}

// TestStoreClockWaiterMeetsItsBound: with the store-clock rule, on a store
// whose Last-Modified and Date have 1 s granularity, a contender beside a
// live holder reads only when the store's clock could show the last write
// it saw expired: at most once per TTL, since each such read finds a newer
// write. Once the holder stops it takes over within TTL + granularity +
// margin of the holder's last write (store time), plus the uncertainty of
// the store's clock against its own that it has learned (here under
// 100 ms).
func TestStoreClockWaiterMeetsItsBound(t *testing.T) {
	const (
		ttl   = 6 * time.Second
		renew = 2 * time.Second
	)
	bound := ttl + time.Second + time.Second // TTL + granularity + margin
	var reads, silent int
	var lived time.Duration
	for seed := uint64(1); seed <= 30; seed++ {
		run := runWaiter(t, seed, ttl, renew, 20+int(seed), waitConfig{storeClock: true})
		if got := run.takeover.Sub(run.lastWrite); got > bound+100*time.Millisecond {
			t.Errorf("seed %d: took over %v after the holder's last write, want <= TTL + granularity + margin = %v (+ 100 ms of phase)", seed, got, bound)
		}
		reads, lived, silent = reads+run.reads, lived+run.lived, silent+run.silentReads
	}
	perTTL := float64(reads) / (lived.Seconds() / ttl.Seconds())
	t.Logf("%.2f reads per TTL beside the live holder, %.1f after its last write; client-go: %.1f", perTTL, float64(silent)/30, clientGoPerTTL)
	if perTTL > 1 {
		t.Errorf("%.2f reads per TTL beside a live holder, want <= 1", perTTL)
	}
}

// TestStoreClockWaiterOnFineTimestamps: the same on a store whose
// timestamps are exact (the mem store's): at most one read per TTL, and
// the takeover within TTL + margin + one step of the holder's last write.
func TestStoreClockWaiterOnFineTimestamps(t *testing.T) {
	const (
		ttl   = 6 * time.Second
		renew = 2 * time.Second
	)
	bound := ttl + time.Second + 25*time.Millisecond // TTL + margin + a step
	var reads int
	var lived time.Duration
	for seed := uint64(1); seed <= 30; seed++ {
		run := runWaiter(t, seed, ttl, renew, 20+int(seed), waitConfig{storeClock: true, fine: true})
		if got := run.takeover.Sub(run.lastWrite); got > bound {
			t.Errorf("seed %d: took over %v after the holder's last write, want <= TTL + margin + a step = %v", seed, got, bound)
		}
		reads, lived = reads+run.reads, lived+run.lived
	}
	if perTTL := float64(reads) / (lived.Seconds() / ttl.Seconds()); perTTL > 1 {
		t.Errorf("%.2f reads per TTL beside a live holder, want <= 1", perTTL)
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
		// Plus one: the read after the last write may come minGap after
		// a read that saw a renewal.
		if most := int(math.Ceil(float64(ttl)*1.01/(0.8*float64(renew)))) + 2; polls > most {
			t.Errorf("seed %d: %d reads while the holder was silent, want at most %d (plain polling)", seed, polls, most)
		}
	}
}

// secondStore reports Last-Modified and Date at 1 s granularity, as S3 and
// Azure do (their HTTP dates have whole seconds).
type secondStore struct{ providers.Store }

func (s secondStore) Properties() providers.Properties {
	p := s.Store.Properties()
	p.TimestampGranularity = time.Second
	return p
}

func truncAttrs(a *providers.Attrs) {
	a.LastModified, a.StoreTime = a.LastModified.Truncate(time.Second), a.StoreTime.Truncate(time.Second)
}

func (s secondStore) Get(ctx context.Context, key string, max int64) (*providers.Object, error) {
	o, err := s.Store.Get(ctx, key, max)
	if o != nil {
		truncAttrs(&o.Attrs)
	}
	return o, err
}

func (s secondStore) Stat(ctx context.Context, key string) (*providers.Attrs, error) {
	a, err := s.Store.Stat(ctx, key)
	if a != nil {
		truncAttrs(a)
	}
	return a, err
}
