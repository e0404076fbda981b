package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/objlease/election"
	"github.com/objlease/objlease/objlease/fence"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/driver"
	"github.com/objlease/objlease/providers/faulty"
)

// config is one run's shape, all of it drawn from the seed.
type config struct {
	seed       uint64
	clients    int
	leases     int
	ttl        time.Duration
	drift      float64 // every clock's rate stays within [1 − drift, 1 + drift]
	duration   time.Duration
	storeClock bool // clients also trust the store's clock (Options.StoreClock)
	faults     float64
	lateWrites float64 // chance that a write reaches the store after its caller timed out
	// A process pauses (all of its goroutines, as in a GC pause or a
	// frozen VM) with chance pauseAny at any request, and with chance
	// pauseCheck between checking its lease and a protected write.
	pauseAny, pauseCheck float64
	maxPause             time.Duration
	unfenced             bool // protected writes skip the token check

	model      string      // the store model (models_test.go)
	electors   int         // processes that campaign with election.Elector instead
	force      bool        // a third of the processes use Options.Force
	sharedRand bool        // processes pair up with identically seeded SessionOptions.Rand and one holder name
	operator   float64     // operator actions a minute: hand deletes, tampering
	acts       acts        // which actions the operator takes
	misdirect  bool        // now and then a holder fences a write at its lease's own key
	workers    int         // worker processes of the shard group (shards_test.go); 0: no group
	shards     int         // the group's shards
	machines   machineKind // what each process's clock is (clock_test.go)
}

func (c config) String() string {
	return fmt.Sprintf("seed %d: store %s, %d clients (%d electors), %d leases, TTL %v, drift ±%.0f%%, store clock %v, faults ×%.1f, pauses %.3f/%.2f up to %v, force %v, shared rand %v, operator %.0f/min (%b), misdirected puts %v, unfenced %v, shard group %d workers %d shards, clocks %v",
		c.seed, c.model, c.clients, c.electors, c.leases, c.ttl, c.drift*100, c.storeClock, c.faults, c.pauseAny, c.pauseCheck, c.maxPause, c.force, c.sharedRand, c.operator, c.acts, c.misdirect, c.unfenced, c.workers, c.shards, c.machines)
}

func configFor(seed uint64) config {
	r := rand.New(rand.NewPCG(seed, 0xc0ffee))
	c := config{
		seed:       seed,
		clients:    3 + r.IntN(18),
		leases:     1 + r.IntN(3),
		ttl:        10 * time.Second,
		drift:      []float64{0.01, 0.05, 0.1, 0.2}[r.IntN(4)],
		duration:   2 * time.Minute,
		storeClock: r.IntN(4) == 0,
		faults:     []float64{0, 1, 1, 3}[r.IntN(4)],
		pauseAny:   []float64{0, 0.002, 0.01}[r.IntN(3)],
		pauseCheck: []float64{0, 0.1, 0.3}[r.IntN(3)],
	}
	c.maxPause = 3 * c.ttl
	c.lateWrites = 0.005 * c.faults
	c.model = modelNames[r.IntN(len(modelNames))]
	c.electors = r.IntN(4)
	c.force = r.IntN(3) == 0
	c.sharedRand = r.IntN(4) == 0
	c.operator = []float64{0, 0, 1, 4}[r.IntN(4)]
	c.acts = allActs
	c.misdirect = r.IntN(8) == 0
	groupShape(&c)
	c.machines = machineKind(r.IntN(3))
	return c
}

// newProcClock draws a process's clock from r: two values, as always.
func newProcClock(r *rand.Rand, cfg config, start time.Time) *driftClock {
	a, b := r.Uint64(), r.Uint64()
	return newDriftClock(rand.New(rand.NewPCG(a, b)), cfg.drift, start, cfg.machines, a^b)
}

// Keys of lease k and of what it protects.
func leaseKey(k int) string    { return fmt.Sprintf("leases/L%d", k) }
func registerKey(k int) string { return fmt.Sprintf("data/L%d/register", k) }
func prefixKey(k int) string   { return fmt.Sprintf("data/L%d/out/", k) }

// outcome of a protected write, as its writer can know it.
type outcome int

const (
	accepted outcome = iota
	refused          // stale token
	failed           // certainly not applied
	unknown          // may or may not have been applied
)

