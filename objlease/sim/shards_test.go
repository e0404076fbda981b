package sim

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/objlease/objlease/internal/entropy"
	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/fence"
	"github.com/objlease/objlease/objlease/shard"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/driver"
	"github.com/objlease/objlease/providers/faulty"
)

// A shard group runs beside the leases: workers (processes with their own
// clocks and fault injectors) join it, own shards, write each shard's
// output fenced by its shard token, leave it gracefully, crash and are
// restarted. It has a store model of its own, of the run's kind, so that
// its requests do not change what the leases' seeds do.

// groupPrefix is the group's prefix in its store.
const groupPrefix = "groups/g"

// shardOutKey is the fenced output object of shard id.
func shardOutKey(id string) string { return groupPrefix + "/out/" + id }

func shardIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("s%d", i)
	}
	return ids
}

// incarnation is one run of a worker process, from its start to its
// graceful leave or its crash.
type incarnation struct {
	n       int
	store   *gateStore
	dead    atomic.Bool
	crashed time.Duration // when it crashed; under world.mu, 0: it did not
}

// term is one run of Work for one shard: from its start to its return, or
// to the end of its lease's context if the lease was lost rather than
// released (after that only fencing stops it), or to the crash of its
// process.
type term struct {
	worker   int
	inc      *incarnation
	shard    string
	token    uint64
	from, to time.Duration // to: -1 while it runs
}

// groupShape draws the group from a generator of its own, so that the
// leases' part of every seed is what it was without the group.
// Half the seeds have a group, which keeps the short run short.
func groupShape(c *config) {
	r := rand.New(rand.NewPCG(c.seed, 0x54a2d))
	c.workers = 2 + r.IntN(3)
	c.shards = 1 + r.IntN(5)
	if rand.New(rand.NewPCG(c.seed, 0x54a2e)).IntN(2) == 0 {
		c.workers = 0
	}
}

// addGroup builds the group's store and its worker processes; dir is an
// empty directory for the file store.
func (w *world) addGroup(dir string) error {
	cfg := w.cfg
	r := rand.New(rand.NewPCG(cfg.seed, 0x9a0b))
	w.gaudit = &auditLog{}
	var roots []driver.Driver
	if cfg.model == "file" {
		dir = filepath.Join(dir, "group")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		wall := newWallClock(rand.New(rand.NewPCG(r.Uint64(), r.Uint64())), w.start, 3*cfg.ttl)
		var err error
		if roots, err = fileRoots(dir, wall, w.gaudit, rand.New(rand.NewPCG(r.Uint64(), r.Uint64()))); err != nil {
			return err
		}
	} else {
		roots = []driver.Driver{newModel(cfg.model, r.Uint64(), w.gaudit)}
	}
	w.gstore = providers.NewBucket(roots[len(roots)-1])
	for i := range cfg.workers {
		p := &proc{w: w, id: i, worker: true,
			rnd:     rand.New(rand.NewPCG(r.Uint64(), r.Uint64())),
			gateRnd: rand.New(rand.NewPCG(r.Uint64(), r.Uint64())),
			clock:   newProcClock(r, cfg, w.start),
			root:    roots[i%len(roots)],
		}
		var err error
		if p.faults, err = newFaults(cfg, p.root, r); err != nil {
			return err
		}
		w.workers = append(w.workers, p)
	}
	return nil
}

// errCrashed is what a crashed process's requests meet: none goes out.
var errCrashed = errors.New("the process crashed")

