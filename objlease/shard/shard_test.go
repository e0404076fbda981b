package shard_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/objlease/shard"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/faulty"
	"github.com/objlease/objlease/providers/mem"
	"github.com/objlease/objlease/providers/providertest"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const (
	ttl   = 10 * time.Second
	drift = 0.01
)

// killable is one worker's path to the store: while dead every request
// fails, as for a process that stopped or was cut off. It notes when each
// write to a key was last sent, so that a test can bound takeovers from
// below.
type killable struct {
	providers.Store
	clk  clock.Clock
	dead atomic.Bool
	mu   sync.Mutex
	sent map[string]time.Time
	// reads and writes count the requests sent (lists, gets and stats;
	// creates, replaces and deletes).
	reads, writes atomic.Int64
	// sp is the group's shards prefix; shardReads and shardLists count the
	// reads of shard records and the listings that cover them.
	sp                     string
	shardReads, shardLists atomic.Int64
	// mp is the group's members prefix; memberReads counts the reads of
	// other members' records (heartbeats).
	mp          string
	memberReads atomic.Int64
}

func (k *killable) countRead(key string) {
	k.reads.Add(1)
	if k.sp != "" && strings.HasPrefix(key, k.sp) {
		k.shardReads.Add(1)
	}
	if k.mp != "" && strings.HasPrefix(key, k.mp) {
		k.memberReads.Add(1)
	}
}

var errCut = errors.New("cut off from the store")

func (k *killable) write(op, key string, do func() error) error {
	if k.dead.Load() {
		return providers.Wrap(op, key, providers.ErrUnknownOutcome, errCut)
	}
	k.writes.Add(1)
	now := k.clk.Now()
	err := do()
	if err == nil {
		k.mu.Lock()
		k.sent[key] = now
		k.mu.Unlock()
	}
	return err
}

func (k *killable) lastSent(key string) time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.sent[key]
}

func (k *killable) Get(ctx context.Context, key string, max int64) (*providers.Object, error) {
	if k.dead.Load() {
		return nil, providers.Wrap("get", key, errCut, nil)
	}
	k.countRead(key)
	return k.Store.Get(ctx, key, max)
}

func (k *killable) Stat(ctx context.Context, key string) (*providers.Attrs, error) {
	if k.dead.Load() {
		return nil, providers.Wrap("stat", key, errCut, nil)
	}
	k.countRead(key)
	return k.Store.Stat(ctx, key)
}

func (k *killable) List(ctx context.Context, prefix, page string, n int) (providers.ListPage, error) {
	if k.dead.Load() {
		return providers.ListPage{}, providers.Wrap("list", prefix, errCut, nil)
	}
	k.reads.Add(1)
	if k.sp != "" && strings.HasPrefix(k.sp, prefix) {
		k.shardLists.Add(1)
	}
	return k.Store.List(ctx, prefix, page, n)
}

func (k *killable) Create(ctx context.Context, key string, data []byte, md map[string]string) (r providers.WriteResult, err error) {
	err = k.write("create", key, func() error { r, err = k.Store.Create(ctx, key, data, md); return err })
	return r, err
}

func (k *killable) Replace(ctx context.Context, key string, data []byte, md map[string]string, v string) (r providers.WriteResult, err error) {
	err = k.write("replace", key, func() error { r, err = k.Store.Replace(ctx, key, data, md, v); return err })
	return r, err
}

func (k *killable) Delete(ctx context.Context, key, v string) error {
	return k.write("delete", key, func() error { return k.Store.Delete(ctx, key, v) })
}

// checker records every Work call and fails the test if two run at once
// for one shard: the next owner's Work must not start before the previous
// owner's has returned.
type checker struct {
	t       *testing.T
	clk     clock.Clock
	linger  time.Duration // real time Work goes on after its context ends
	mu      sync.Mutex
	running map[string]string // shard -> member whose Work runs
	starts  []start
	overlap []string
}

type start struct {
	shard, member string
	token         uint64
	at            time.Time
}