func (o outcome) String() string { return [...]string{"accepted", "refused", "failed", "unknown"}[o] }

// regOp is one operation on a lease's fenced register.
type regOp struct {
	proc      int
	call, ret time.Duration
	write     bool
	del       bool   // a fenced delete (a write of a tombstone)
	wipe      bool   // an operator deleted the register by hand
	token     uint64 // write: the writer's token; read: the token read
	value     string
	out       outcome
	highest   uint64 // refused: the token the register said it had
	found     bool   // read: the register existed
}

// epoch is one holder's hold of one lease, from the reply that granted
// it to the last moment its ValidFor said it still held it (cut short
// when it chose to release). An elector's term runs from its callback's
// start to its return, or to its context's end if the lease was lost.
type epoch struct {
	proc, lease int
	token       uint64
	nonce       string // of the write that granted it
	from, to    time.Duration
	cut         time.Duration // when the holder called Release; 0: never
	elector     bool
	believed    bool          // ValidFor was positive at least once (electors: always)
	ended       time.Duration // when the lease's context ended; -1: not yet
	lost        error         // the loss the holder was told of, if it was
}

func (e *epoch) end() time.Duration {
	if e.cut > 0 && e.cut < e.to {
		return e.cut
	}
	return e.to
}

// world is one run: the store, the processes and what they recorded.
type world struct {
	cfg   config
	start time.Time
	store providers.Store // the store as the operator and the checks see it
	audit *auditLog
	calm  atomic.Bool
	// late counts the late writes still on their way to the store: the
	// bubble ends only once they have landed.
	late  sync.WaitGroup
	procs []*proc
	nkeys int // leases, the election's included

	gstore  providers.Store // the shard group's store
	gaudit  *auditLog
	workers []*proc // of the shard group

	mu     sync.Mutex // guards what follows: drivers of all processes record
	trace  []string
	times  []time.Duration // of each trace line
	epochs []*epoch
	rels   []releaseOp
	reg    [][]regOp
	ops    map[string]int64
	opsAt  int // trace lines before the run wound down
	terms  []*term
	// lateContexts: leases whose context outlived ValidFor by more than
	// contextSlack.
	lateContexts []string
}

// releaseOp is one release and what it reported.
type releaseOp struct {
	holder    string
	lease     int
	token     uint64
	call, ret time.Duration
	err       error
}

// released records a release of p's hold that was called at call.
func (w *world) released(p *proc, call time.Duration, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.rels = append(w.rels, releaseOp{p.clients[p.ep.lease].Options().Holder, p.ep.lease, p.ep.token, call, w.now(), err})
}

// grant names one token of one lease.
type grant struct {
	lease int
	token uint64
}

func (w *world) now() time.Duration { return time.Since(w.start) }

func (w *world) logf(p *proc, format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	who := "op "
	if p != nil {
		who = fmt.Sprintf("p%-2d", p.id)
		if p.worker {
			who = fmt.Sprintf("w%-2d", p.id)
		}
	}
	w.trace = append(w.trace, fmt.Sprintf("%14v %s %s", w.now(), who, fmt.Sprintf(format, args...)))
	w.times = append(w.times, w.now())
}

func (w *world) count(op string) {
	w.mu.Lock()
	w.ops[op]++
	w.mu.Unlock()
}

// proc is one client process: a driver goroutine plus whatever goroutines
// the library runs for it, one clock, one view of the store, and at most
// one lease held at a time.
type proc struct {
	w       *world
	id      int
	rnd     *rand.Rand // the driver's choices
	cbRnd   *rand.Rand // an elector callback's choices
	gateRnd *rand.Rand // pauses started at requests, from any of its goroutines
	clock   *driftClock
	store   *gateStore
	faults  []*faulty.Driver
	root    driver.Driver      // the store under the faults
	worker  bool               // of the shard group
	clients []*objlease.Client // nil for an elector's election key: see elector
	elector *election.Elector  // an elector process's, for all its campaigns
	byName  []*objlease.Client // the same holder, as the CLI's release command is
	opts    []objlease.Options // of clients, for a restart

	mu          sync.Mutex
	pausedUntil time.Time
	waiters     int    // goroutines that have waited out the current pause, in order
	lastRead    string // the key the process's last request read, if it was a read

	target      int
	lease       *objlease.Lease
	ep          *epoch
	lastVersion string // what this holder's last fenced write returned
	writes      atomic.Int64
}