// work is a worker process: it joins the group, stays a while, then
// leaves gracefully or crashes (and is restarted after a while), until
// the run ends.
func (p *proc) work(wg *sync.WaitGroup) {
	defer wg.Done()
	w := p.w
	p.sleep(time.Duration(p.rnd.Int64N(int64(time.Second))))
	for n := 0; w.now() < w.cfg.duration; n++ {
		inc := &incarnation{n: n}
		inc.store = &gateStore{Store: providers.NewBucket(p.faults[0]), raw: providers.NewBucket(p.root), p: p, calm: &w.calm, dead: &inc.dead}
		opts := objlease.Options{TTL: w.cfg.ttl, DriftBound: w.cfg.drift}
		if w.cfg.storeClock {
			opts.StoreClock = true
		}
		member := fmt.Sprintf("w%d", p.id)
		sess, err := objlease.NewSession(inc.store, objlease.SessionOptions{Clock: p.clock.lib,
			Rand: rand.New(rand.NewPCG(p.rnd.Uint64(), p.rnd.Uint64()))})
		if err != nil {
			panic(err)
		}
		wk, err := shard.New(sess, groupPrefix, opts, shard.Config{Member: member, Shards: shardIDs(w.cfg.shards), Work: func(ctx context.Context, s *shard.Shard) { p.shardWork(ctx, s, inc) }})
		if err != nil {
			panic(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = wk.Run(ctx)
		}()
		w.count("worker join")
		w.logf(p, "worker %s (incarnation %d) joins %s", member, n, groupPrefix)
		stay := 5*time.Second + time.Duration(p.rnd.Int64N(int64(time.Minute)))
		end := max(w.cfg.duration-w.now(), 0) + 1 + time.Duration(p.rnd.Int64N(int64(time.Second)))
		p.sleep(min(stay, end)) // workers leave at distinct instants after the run
		if p.rnd.IntN(3) == 0 && !w.calm.Load() {
			// A crash: nothing of the process acts again; its leases
			// expire.
			w.mu.Lock()
			inc.crashed = w.now()
			w.mu.Unlock()
			inc.dead.Store(true)
			w.count("worker crash")
			w.logf(p, "worker %s crashed", member)
			cancel()
			<-done
			p.sleep(time.Duration(p.rnd.Int64N(int64(2 * w.cfg.ttl))))
			continue
		}
		cancel()
		<-done
		w.count("worker leave")
		w.logf(p, "worker %s left", member)
		p.sleep(time.Duration(p.rnd.Int64N(int64(3 * time.Second))))
	}
}

// shardWork is Work: while it owns the shard it writes the shard's output
// fenced by its token, pausing now and then between checking its lease
// and writing; once its context ends it takes a moment to stop.
func (p *proc) shardWork(ctx context.Context, s *shard.Shard, inc *incarnation) {
	w := p.w
	h := fnv.New64a()
	fmt.Fprint(h, p.id, inc.n, s.ID)
	rnd := rand.New(rand.NewPCG(w.cfg.seed^h.Sum64(), s.Token()))
	t := &term{worker: p.id, inc: inc, shard: s.ID, token: s.Token(), from: w.now(), to: -1}
	var ended atomic.Int64
	ended.Store(-1)
	stop := context.AfterFunc(s.Lease.Context(), func() { ended.Store(int64(w.now())) })
	defer stop()
	w.mu.Lock()
	w.terms = append(w.terms, t)
	w.mu.Unlock()
	w.count("shard owned")
	// As an elector's callback does: a lease granted already expired is
	// ended at this very instant; let that happen first. Once the run winds
	// down a worker may take several shards in one instant; their Works
	// start apart.
	time.Sleep(time.Microsecond + time.Duration(rnd.Int64N(int64(time.Millisecond))))
	w.logf(p, "owns shard %s token %d", s.ID, s.Token())
	for ctx.Err() == nil && !inc.dead.Load() {
		p.shardPut(rnd, s, inc)
		tm := time.NewTimer(50*time.Millisecond + time.Duration(rnd.Int64N(int64(2*time.Second))))
		select {
		case <-ctx.Done():
			// Every Work of a worker that leaves wakes at this instant:
			// none waits out a pause before its own draw below, so that
			// they arrive at the gate at distinct instants.
			tm.Stop()
		case <-tm.C:
			_ = p.awaitRunning(context.Background())
		}
	}
	// Stopping takes a moment (the write in flight, a flush): the next
	// owner must not start meanwhile.
	time.Sleep(1 + time.Duration(rnd.Int64N(int64(time.Second))))
	_ = p.awaitRunning(context.Background())
	end := w.now()
	if c := time.Duration(ended.Load()); c >= 0 && c < end && !errors.Is(context.Cause(s.Lease.Context()), objlease.ErrReleased) {
		// The lease was lost (or ran out while a paused process had not
		// handed it over yet): the library promises only that the context
		// ended by then, and after that only fencing stops Work.
		end = c
	}
	w.mu.Lock()
	if inc.crashed > 0 && inc.crashed < end {
		end = inc.crashed
	}
	t.to = end
	w.mu.Unlock()
	w.logf(p, "stopped work on shard %s token %d (%v)", s.ID, s.Token(), context.Cause(ctx))
}

// shardPut writes the shard's output stamped with its token.
func (p *proc) shardPut(rnd *rand.Rand, s *shard.Shard, inc *incarnation) {
	w := p.w
	if s.Lease.ValidFor() <= 0 {
		return
	}
	if rnd.Float64() < w.cfg.pauseCheck {
		p.pause(time.Duration(rnd.Int64N(int64(w.cfg.maxPause))))
		_ = p.awaitRunning(context.Background())
	}
	n := p.writes.Add(1)
	key, tok := shardOutKey(s.ID), s.Token()
	value := fmt.Sprintf("w%d/t%d/w%d", p.id, tok, n)
	ctx, cancel := p.opCtx()
	defer cancel()
	var err error
	if w.cfg.unfenced {
		_, err = unfencedPut(ctx, inc.store, key, tok, []byte(value))
	} else {
		_, err = fence.Put(ctx, inc.store, key, tok, []byte(value), fence.Options{UniquePayloads: true})
	}
	out := classify(err)
	w.count("shard-put")
	w.count("shard-put " + out.String())
	w.logf(p, "fenced put %s token %d %q: %v (%v)", key, tok, value, out, err)
}

// checkShardTerms: no two workers' Work for one shard runs at once.
func checkShardTerms(terms []*term) []violation {
	var v []violation
	byShard := map[string][]*term{}
	for _, t := range terms {
		byShard[t.shard] = append(byShard[t.shard], t)
	}
	ids := make([]string, 0, len(byShard))
	for id := range byShard {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		ts := byShard[id]
		for i, a := range ts {
			for _, b := range ts[i+1:] {
				first, second := a, b
				if b.from < a.from {
					first, second = b, a
				}
				end := first.to
				if end < 0 {
					end = 1<<63 - 1
				}
				if second.from+overlapSlack >= end {
					continue
				}
				v = append(v, violation{vShardOverlap, fmt.Sprintf("shard %s: w%d (token %d) worked on it from %v to %v; w%d (token %d) started at %v, %v before that ended",
					id, first.worker, first.token, first.from, first.to, second.worker, second.token, second.from, end-second.from), second.from})
			}
		}
	}
	return v
}

// checkShardWrites: what the store accepted at each shard's output, in its
// own order, never goes back to a lower token.
func checkShardWrites(writes []applied, start time.Time) []violation {
	var v []violation
	type high struct {
		token uint64
		at    time.Duration
	}
	hi := map[string]high{}
	prefix := groupPrefix + "/out/"
	for _, a := range writes {
		if !strings.HasPrefix(a.key, prefix) {
			continue
		}
		tok, _ := strconv.ParseUint(a.metadata[fence.TokenKey], 10, 64)
		at := a.at.Sub(start)
		if h := hi[a.key]; tok < h.token {
			v = append(v, violation{vShardBack, fmt.Sprintf("%s: at %v it accepted token %d (%q), after token %d at %v", a.key, at, tok, a.data, h.token, h.at), at})
			continue
		}
		hi[a.key] = high{tok, at}
	}
	return v
}

// newFaults wraps root in a process's two fault injectors: the inner one
// refuses, loses replies, stalls and now and then holds a request for
// long; the outer one adds the everyday latency of a network.
func newFaults(cfg config, root driver.Driver, r *rand.Rand) ([]*faulty.Driver, error) {
	f := cfg.faults
	write := faulty.Rates{Precondition: 0.002 * f, Conflict: 0.01 * f, Throttled: 0.01 * f, Unknown: 0.01 * f, LostReply: 0.02 * f, Stall: 0.002 * f, Delay: 0.01 * f}
	read := faulty.Rates{Throttled: 0.01 * f, Unknown: 0.01 * f, Stall: 0.002 * f, Delay: 0.01 * f}
	inner, err := faulty.New(root, faulty.Config{Seed: r.Uint64(), Default: read,
		Ops:      map[faulty.Op]faulty.Rates{faulty.Create: write, faulty.Replace: write, faulty.Delete: write},
		MinDelay: 100 * time.Millisecond, MaxDelay: cfg.ttl})
	if err != nil {
		return nil, err
	}
	outer, err := faulty.New(inner, faulty.Config{Seed: r.Uint64(), Default: faulty.Rates{Delay: 1},
		MinDelay: time.Millisecond, MaxDelay: 40 * time.Millisecond})
	if err != nil {
		return nil, err
	}
	return []*faulty.Driver{outer, inner}, nil
}

// The shard checks can fail: a history in which a shard's output accepts
// a lower token after a higher one, and one in which a second worker's
// Work starts before the first's ended, are both reported; the same
// histories in order are not.
func TestShardChecksCanFail(t *testing.T) {
	start := time.Now()
	put := func(sec int, key string, tok uint64) applied {
		return applied{at: start.Add(time.Duration(sec) * time.Second), op: "replace", key: key,
			metadata: map[string]string{fence.TokenKey: strconv.FormatUint(tok, 10)}}
	}
	a, b := shardOutKey("s0"), shardOutKey("s1")
	good := []applied{put(1, a, 1), put(2, b, 5), put(3, a, 1), put(4, a, 3), put(5, b, 5)}
	if v := checkShardWrites(good, start); len(v) > 0 {
		t.Errorf("writes in token order: %v", v)
	}
	bad := append(good, put(6, b, 7), put(7, a, 2))
	if v := checkShardWrites(bad, start); len(v) != 1 || v[0].kind != vShardBack || !strings.Contains(v[0].msg, a) {
		t.Errorf("token 2 after token 3 at %s: got %v, want one %q", a, v, vShardBack)
	}

	s := time.Second
	inOrder := []*term{{worker: 0, shard: "s0", token: 1, from: 1 * s, to: 5 * s}, {worker: 1, shard: "s0", token: 2, from: 5 * s, to: 9 * s},
		{worker: 0, shard: "s1", token: 1, from: 2 * s, to: 8 * s}}
	if v := checkShardTerms(inOrder); len(v) > 0 {
		t.Errorf("one Work per shard at a time: %v", v)
	}
	overlap := append(inOrder, &term{worker: 2, shard: "s1", token: 2, from: 7 * s, to: 10 * s})
	if v := checkShardTerms(overlap); len(v) != 1 || v[0].kind != vShardOverlap || v[0].at != 7*s {
		t.Errorf("w2 starting on s1 at 7s while w0 works on it to 8s: got %v, want one %q at 7s", v, vShardOverlap)
	}
	running := append(inOrder, &term{worker: 1, shard: "s1", token: 3, from: 20 * s, to: -1}, &term{worker: 2, shard: "s1", token: 4, from: 30 * s, to: 31 * s})
	if v := checkShardTerms(running); len(v) != 1 || v[0].kind != vShardOverlap {
		t.Errorf("a Work that never ended: got %v, want one %q", v, vShardOverlap)
	}
}

// Seeds of the simulation that found a shard group fault, replayed on
// every run: 13, 14, 74, 104: a worker's TryAcquire of a shard returned after
// the lease had already expired (the process was paused while the reply
// was on its way); Work started with a live context while another worker,
// with a higher token, owned the shard. Now a lease granted expired starts
// no Work.
func TestShardFindingSeeds(t *testing.T) {
	for _, seed := range []uint64{13, 14, 74, 104} {
		cfg := configFor(seed)
		cfg.machines = plain // as when it was found
		r := simulate(t, cfg)
		for _, v := range r.violations {
			t.Errorf("seed %d: %s: %s", seed, v.kind, v.msg)
		}
	}
}

// simulateGroup runs the seed's shard group in a bubble of its own, with
// nonce salt of its own, and adds what it found to res: the group's
// requests then cannot change the draws of the leases' part of the seed.
// Its trace is merged into res's by time but left out of res.hash: the
// library's renewal scheduler may send several of a worker's renewals at
// one instant, in an order the seed does not fix (see docs/reliability.md).
func simulateGroup(t *testing.T, cfg config, res *result) {
	dir := fileStoreDir(t)
	synctest.Test(t, func(t *testing.T) {
		salt := rand.New(rand.NewPCG(cfg.seed, 0x5a18))
		defer entropy.Replace(func(b []byte) {
			for i := range b {
				b[i] = byte(salt.Uint32())
			}
		})()
		gcfg := cfg
		gcfg.clients, gcfg.electors, gcfg.operator = 0, 0, 0
		w, err := newWorld(gcfg, dir)
		if err != nil {
			t.Fatal(err)
		}
		w.run()
		// Workers leave just after the run: let their late writes land.
		time.Sleep(2 * cfg.ttl)
		res.violations = append(res.violations, w.check()...)
		for k, v := range w.ops {
			res.ops[k] += v
		}
		for _, p := range w.workers {
			res.requests += p.faults[0].Requests()
			for _, f := range p.faults {
				res.faults = res.faults.Add(f.Counts())
			}
		}
		// Both traces are in time order; merge them.
		trace, times := make([]string, 0, len(res.trace)+len(w.trace)), make([]time.Duration, 0, len(res.trace)+len(w.trace))
		i, j := 0, 0
		for i < len(res.trace) || j < len(w.trace) {
			if j == len(w.trace) || i < len(res.trace) && res.times[i] <= w.times[j] {
				trace, times = append(trace, res.trace[i]), append(times, res.times[i])
				i++
			} else {
				trace, times = append(trace, w.trace[j]), append(times, w.times[j])
				j++
			}
		}
		res.trace, res.times = trace, times
	})
}