func newChecker(t *testing.T, clk clock.Clock) *checker {
	return &checker{t: t, clk: clk, running: map[string]string{}}
}

func (c *checker) work(member string) func(ctx context.Context, s *shard.Shard) {
	return func(ctx context.Context, s *shard.Shard) {
		c.mu.Lock()
		if other, ok := c.running[s.ID]; ok {
			c.overlap = append(c.overlap, fmt.Sprintf("shard %s: %s started (token %d) while %s's Work still ran", s.ID, member, s.Token(), other))
		}
		c.running[s.ID] = member
		c.starts = append(c.starts, start{s.ID, member, s.Token(), c.clk.Now()})
		c.mu.Unlock()
		<-ctx.Done()
		time.Sleep(c.linger)
		c.mu.Lock()
		if c.running[s.ID] == member {
			delete(c.running, s.ID)
		}
		c.mu.Unlock()
	}
}

// startsSince returns the Work starts from index i on.
func (c *checker) startsSince(i int) []start {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]start(nil), c.starts[i:]...)
}

func (c *checker) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.starts)
}

func (c *checker) overlaps() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.overlap...)
}

type node struct {
	w      *shard.Worker
	store  *killable
	cancel context.CancelFunc
	done   chan struct{}
}

type group struct {
	t      *testing.T
	clk    *clock.Fake
	store  providers.Store
	ids    []string
	chk    *checker
	nodes  map[string]*node
	prefix string
	drift  float64
	// overlapExpected: a test with a safeguard off, where the checker
	// must see overlaps; cleanup does not fail the test for them.
	overlapExpected bool
}

func newGroup(t *testing.T, store providers.Store, m int) *group {
	clk := clock.NewFake(epoch)
	ids := make([]string, m)
	for i := range ids {
		ids[i] = fmt.Sprintf("s%02d", i)
	}
	g := &group{t: t, clk: clk, store: store, ids: ids, chk: newChecker(t, clk), nodes: map[string]*node{}, prefix: "pipeline", drift: drift}
	t.Cleanup(func() {
		for _, n := range g.nodes {
			n.cancel()
		}
		for _, n := range g.nodes {
			g.waitStopped(n)
		}
		// A lease whose release could not be written (a worker cut off)
		// stays with its session until its validity ends on the fake
		// clock; the bubble must not end with its scheduler asleep.
		g.quiet(2 * ttl)
		if o := g.chk.overlaps(); len(o) > 0 && !g.overlapExpected {
			t.Errorf("two owners' Work ran at once:\n%v", o)
		}
	})
	return g
}

func (g *group) options() objlease.Options {
	return objlease.Options{TTL: ttl, RenewInterval: 2 * time.Second, PollInterval: time.Second, DriftBound: g.drift}
}