// maybePause starts a pause of the whole process with chance pauseAny.
func (p *proc) maybePause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if p.gateRnd.Float64() < p.w.cfg.pauseAny && !now.Before(p.pausedUntil) && !p.w.calm.Load() {
		p.startPause(now, time.Duration(p.gateRnd.Int64N(int64(p.w.cfg.maxPause))))
	}
}

// maybePauseAfterCheck starts a pause with chance pauseCheck/2 before a
// write that follows a read of the same key: between the check inside a
// library call (a fenced write's stat, a lease write's read) and the
// write it decides.
func (p *proc) maybePauseAfterCheck(op, key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	last := p.lastRead
	p.lastRead = ""
	if op == "get" || op == "stat" {
		p.lastRead = key
		return
	}
	now := time.Now()
	if last == key && p.gateRnd.Float64() < p.w.cfg.pauseCheck/2 && !now.Before(p.pausedUntil) && !p.w.calm.Load() {
		p.startPause(now, time.Duration(p.gateRnd.Int64N(int64(p.w.cfg.maxPause))))
	}
}

// pause freezes the process for d from now.
func (p *proc) pause(d time.Duration) {
	p.mu.Lock()
	suspended := p.startPause(time.Now(), d)
	p.mu.Unlock()
	what := "paused"
	if suspended {
		what = "suspended"
	}
	p.w.logf(p, "%s for %v", what, d)
}

// startPause pauses the process from now for d (p.mu held). On a machine
// whose clock is built from its clocks (fromSource), the pause of a
// plain holder is a suspend to RAM half the time: its monotonic clock
// stands meanwhile. A holder checks ValidFor, which knows at once on
// waking; an elector's callback and a shard's Work go by the lease's
// context, which ends within clock.Recheck of waking, a window only
// fencing covers, so they are not suspended.
func (p *proc) startPause(now time.Time, d time.Duration) (suspended bool) {
	p.pausedUntil = now.Add(d)
	p.waiters = 0
	p.w.count("process paused")
	if !p.worker && p.id >= p.w.cfg.electors && p.clock.maybeSuspend(d) {
		p.w.count("process suspended")
		return true
	}
	return false
}

// awaitRunning blocks while the process is paused. Goroutines that waited
// resume one microsecond apart, in the order they arrived, so that no two
// of them ever run at the same instant: that is what keeps a run a
// function of its seed.
func (p *proc) awaitRunning(ctx context.Context) error {
	for {
		p.mu.Lock()
		until := p.pausedUntil
		if !time.Now().Before(until) {
			p.mu.Unlock()
			return nil
		}
		p.waiters++
		wake := until.Add(time.Duration(p.waiters) * time.Microsecond)
		p.mu.Unlock()
		t := time.NewTimer(time.Until(wake))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

func (p *proc) opCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 2*p.w.cfg.ttl)
}

// claim records that the holder believes it holds its lease now, and
// until when its ValidFor says it will.
func (p *proc) claim() time.Duration {
	v := p.lease.ValidFor()
	if v <= 0 {
		p.w.watchContext(p, p.lease)
	}
	if v > 0 {
		now := time.Now()
		end := p.clock.realEnd(now, v).Sub(p.w.start)
		p.w.mu.Lock()
		p.ep.to = max(p.ep.to, end)
		p.ep.believed = true
		p.w.mu.Unlock()
	}
	return v
}

// contextSlack is how long after ValidFor reads zero a lease's context
// may still be live: its validity watcher wakes at least every
// clock.Recheck on a clock with a wall reading, and exactly at the
// validity's end on others.
const contextSlack = clock.Recheck + 10*time.Millisecond

// watchContext checks that the context of l, whose ValidFor has just read
// zero, ends within contextSlack. It runs in a goroutine of its own, not
// the process's: it observes, and pauses nothing.
func (w *world) watchContext(p *proc, l *objlease.Lease) {
	if l.Context().Err() != nil {
		return
	}
	from := w.now()
	go func() {
		t := time.NewTimer(contextSlack)
		defer t.Stop()
		select {
		case <-l.Done():
		case <-t.C:
			w.mu.Lock()
			w.lateContexts = append(w.lateContexts, fmt.Sprintf("%s: p%d's lease (token %d) read ValidFor zero at %v, and its context was still live %v later",
				l.Key(), p.id, l.Token(), from, contextSlack))
			w.mu.Unlock()
		}
	}()
}

// keepOwnLease holds, for the whole run, a lease no other process wants,
// with a TTL three times the run's: beside the process's contended lease,
// it gives its scheduler deadlines of two kinds to keep in order, which a
// wall-clock step must not upset. Its own context is checked like any
// other's.
func (p *proc) keepOwnLease(wg *sync.WaitGroup) {
	defer wg.Done()
	w := p.w
	opts := p.opts[0]
	opts.TTL, opts.RenewInterval, opts.PollInterval, opts.Force = 3*w.cfg.ttl, 0, 0, false
	c, err := newOn(p.store, fmt.Sprintf("own/p%d", p.id), p.session(rand.New(rand.NewPCG(uint64(p.id), 0x0e1))), opts)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for w.now() < w.cfg.duration {
		actx, cancel := context.WithTimeout(ctx, w.cfg.duration-w.now())
		l, err := c.Acquire(actx)
		cancel()
		if err != nil {
			p.sleep(time.Second)
			continue
		}
		for w.now() < w.cfg.duration && l.Context().Err() == nil {
			p.sleep(time.Second)
			if l.ValidFor() <= 0 {
				w.watchContext(p, l)
			}
		}
		rctx, cancel := p.opCtx()
		_ = l.Release(rctx)
		cancel()
	}
}

// sleep waits d of real time, then for the end of any pause.
func (p *proc) sleep(d time.Duration) {
	time.Sleep(d)
	_ = p.awaitRunning(context.Background())
}

func (p *proc) run(wg *sync.WaitGroup) {
	defer wg.Done()
	w := p.w
	p.sleep(time.Duration(p.rnd.Int64N(int64(time.Second))))
	if p.id < w.cfg.electors {
		p.campaign()
		return
	}
	for w.now() < w.cfg.duration {
		think := 50*time.Millisecond + time.Duration(p.rnd.Int64N(int64(2*time.Second)))
		if p.lease == nil {
			think = p.acquire()
		} else {
			p.hold()
		}
		p.sleep(think)
	}
	if p.lease != nil {
		p.release()
	}
}

// granted records a new hold of the target lease.
func (p *proc) granted(l *objlease.Lease) {
	w := p.w
	now := w.now()
	p.lease, p.lastVersion = l, ""
	ep := &epoch{proc: p.id, lease: p.target, token: l.Token(), nonce: l.Record().Nonce, from: now, to: now, ended: -1}
	p.ep = ep
	context.AfterFunc(l.Context(), func() {
		w.mu.Lock()
		ep.ended = w.now()
		w.mu.Unlock()
	})
	w.mu.Lock()
	w.epochs = append(w.epochs, p.ep)
	w.mu.Unlock()
	v := p.claim()
	w.count("lease granted")
	w.logf(p, "acquired %s token %d, valid for %v", leaseKey(p.target), l.Token(), max(v, 0)) // the watcher may be ending an already expired lease at this very instant
}

// acquire tries for the target lease, by one attempt or by waiting with
// Acquire, and returns how long to wait before the next step: contenders
// poll as Acquire does, every few seconds or as the holder's record is due
// to expire.
func (p *proc) acquire() time.Duration {
	w := p.w
	poll := time.Second + time.Duration(p.rnd.Int64N(int64(3*time.Second)))
	if p.rnd.IntN(10) == 0 {
		p.readRegister()
		return poll
	}
	if p.rnd.IntN(40) == 0 {
		p.restart()
	}
	c := p.clients[p.target]
	var l *objlease.Lease
	var err error
	switch p.rnd.IntN(8) {
	case 0:
		p.runOnce(c)
		return poll
	case 1, 2, 3:
		ctx, cancel := p.opCtx()
		w.count("try-acquire")
		l, err = c.TryAcquire(ctx)
		cancel()
	default:
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(p.rnd.Int64N(int64(3*w.cfg.ttl))))
		w.count("acquire")
		l, err = c.Acquire(ctx)
		cancel()
	}
	var held *objlease.Error
	switch {
	case err == nil:
		p.granted(l)
		return 50 * time.Millisecond
	case errors.Is(err, objlease.ErrHeld) && errors.As(err, &held) && p.rnd.IntN(200) == 0:
		p.breakLease(c)
	case errors.Is(err, objlease.ErrHeld) && errors.As(err, &held):
		w.logf(p, "acquire %s: held by %s token %d", c.Key(), held.Record.Holder, held.Record.Token)
		poll = min(poll, held.Wait+time.Millisecond)
	default:
		w.logf(p, "acquire %s: %v", c.Key(), err)
	}
	if w.cfg.leases > 1 && p.rnd.IntN(8) == 0 {
		p.target = p.rnd.IntN(w.cfg.leases)
	}
	return poll
}