// newWorker returns a worker of the group under prefix, in a session of
// its own on store and clk.
func newWorker(store providers.Store, clk clock.Clock, prefix string, opts objlease.Options, cfg shard.Config) (*shard.Worker, error) {
	so := objlease.SessionOptions{Clock: clk}
	if testing.Verbose() {
		so.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	sess, err := objlease.NewSession(store, so)
	if err != nil {
		return nil, err
	}
	return shard.New(sess, prefix, opts, cfg)
}

func (g *group) join(name string) *node {
	g.t.Helper()
	ks := &killable{Store: g.store, clk: g.clk, sent: map[string]time.Time{}, sp: shard.ShardsPrefix(g.prefix), mp: shard.MembersPrefix(g.prefix)}
	w, err := newWorker(ks, g.clk, g.prefix, g.options(), shard.Config{Member: name, Shards: g.ids, Work: g.chk.work(name)})
	if err != nil {
		g.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &node{w: w, store: ks, cancel: cancel, done: make(chan struct{})}
	go func() { defer close(n.done); w.Run(ctx) }()
	g.nodes[name] = n
	return n
}

// waitStopped waits for a node's Run to return, advancing the fake clock
// meanwhile (Work may linger, and renewals go on until it returns).
func (g *group) waitStopped(n *node) {
	g.t.Helper()
	for i := 0; ; i++ {
		select {
		case <-n.done:
			return
		case <-time.After(time.Millisecond):
		}
		if i > 20000 {
			g.t.Fatal("Run did not return")
		}
	}
}

// balanced reports whether the live nodes own every shard between them,
// each floor(M/N) or ceil(M/N).
func (g *group) balanced(live ...string) bool {
	m, n := len(g.ids), len(live)
	total := 0
	for _, name := range live {
		k := len(g.nodes[name].w.Owned())
		if k < m/n || k > (m+n-1)/n {
			return false
		}
		total += k
	}
	return total == m
}

// drive advances the fake clock in steps until cond holds, and returns how
// much fake time that took.
func (g *group) drive(what string, cond func() bool) time.Duration {
	g.t.Helper()
	start := g.clk.Now()
	for i := 0; i < 20000; i++ {
		if cond() {
			return g.clk.Now().Sub(start)
		}
		g.step()
	}
	for name, n := range g.nodes {
		g.t.Logf("%s owns %v", name, n.w.Owned())
	}
	g.t.Fatalf("never happened: %s", what)
	return 0
}

// quiet advances the fake clock by d.
func (g *group) quiet(d time.Duration) {
	for end := g.clk.Now().Add(d); g.clk.Now().Before(end); {
		g.step()
	}
}

// step advances the fake clock by 100 ms and waits (up to 50 ms of real
// time) for the woken goroutines to go back to sleep: every running worker
// waits for its next round, and the renewal schedulers are asleep with no
// renewal in flight. Without the wait a goroutine the scheduler starves
// would see fake seconds pass at once and lose its leases.
func (g *group) step() {
	g.clk.Advance(100 * time.Millisecond)
	running := 0
	for _, n := range g.nodes {
		select {
		case <-n.done:
		default:
			running++
		}
	}
	synctest.Wait()
	// Work that lingers after its context ended (checker.linger) sleeps
	// on the bubble's time, which moves only while every goroutine sleeps.
	time.Sleep(100 * time.Microsecond)
	synctest.Wait()
}

// settle drives the group until the live nodes are balanced and have been
// for a while, so that the moves of joining are over.
func (g *group) settle(live ...string) {
	g.t.Helper()
	g.drive("balanced", func() bool { return g.balanced(live...) })
	g.quiet(15 * time.Second)
	if !g.balanced(live...) {
		g.t.Fatalf("%v not balanced after settling", live)
	}
}

func names(n int) []string {
	var s []string
	for i := range n {
		s = append(s, fmt.Sprintf("w%d", i+1))
	}
	return s
}

func TestJoinMovesOnlyWhatMustAndQuietMovesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, mem.New(), 12)
		for _, n := range names(3) {
			g.join(n)
		}
		g.settle(names(3)...)

		before := g.chk.count()
		g.join("w4")
		took := g.drive("4 workers balanced", func() bool { return g.balanced(names(4)...) })
		t.Logf("after a join: balanced in %v of fake time", took)
		g.quiet(10 * time.Second) // anything still under way lands
		if moved := g.chk.startsSince(before); len(moved) != 3 {
			t.Fatalf("N 3→4 with M=12 moved %d shards, want exactly 3: %v", len(moved), moved)
		} else {
			for _, s := range moved {
				if s.member != "w4" {
					t.Errorf("shard %s moved to %s, want only moves to the newcomer", s.shard, s.member)
				}
			}
		}

		before = g.chk.count()
		g.quiet(5 * time.Minute)
		if moved := g.chk.startsSince(before); len(moved) != 0 {
			t.Fatalf("a quiet balanced group moved %d shards in 5 minutes: %v", len(moved), moved)
		}
		if !g.balanced(names(4)...) {
			t.Fatal("not balanced after the quiet period")
		}
	})
}