// restart is the process starting afresh while it holds nothing: its new
// clients have seen nothing of the leases, so a record deleted by hand is
// created again from token 1.
func (p *proc) restart() {
	for k, o := range p.opts {
		c, err := newOn(p.store, leaseKey(k), p.session(rand.New(rand.NewPCG(p.rnd.Uint64(), p.rnd.Uint64()))), o)
		if err != nil {
			panic(err)
		}
		p.clients[k] = c
	}
	p.w.count("restart")
	p.w.logf(p, "restarted")
}

// runOnce is a serverless job: election.RunOnce with work that writes a
// few fenced values while it holds the lease.
func (p *proc) runOnce(c *objlease.Client) {
	w := p.w
	ctx, cancel := context.WithTimeout(context.Background(), 4*w.cfg.ttl)
	defer cancel()
	w.count("run-once")
	err := election.RunOnce(ctx, c, func(ctx context.Context, l *objlease.Lease) error {
		p.granted(l)
		for range 1 + p.rnd.IntN(4) {
			if ctx.Err() != nil {
				break
			}
			p.fencedWrite()
			p.sleep(time.Duration(p.rnd.Int64N(int64(2 * time.Second))))
		}
		w.mu.Lock()
		p.ep.cut = w.now()
		w.mu.Unlock()
		return nil
	})
	w.logf(p, "run-once %s: %v", c.Key(), err)
	p.lease, p.ep = nil, nil
}

// breakLease is an operator ending a lease whoever holds it: by design
// its holder may go on believing until its next renewal fails, so the
// broken hold is exempt from the one-holder check; fencing must still
// refuse it.
func (p *proc) breakLease(c *objlease.Client) {
	ctx, cancel := p.opCtx()
	defer cancel()
	p.w.count("break")
	tok, err := c.Break(ctx) // which holds were broken is read from the store: a break can land and still fail
	p.w.logf(p, "break %s: token %d, %v", c.Key(), tok, err)
}

func (p *proc) hold() {
	if err := p.lease.Err(); err != nil {
		p.w.count("lease lost")
		p.w.logf(p, "lease %s token %d ended: %v", leaseKey(p.target), p.ep.token, err)
		p.w.mu.Lock()
		p.ep.lost = err
		p.w.mu.Unlock()
		p.drop()
		return
	}
	p.claim()
	switch r := p.rnd.IntN(100); {
	case r < 32:
		p.fencedWrite()
	case r < 40:
		p.fencedDelete()
	case r < 55:
		p.batch()
	case r < 65:
		p.readRegister()
	case r < 70:
		p.collect()
	case r < 78:
		p.renew()
	case r < 86:
		p.release()
	case r < 88 && !p.w.cfg.sharedRand: // by name, it would release the twin's lease too
		p.releaseByName()
	case r < 89 && p.w.cfg.misdirect:
		p.misdirectedPut()
	}
}

// drop lets go of a lease that has ended; Release then only stops its
// goroutines.
func (p *proc) drop() {
	ctx, cancel := p.opCtx()
	defer cancel()
	_ = p.lease.Release(ctx)
	p.lease, p.ep = nil, nil
}

// fencedWrite is the scenario fencing exists for: check the lease, maybe
// pause, write stamped with the token.
func (p *proc) fencedWrite() {
	if p.claim() <= 0 {
		return
	}
	p.w.fenced(p, p.rnd, p.ep.lease, p.ep.token, false, &p.lastVersion)
}

// fencedDelete deletes the register's content under the token.
func (p *proc) fencedDelete() {
	if p.claim() <= 0 {
		return
	}
	p.w.fenced(p, p.rnd, p.ep.lease, p.ep.token, true, &p.lastVersion)
}

// fenced writes (or deletes) lease k's register with token, after a pause
// with chance pauseCheck, and records the operation.
func (w *world) fenced(p *proc, rnd *rand.Rand, k int, tok uint64, del bool, lastVersion *string) {
	if rnd.Float64() < w.cfg.pauseCheck {
		p.pause(time.Duration(rnd.Int64N(int64(w.cfg.maxPause))))
		_ = p.awaitRunning(context.Background())
	}
	n := p.writes.Add(1)
	value := fmt.Sprintf("p%d/t%d/w%d", p.id, tok, n)
	key := registerKey(k)
	ctx, cancel := p.opCtx()
	defer cancel()
	// Every payload is unique, as S3 requires of in-place fencing.
	opts := fence.Options{UniquePayloads: true}
	if *lastVersion != "" && rnd.IntN(2) == 0 {
		opts.LastVersion = *lastVersion
	}
	call := w.now()
	var res providers.WriteResult
	var err error
	switch {
	case del:
		w.count("fenced-delete")
		value = ""
		err = fence.Delete(ctx, p.store, key, tok, opts)
	case w.cfg.unfenced:
		w.count("fenced-put")
		res, err = unfencedPut(ctx, p.store, key, tok, []byte(value))
	default:
		w.count("fenced-put")
		res, err = fence.Put(ctx, p.store, key, tok, []byte(value), opts)
	}
	op := regOp{proc: p.id, call: call, ret: w.now(), write: true, del: del, token: tok, value: value, out: classify(err)}
	var se *fence.StaleError
	if errors.As(err, &se) {
		op.highest = se.Highest
	}
	*lastVersion = ""
	if err == nil && !del {
		*lastVersion = res.Version
	}
	w.mu.Lock()
	w.reg[k] = append(w.reg[k], op)
	w.mu.Unlock()
	what := "put"
	if del {
		what = "delete"
	}
	w.count("fenced-" + what + " " + op.out.String())
	w.logf(p, "fenced %s %s token %d %q: %v (%v)", what, key, tok, value, op.out, err)
}

// misdirectedPut is a holder's mistake: a fenced write at the key of its
// lease's own record. The record must survive it.
func (p *proc) misdirectedPut() {
	ctx, cancel := p.opCtx()
	defer cancel()
	p.w.count("misdirected-put")
	_, err := fence.Put(ctx, p.store, leaseKey(p.ep.lease), p.ep.token, []byte("oops"), fence.Options{UniquePayloads: true})
	p.w.logf(p, "fenced put at the lease's own key %s token %d: %v", leaseKey(p.ep.lease), p.ep.token, err)
}

// releaseByName releases the lease by holder name, as the CLI's release
// command does from another process, and lets go of the Lease.
func (p *proc) releaseByName() {
	w := p.w
	w.mu.Lock()
	p.ep.cut = w.now()
	w.mu.Unlock()
	ctx, cancel := p.opCtx()
	defer cancel()
	w.count("release-by-name")
	call := w.now()
	err := p.byName[p.ep.lease].Release(ctx)
	w.released(p, call, err)
	w.logf(p, "release %s by holder name %s: %v", leaseKey(p.ep.lease), p.byName[p.ep.lease].Options().Holder, err)
	p.drop()
}

// classify says what a writer knows about its write from the error.
func classify(err error) outcome {
	var pe *providers.Error
	switch {
	case err == nil:
		return accepted
	case errors.Is(err, fence.ErrStale):
		return refused
	case errors.Is(err, providers.ErrThrottled):
		return failed
	case errors.As(err, &pe) && (pe.Op == "stat" || pe.Op == "get"):
		return failed // the check failed: nothing was written
	}
	return unknown
}

// unfencedPut writes as fence.Put does but without comparing tokens: the
// mistake the fenced register exists to prevent.
func unfencedPut(ctx context.Context, store providers.Store, key string, token uint64, data []byte) (providers.WriteResult, error) {
	md := map[string]string{fence.TokenKey: fmt.Sprint(token)}
	for {
		a, err := store.Stat(ctx, key)
		if errors.Is(err, providers.ErrNotFound) {
			res, err := store.Create(ctx, key, data, md)
			if errors.Is(err, providers.ErrPrecondition) || errors.Is(err, providers.ErrConflict) {
				continue
			}
			return res, err
		}
		if err != nil {
			return providers.WriteResult{}, err
		}
		res, err := store.Replace(ctx, key, data, md, a.Version)
		if errors.Is(err, providers.ErrPrecondition) || errors.Is(err, providers.ErrConflict) {
			continue
		}
		return res, err
	}
}