func TestDeadWorkerShardsTakenAfterTTLNotBefore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, mem.New(), 12)
		// A drift bound wide enough that taking over at the bare TTL, a round
		// late, would still be early (the test fails with
		// safeguards.DriftMargin off).
		g.drift = 0.2
		for _, n := range names(4) {
			g.join(n)
		}
		g.settle(names(4)...)

		dead := g.nodes["w4"]
		orphans := dead.w.Owned()
		before := g.chk.count()
		dead.store.dead.Store(true)
		took := g.drive("3 survivors balanced", func() bool {
			return g.balanced(names(3)...) && len(dead.w.Owned()) == 0
		})
		t.Logf("after a death: balanced in %v of fake time (TTL %v)", took, ttl)
		g.quiet(10 * time.Second)
		moved := g.chk.startsSince(before)
		if len(moved) != len(orphans) || len(orphans) != 3 {
			t.Fatalf("the dead worker owned %v; %d shards moved, want exactly those: %v", orphans, len(moved), moved)
		}
		wait := time.Duration(float64(ttl) * (1 + g.drift))
		round := g.options().PollInterval
		lastMember := dead.store.lastSent(shard.MemberKey(g.prefix, "w4"))
		for _, s := range moved {
			last := dead.store.lastSent(shard.ShardKey(g.prefix, s.shard))
			if s.at.Before(last.Add(wait)) {
				t.Errorf("shard %s taken by %s at %v, before TTL×(1+b) = %v after the dead owner's last write at %v",
					s.shard, s.member, s.at.Sub(epoch), wait, last.Sub(epoch))
			}
			// The bound docs/sharing.md states: TTL × (1 + b), a renewal
			// interval and four rounds after the dead owner's last write (of
			// the shard or of its membership, which must expire too): the
			// survivors list the shards only once the owner's renewals are
			// overdue, and date its shards' versions from that listing.
			lastWrite := last
			if lastMember.After(lastWrite) {
				lastWrite = lastMember
			}
			late := s.at.Sub(lastWrite.Add(wait))
			bound := g.options().RenewInterval + 4*round
			t.Logf("shard %s taken by %s %v after TTL×(1+b) past the owner's last write", s.shard, s.member, late)
			if late > bound {
				t.Errorf("shard %s taken %v after TTL×(1+b) past its dead owner's last write, want within a renewal interval and four rounds (%v)", s.shard, late, bound)
			}
		}
	})
}

// TestSettledGroupRequestsPerRound counts the requests of a settled group:
// per round one listing, a read of each shard owned by another live member
// about once per TTL, and the renewals; no member reads another's record
// (TestSettledGroupReadsNoHeartbeat).
func TestSettledGroupRequestsPerRound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, m = 3, 12
		g := newGroup(t, mem.New(), m)
		for _, name := range names(n) {
			g.join(name)
		}
		g.settle(names(n)...)
		g.quiet(ttl) // rebalancing's extra reads are over
		o := g.options()
		const window = 30 * time.Second
		type count struct{ reads, writes int64 }
		before := map[string]count{}
		for name, nd := range g.nodes {
			before[name] = count{nd.store.reads.Load(), nd.store.writes.Load()}
		}
		g.quiet(window)
		rounds := int64(window/o.PollInterval) + 1
		renewals := int64(window/o.RenewInterval) + 1
		refreshes := int64(window/ttl) + 1
		for _, name := range names(n) {
			nd := g.nodes[name]
			reads := nd.store.reads.Load() - before[name].reads
			writes := nd.store.writes.Load() - before[name].writes
			owned := int64(len(nd.w.Owned()))
			maxReads := rounds + (m-owned)*refreshes
			maxWrites := (owned + 1) * renewals
			t.Logf("%s (owns %d): %d reads, %d writes in %d rounds: %.1f reads per round (at most %.1f)",
				name, owned, reads, writes, rounds-1, float64(reads)/float64(rounds-1), float64(maxReads)/float64(rounds-1))
			if reads > maxReads {
				t.Errorf("%s sent %d reads in %d rounds of a settled group, want at most %d: one listing per round, (M−owned) shard reads per TTL",
					name, reads, rounds-1, maxReads)
			}
			if writes > maxWrites {
				t.Errorf("%s sent %d writes in %v, want at most %d: one renewal per held lease per renewal interval", name, writes, window, maxWrites)
			}
		}
	})
}