func (p *proc) readRegister() {
	w := p.w
	k := p.target
	if p.ep != nil {
		k = p.ep.lease
	}
	ctx, cancel := p.opCtx()
	defer cancel()
	w.count("fenced-get")
	call := w.now()
	obj, tok, err := fence.Get(ctx, p.store, registerKey(k), 1<<10)
	op := regOp{proc: p.id, call: call, ret: w.now(), token: tok}
	switch {
	case err == nil:
		op.found, op.value = true, string(obj.Data)
	case errors.Is(err, providers.ErrNotFound):
	default:
		w.logf(p, "read %s: %v", registerKey(k), err)
		return // a failed read says nothing
	}
	w.mu.Lock()
	w.reg[k] = append(w.reg[k], op)
	w.mu.Unlock()
	w.logf(p, "read %s: token %d %q", registerKey(k), op.token, op.value)
}

func (p *proc) batch() {
	w := p.w
	ctx, cancel := p.opCtx()
	defer cancel()
	prefix, tok := prefixKey(p.ep.lease), p.ep.token
	b := fence.NewBatch(p.store, prefix, tok)
	for i := range 1 + p.rnd.IntN(3) {
		w.count("batch-put")
		// Names repeat, within a batch (a rewrite) and across batches of
		// one token (refused: committed objects never change).
		name := fmt.Sprintf("part-%d", p.rnd.IntN(4))
		if err := b.Put(ctx, name, []byte(fmt.Sprintf("p%d/t%d/%d", p.id, tok, i))); err != nil {
			if errors.Is(err, providers.ErrPrecondition) {
				w.count("batch-put refused")
			}
			w.logf(p, "batch put %s%s: %v", prefix, name, err)
			return
		}
	}
	if p.claim() <= 0 {
		return
	}
	if p.rnd.Float64() < w.cfg.pauseCheck {
		p.pause(time.Duration(p.rnd.Int64N(int64(w.cfg.maxPause))))
		_ = p.awaitRunning(context.Background())
	}
	w.count("commit")
	m, err := b.Commit(ctx, p.rnd.IntN(2) == 0)
	if errors.Is(err, fence.ErrStale) {
		w.count("commit refused")
	}
	if err != nil {
		w.logf(p, "commit %s token %d: %v", prefix, tok, err)
		return
	}
	w.logf(p, "commit %s token %d: %s", prefix, tok, strings.Join(m.Names(), ","))
}

func (p *proc) collect() {
	ctx, cancel := p.opCtx()
	defer cancel()
	p.w.count("collect")
	n, err := fence.Collect(ctx, p.store, prefixKey(p.ep.lease))
	p.w.logf(p, "collect %s: %d deleted, %v", prefixKey(p.ep.lease), n, err)
}

func (p *proc) renew() {
	ctx, cancel := p.opCtx()
	defer cancel()
	p.w.count("renew")
	err := p.lease.Renew(ctx)
	p.w.logf(p, "renew %s token %d: %v", leaseKey(p.ep.lease), p.ep.token, err)
	if err == nil {
		p.claim()
	}
}

func (p *proc) release() {
	w := p.w
	w.mu.Lock()
	p.ep.cut = w.now() // a holder that has decided to release no longer acts on its lease
	w.mu.Unlock()
	ctx, cancel := p.opCtx()
	defer cancel()
	w.count("release")
	call := w.now()
	err := p.lease.Release(ctx)
	w.released(p, call, err)
	w.logf(p, "release %s token %d: %v", leaseKey(p.ep.lease), p.ep.token, err)
	p.lease, p.ep = nil, nil
	if w.cfg.leases > 1 && p.rnd.IntN(2) == 0 {
		p.target = p.rnd.IntN(w.cfg.leases)
	}
}

// newWorld builds a run's store and processes; it must be called inside
// the bubble, whose clock is the simulation's real time. dir is an empty
// directory for the file store.
func newWorld(cfg config, dir string) (*world, error) {
	w := &world{cfg: cfg, start: time.Now(), nkeys: cfg.leases + 1, ops: map[string]int64{}, audit: &auditLog{}}
	w.reg = make([][]regOp, w.nkeys)
	r := rand.New(rand.NewPCG(cfg.seed, 0x5eed))
	var roots []driver.Driver
	if cfg.model == "file" {
		wall := newWallClock(rand.New(rand.NewPCG(r.Uint64(), r.Uint64())), w.start, 3*cfg.ttl)
		var err error
		if roots, err = fileRoots(dir, wall, w.audit, rand.New(rand.NewPCG(r.Uint64(), r.Uint64()))); err != nil {
			return nil, err
		}
	} else {
		roots = []driver.Driver{newModel(cfg.model, r.Uint64(), w.audit)}
	}
	w.store = providers.NewBucket(roots[len(roots)-1])
	var shared []uint64 // SessionOptions.Rand seeds of the previous process, for sharedRand
	for i := range cfg.clients {
		p := &proc{w: w, id: i,
			rnd:     rand.New(rand.NewPCG(r.Uint64(), r.Uint64())),
			cbRnd:   rand.New(rand.NewPCG(r.Uint64(), r.Uint64())),
			gateRnd: rand.New(rand.NewPCG(r.Uint64(), r.Uint64())),
			clock:   newProcClock(r, cfg, w.start),
			target:  r.IntN(cfg.leases),
		}
		root := roots[i%len(roots)]
		var err error
		if p.faults, err = newFaults(cfg, root, r); err != nil {
			return nil, err
		}
		p.root = root
		p.store = &gateStore{Store: providers.NewBucket(p.faults[0]), raw: providers.NewBucket(root), p: p, calm: &w.calm}
		seeds := make([]uint64, 2*w.nkeys)
		for j := range seeds {
			seeds[j] = r.Uint64()
		}
		holder := fmt.Sprintf("p%d", i)
		if cfg.sharedRand && i%2 == 1 {
			// Two processes configured alike: one SessionOptions.Rand seed, one
			// holder name.
			seeds, holder = shared, fmt.Sprintf("p%d", i-1)
		}
		shared = seeds
		force := cfg.force && i%3 == 0
		for k := range w.nkeys {
			opts := objlease.Options{TTL: cfg.ttl, DriftBound: cfg.drift, Holder: holder, Force: force}
			rnd := rand.New(rand.NewPCG(seeds[2*k], seeds[2*k+1]))
			if cfg.storeClock {
				opts.StoreClock = true
			}
			var c *objlease.Client
			if i < cfg.electors && k == cfg.leases {
				// An elector's client for the election is its Elector's
				// own, kept from one campaign to the next.
				if p.elector, err = newElector(p, opts, rnd); err != nil {
					return nil, err
				}
			} else if c, err = newOn(p.store, leaseKey(k), p.session(rnd), opts); err != nil {
				return nil, err
			}
			byName, err := newOn(p.store, leaseKey(k), p.session(rand.New(rand.NewPCG(r.Uint64(), r.Uint64()))), opts)
			if err != nil {
				return nil, err
			}
			p.clients = append(p.clients, c)
			p.byName = append(p.byName, byName)
			p.opts = append(p.opts, opts)
		}
		w.procs = append(w.procs, p)
	}
	if cfg.workers > 0 {
		if err := w.addGroup(dir); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// run runs the processes (and the operator, if any) for the configured
// duration, then lets every one of them release what it holds with the
// faults switched off.
func (w *world) run() {
	var wg sync.WaitGroup
	for _, p := range w.procs {
		wg.Add(1)
		go p.run(&wg)
		if w.cfg.machines != plain && p.id >= w.cfg.electors {
			wg.Add(1)
			go p.keepOwnLease(&wg)
		}
	}
	for _, p := range w.workers {
		wg.Add(1)
		go p.work(&wg)
	}
	if w.cfg.operator > 0 {
		wg.Add(1)
		go w.operate(&wg, rand.New(rand.NewPCG(w.cfg.seed, 0x0fe7a)))
	}
	time.Sleep(w.cfg.duration)
	w.mu.Lock()
	w.opsAt = len(w.trace)
	w.mu.Unlock()
	w.calm.Store(true)
	for _, p := range append(w.procs, w.workers...) {
		for _, f := range p.faults {
			f.ReleaseStalls()
		}
	}
	wg.Wait()
	w.late.Wait()
}