// TestSettledGroupReadsNoHeartbeat: the members of a settled group judge
// one another from the listing of the members' records, whose versions
// change with every renewal: nobody reads another's record, so the group's
// requests grow with N, not N × (N − 1). A member that leaves is read once
// its version stops changing, and the others see it gone.
func TestSettledGroupReadsNoHeartbeat(t *testing.T) {
	for _, n := range []int{2, 8, 16} {
		t.Run(fmt.Sprintf("N%d", n), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := newGroup(t, mem.New(), 2*n)
				for _, name := range names(n) {
					g.join(name)
				}
				g.settle(names(n)...)
				g.quiet(3 * ttl)
				var reads int64
				for _, nd := range g.nodes {
					reads -= nd.store.memberReads.Load()
				}
				const window = 6 * ttl
				g.quiet(window)
				for _, nd := range g.nodes {
					reads += nd.store.memberReads.Load()
				}
				t.Logf("N=%d: %d reads of members' records in %v", n, reads, window)
				if reads != 0 {
					t.Errorf("a settled group of %d read members' records %d times in %v, want none", n, reads, window)
				}
				leaving := g.nodes[names(n)[n-1]]
				leaving.cancel()
				g.waitStopped(leaving)
				g.settle(names(n)[:n-1]...)
			})
		})
	}
}

// TestSettledGroupShardRequestsDoNotGrowWithMembersTimesShards: in a
// settled group the members neither list nor read one another's shards
// every round; the shard-related requests of the whole group are the
// owners' renewals and a periodic listing by each member (every two to
// three TTLs), whatever N × M is.
func TestSettledGroupShardRequestsDoNotGrowWithMembersTimesShards(t *testing.T) {
	for _, c := range []struct{ n, m int }{{2, 10}, {4, 40}, {8, 80}} {
		t.Run(fmt.Sprintf("N%d_M%d", c.n, c.m), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := newGroup(t, mem.New(), c.m)
				for _, name := range names(c.n) {
					g.join(name)
				}
				g.settle(names(c.n)...)
				g.quiet(3 * ttl) // the scans of settling are over
				const window = 6 * ttl
				var reads, lists, writes int64
				count := func(sign int64) {
					for _, nd := range g.nodes {
						reads += sign * nd.store.shardReads.Load()
						lists += sign * nd.store.shardLists.Load()
						writes += sign * nd.store.writes.Load()
					}
				}
				count(-1)
				g.quiet(window)
				count(1)
				o := g.options()
				// Each member lists the shards at most once per two TTLs, plus
				// one for the window's edge; nobody reads a live owner's shard.
				maxLists := int64(c.n) * (int64(window/(2*ttl)) + 1)
				maxWrites := int64(c.m+c.n) * (int64(window/o.RenewInterval) + 1)
				t.Logf("N=%d M=%d in %v: %d shard listings, %d shard reads, %d writes", c.n, c.m, window, lists, reads, writes)
				if reads != 0 {
					t.Errorf("a settled group read shard records %d times in %v, want none", reads, window)
				}
				if lists > maxLists {
					t.Errorf("a settled group listed its shards %d times in %v, want at most %d (each member once per two TTLs)", lists, window, maxLists)
				}
				if writes > maxWrites {
					t.Errorf("a settled group wrote %d times in %v, want at most %d (the renewals)", writes, window, maxWrites)
				}
				if !g.balanced(names(c.n)...) {
					t.Error("not balanced")
				}
			})
		})
	}
}

func TestGracefulLeaveReleasesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, mem.New(), 12)
		g.chk.linger = 2 * time.Millisecond
		for _, n := range names(4) {
			g.join(n)
		}
		g.settle(names(4)...)
		leaving := g.nodes["w4"]
		handed := leaving.w.Owned()
		before := g.chk.count()
		leaving.cancel()
		g.waitStopped(leaving)
		if len(leaving.w.Owned()) != 0 {
			t.Fatalf("still owns %v after Run returned", leaving.w.Owned())
		}
		for _, id := range handed {
			c, err := newOn(g.store, shard.ShardKey(g.prefix, id), objlease.SessionOptions{Clock: g.clk}, objlease.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if st, err := c.Inspect(context.Background()); err != nil || (st.Record.State == objlease.StateHeld && st.Record.Holder == "w4") {
				t.Fatalf("shard %s after its owner left: %+v, %v; want released (or taken by another)", id, st.Record, err)
			}
		}
		obs, err := newOn(g.store, shard.MemberKey(g.prefix, "w4"), objlease.SessionOptions{Clock: g.clk}, objlease.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if st, err := obs.Inspect(context.Background()); err != nil || st.Record.State != objlease.StateReleased {
			t.Fatalf("membership record after leaving: %+v, %v; want released", st, err)
		}
		took := g.drive("3 workers balanced", func() bool { return g.balanced(names(3)...) })
		if took >= ttl {
			t.Fatalf("took %v to rebalance after a graceful leave; want well under the TTL %v", took, ttl)
		}
		t.Logf("after a graceful leave: balanced in %v of fake time", took)
		g.quiet(10 * time.Second)
		if moved := g.chk.startsSince(before); len(moved) != 3 {
			t.Fatalf("N 4→3 with M=12 moved %d shards, want exactly 3: %v", len(moved), moved)
		}
	})
}

// TestLeavingWhileCutOffReturns: a worker cut off from the store when it
// leaves cannot release its shards; Run still returns, after a TTL at
// most (the leases have expired by then), rather than re-reading for ever
// to learn whether the release landed.
func TestLeavingWhileCutOffReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, mem.New(), 4)
		for _, n := range names(2) {
			g.join(n)
		}
		g.settle(names(2)...)
		leaving := g.nodes["w2"]
		if len(leaving.w.Owned()) == 0 {
			t.Fatal("w2 owns nothing to hand over")
		}
		leaving.store.dead.Store(true)
		start := time.Now()
		leaving.cancel()
		g.waitStopped(leaving)
		if took := time.Since(start); took > ttl+time.Second {
			t.Fatalf("Run returned %v after leaving while cut off, want within a TTL (%v)", took, ttl)
		}
	})
}

// TestWorkEndsBeforeNextOwnerStarts hands shards over while each Work
// lingers after its context ends; the next owner must not start meanwhile.
func TestWorkEndsBeforeNextOwnerStarts(t *testing.T) {
	if o := handover(t, false); len(o) > 0 {
		t.Fatalf("overlap with the safeguard on: %v", o)
	}
}

// handover runs one handover, in a bubble of its own, while each Work
// lingers after its context ends, and returns the overlaps the checker saw.
func handover(t *testing.T, expected bool) (overlaps []string) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, mem.New(), 6)
		g.overlapExpected = expected
		g.chk.linger = 20 * time.Millisecond
		g.join("w1")
		g.drive("w1 owns all", func() bool { return g.balanced("w1") })
		g.join("w2")
		g.drive("balanced", func() bool { return g.balanced("w1", "w2") })
		g.quiet(2 * time.Second)
		overlaps = g.chk.overlaps()
	})
	return overlaps
}

// TestUnevenJoinMovesOnlyWhatMust: M=10, N 3→4 goes from 4,3,3 to
// 3,3,2,2, which takes exactly two moves.
func TestUnevenJoinMovesOnlyWhatMust(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, mem.New(), 10)
		for _, n := range names(3) {
			g.join(n)
		}
		g.settle(names(3)...)
		before := g.chk.count()
		g.join("w4")
		g.settle(names(4)...)
		if moved := g.chk.startsSince(before); len(moved) != 2 {
			t.Fatalf("N 3→4 with M=10 moved %d shards, want exactly 2: %v", len(moved), moved)
		}
		before = g.chk.count()
		g.quiet(2 * time.Minute)
		if moved := g.chk.startsSince(before); len(moved) != 0 {
			t.Fatalf("a quiet balanced group moved %d shards: %v", len(moved), moved)
		}
	})
}

func TestLostRepliesKeepOneOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, err := faulty.New(mem.NewDriver(), faulty.Config{Seed: 7, Default: faulty.Rates{LostReply: 0.05, Unknown: 0.02}})
		if err != nil {
			t.Fatal(err)
		}
		g := newGroup(t, providers.NewBucket(f), 8)
		for _, n := range names(3) {
			g.join(n)
		}
		g.drive("3 workers balanced despite lost replies", func() bool { return g.balanced(names(3)...) })
		g.join("w4")
		g.drive("4 workers balanced despite lost replies", func() bool { return g.balanced(names(4)...) })
		g.quiet(time.Minute)
		// The cleanup fails the test if two owners' Work overlapped.
	})
}

func TestSharedListedFromPrefix(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := mem.New()
		ctx := context.Background()
		clk := clock.NewFake(epoch)
		ids := []string{"2026-01-01", "2026-01-02", "2026-01-03", "2026-01-04"}
		if err := shard.Define(ctx, store, "daily", objlease.Options{}, ids...); err != nil {
			t.Fatal(err)
		}
		if err := shard.Define(ctx, store, "daily", objlease.Options{}, ids[0]); err != nil {
			t.Fatal(err) // defining again leaves records alone
		}
		g := newGroup(t, store, 0)
		g.clk, g.chk.clk, g.prefix, g.ids = clk, clk, "daily", ids
		for _, name := range []string{"a", "b"} {
			ks := &killable{Store: store, clk: clk, sent: map[string]time.Time{}}
			w, err := newWorker(ks, g.clk, "daily", g.options(), shard.Config{Member: name, Work: g.chk.work(name)})
			if err != nil {
				t.Fatal(err)
			}
			c, cancel := context.WithCancel(ctx)
			n := &node{w: w, store: ks, cancel: cancel, done: make(chan struct{})}
			go func() { defer close(n.done); w.Run(c) }()
			g.nodes[name] = n
		}
		g.drive("two workers share the listed shards", func() bool { return g.balanced("a", "b") })
		v, err := shard.Describe(ctx, store, "daily")
		if err != nil {
			t.Fatal(err)
		}
		if len(v.Members) != 2 || len(v.Shards) != 4 {
			t.Fatalf("Describe: %d members, %d shards; want 2 and 4", len(v.Members), len(v.Shards))
		}
		for _, e := range v.Shards {
			if e.Record.State != objlease.StateHeld || e.Record.Token < 2 || (e.Record.Holder != "a" && e.Record.Holder != "b") {
				t.Errorf("shard %s: %+v; want held by a or b with a token above Define's", e.Name, e.Record)
			}
		}
	})
}

// TestSharedListedFromUnorderedStore: on a store that lists out of key
// order (S3 Express One Zone), workers still share the listed shards, and
// Describe reports members and shards in key order.
func TestSharedListedFromUnorderedStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inner := mem.New()
		store := providertest.Unordered(inner)
		ctx := context.Background()
		clk := clock.NewFake(epoch)
		ids := []string{"2026-01-01", "2026-01-02", "2026-01-03", "2026-01-04", "2026-01-05"}
		if err := shard.Define(ctx, store, "daily", objlease.Options{}, ids...); err != nil {
			t.Fatal(err)
		}
		g := newGroup(t, inner, 0)
		g.clk, g.chk.clk, g.prefix, g.ids = clk, clk, "daily", ids
		for _, name := range []string{"a", "b", "c"} {
			ks := &killable{Store: store, clk: clk, sent: map[string]time.Time{}}
			w, err := newWorker(ks, g.clk, "daily", g.options(), shard.Config{Member: name, Work: g.chk.work(name)})
			if err != nil {
				t.Fatal(err)
			}
			c, cancel := context.WithCancel(ctx)
			n := &node{w: w, store: ks, cancel: cancel, done: make(chan struct{})}
			go func() { defer close(n.done); w.Run(c) }()
			g.nodes[name] = n
		}
		g.drive("three workers share the listed shards", func() bool { return g.balanced("a", "b", "c") })
		v, err := shard.Describe(ctx, store, "daily")
		if err != nil {
			t.Fatal(err)
		}
		var members, shards []string
		for _, e := range v.Members {
			members = append(members, e.Name)
		}
		for _, e := range v.Shards {
			shards = append(shards, e.Name)
		}
		if !slices.Equal(members, []string{"a", "b", "c"}) || !slices.Equal(shards, ids) {
			t.Errorf("Describe: members %v, shards %v; want them in key order", members, shards)
		}
	})
}

func TestTarget(t *testing.T) {
	for _, c := range []struct {
		counts map[string]int
		m      int
		want   map[string]int
	}{
		{map[string]int{"a": 4, "b": 4, "c": 4, "d": 0}, 12, map[string]int{"a": 3, "b": 3, "c": 3, "d": 3}},
		{map[string]int{"a": 4, "b": 3, "c": 3, "d": 0}, 10, map[string]int{"a": 3, "b": 3, "c": 2, "d": 2}},
		{map[string]int{"a": 2, "b": 3, "c": 3, "d": 2}, 10, map[string]int{"a": 2, "b": 3, "c": 3, "d": 2}}, // balanced stays
		{map[string]int{"a": 0}, 5, map[string]int{"a": 5}},
		{map[string]int{"a": 1, "b": 0}, 1, map[string]int{"a": 1, "b": 0}},
	} {
		for member, want := range c.want {
			if got := shard.Target(member, c.counts, c.m); got != want {
				t.Errorf("Target(%s, %v, %d) = %d, want %d", member, c.counts, c.m, got, want)
			}
		}
	}
}

func TestNewValidates(t *testing.T) {
	if _, err := shard.New(nil, "", objlease.Options{}, shard.Config{Work: func(context.Context, *shard.Shard) {}}); !errors.Is(err, shard.ErrInvalidConfig) {
		t.Fatalf("nil session: %v", err)
	}
	if _, err := newWorker(mem.New(), nil, "", objlease.Options{}, shard.Config{}); !errors.Is(err, shard.ErrInvalidConfig) {
		t.Fatalf("nil Work: %v", err)
	}
}

// TestHandBrokenAndDeletedShardsRetaken: a shard broken (released) or
// deleted by hand in a settled group, whose members read one another's
// shards only about once per TTL, is owned again within a renewal interval
// (its owner's renewal finds the record changed) and a few rounds.
func TestHandBrokenAndDeletedShardsRetaken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, mem.New(), 12)
		for _, n := range names(3) {
			g.join(n)
		}
		g.settle(names(3)...)
		ctx := context.Background()
		broken, deleted := g.ids[0], g.ids[1]
		c, err := newOn(g.store, shard.ShardKey(g.prefix, broken), objlease.SessionOptions{Clock: g.clk}, objlease.Options{})
		if err != nil {
			t.Fatal(err)
		}
		token, err := c.Break(ctx)
		if err != nil {
			t.Fatal(err)
		}
		a, err := g.store.Stat(ctx, shard.ShardKey(g.prefix, deleted))
		if err != nil {
			t.Fatal(err)
		}
		if err := g.store.Delete(ctx, a.Key, a.Version); err != nil {
			t.Fatal(err)
		}
		before := g.chk.count()
		held := func(id string, above uint64) bool {
			for _, s := range g.chk.startsSince(before) {
				if s.shard == id && s.token > above {
					return true
				}
			}
			return false
		}
		o := g.options()
		took := g.drive("both shards owned again", func() bool {
			return held(broken, token) && held(deleted, 0) && g.balanced(names(3)...)
		})
		t.Logf("broken and deleted shards owned again after %v of fake time", took)
		if bound := o.RenewInterval + 3*o.PollInterval; took > bound {
			t.Fatalf("took %v to own a broken and a deleted shard again, want within a renewal interval and three rounds (%v)", took, bound)
		}
	})
}
