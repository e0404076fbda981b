// Package shard shares a set of shards (partitions, tenants, date ranges)
// among the workers of a group through leases in one bucket, as the Kinesis
// Client Library's lease table or a Kafka consumer group do, but on any
// store objlease supports and with a fencing token per shard.
//
// A group lives under a prefix:
//
//	PREFIX/members/<member>   one lease per live worker (its heartbeat)
//	PREFIX/shards/<id>        one lease per shard; its holder owns the shard
//
// Every record is an ordinary objlease lease record, so objlease inspect and
// list work on them, and a shard's lease token fences its output (fence.Put
// or fence.Batch with Shard.Token).
//
// Each worker, every round (Options.PollInterval), lists the group's
// membership records and counts the live members (N). Its share of the M
// shards is floor(M/N), or the ceiling for the first M mod N members by
// name, which it computes from the membership alone. A worker above its
// share releases the excess; one below it lists and reads the shards and
// takes free, released or expired ones. Nobody ever takes a shard whose
// lease is live, so a shard moves only when its owner lets it go or dies,
// and in a balanced group nobody moves anything.
//
// A worker lists PREFIX/shards/ only when something may have moved: the
// first round, a change of membership, its count off its share, a member
// whose renewals are overdue (so that a dying owner's shards are dated
// before it expires), and every two to three TTLs at random (shards
// defined with Define, or freed unseen). A settled group therefore sends
// per round one membership listing per member and the owners' renewals:
// a member judges the others from the listing, whose versions change with
// every renewal, and reads a member's record only the first time and once
// its version has stopped changing (it left, or died). The shard-related
// requests of the whole group grow with M/TTL (the renewals) plus N
// listings of the shards every two to three TTLs, not with N × M, and the
// member-related ones with N, not N × (N − 1). A listing dates every
// version it shows (objlease.Client.Judge); a worker reads a shard only
// when its version may be something other than a live owner's renewal.
//
// A worker that owns a shard runs Config.Work for it with a context that
// ends before anyone else can own the shard: when the worker hands the shard
// over (rebalancing, shutdown) the context is cancelled, the worker waits for
// Work to return, and only then releases the lease; when the lease is lost
// the context ends no later than the end of its safe validity. Work that
// goes on acting after its context ended is stopped only by fencing.
//
// Worker.Owned reports the shards whose lease is valid at the time of the
// call (objlease.Lease.ValidFor), not those whose Work still runs: a shard
// whose lease was lost is not owned from the end of its validity on, while
// its Work may run on, ignoring its context, for as long as it takes to
// return (Worker.Stopping lists those). The worker does not take such a
// shard again, nor count it free, until its Work has returned.
package shard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/providers"
)

// ErrInvalidConfig: the Config is incomplete or inconsistent.
var ErrInvalidConfig = errors.New("invalid shard group config")

// errHandingOver is the cause of a Work context when this worker hands its
// shard over: the shard's lease is about to be released.
var errHandingOver = fmt.Errorf("%w: handing the shard over", objlease.ErrReleased)

// Config configures a Worker beside its group's prefix and its lease
// options (see New).
type Config struct {
	// Member names this worker in the group and is the holder of its
	// leases. It must be unique among live workers. Default: as
	// objlease.Options.Holder.
	Member string
	// Shards is the shard set. If nil, the set is the shards whose records
	// exist under PREFIX/shards/ (see Define), listed every round.
	Shards []string
	// Work runs in its own goroutine for each shard this worker comes to
	// own. ctx ends when the shard is to be handed over or its lease is
	// lost; the worker releases the lease only after Work has returned.
	Work func(ctx context.Context, s *Shard)
}

// Shard is one shard owned by this worker.
type Shard struct {
	ID    string
	Lease *objlease.Lease
}

// Token returns the shard lease's fencing token: stamp it on every write of
// the shard's output.
func (s *Shard) Token() uint64 { return s.Lease.Token() }

// Worker is one member of a group.
type Worker struct {
	sess   *objlease.Session
	store  providers.Store // the session's, and its clock
	clock  clock.Clock
	prefix string
	cfg    Config
	log    *slog.Logger
	opts   objlease.Options
	member string
	rndMu  sync.Mutex
	rnd    *rand.Rand // jitters the shard scans; guarded by rndMu

	memberClient *objlease.Client
	memberLease  *objlease.Lease
	peers        map[string]*peer    // member key -> what this worker knows of it
	shards       map[string]*watched // shard id -> what this worker knows of it
	lastLive     []string            // the live members of the previous round
	// holders and ids are what the last shard scan found: every shard's
	// holder as in scan, and the shard set (Config.Shards, or the listed
	// shards). holders is nil until the first scan.
	holders  map[string]string
	ids      []string
	nextScan time.Time // when the periodic shard scan is due
	suspect  bool      // a live member's record has gone unrenewed too long this round

	mu    sync.Mutex
	owned map[string]*owned
	// joined is memberLease, for Joined, which may be called from any
	// goroutine.
	joined atomic.Pointer[objlease.Lease]
}

// peer is another member's record as this worker knows it: its client,
// and what the client last read of it.
type peer struct {
	c    *objlease.Client
	read bool   // a version has been read
	held string // its holder if that read found it held, else ""
}

// watched is a shard this worker does not necessarily own: its client,
// and what the client last read of it.
type watched struct {
	c      *objlease.Client
	holder string    // as last read: "" free, "\x00"+member ours by name only
	readAt time.Time // when last read; zero: never, or to be read again
}

type owned struct {
	shard  *Shard
	cancel context.CancelCauseFunc
	done   chan struct{}
}

// New validates cfg and returns a Worker of the group under prefix, whose
// leases are held through sess, in the session's store; Run makes it join
// the group. Records live under PREFIX/members/ and PREFIX/shards/. opts
// set the timings of every lease (TTL, RenewInterval, PollInterval,
// DriftBound, StoreClock); their Holder and Data are ignored (the holder
// is Config.Member). PollInterval is the round interval. Every worker of a
// group should use the same TTL. The clock, the logger and the jitter are
// the session's.
func New(sess *objlease.Session, prefix string, opts objlease.Options, cfg Config) (*Worker, error) {
	switch {
	case sess == nil:
		return nil, fmt.Errorf("%w: nil session", ErrInvalidConfig)
	case cfg.Work == nil:
		return nil, fmt.Errorf("%w: Work is nil", ErrInvalidConfig)
	}
	for _, id := range cfg.Shards {
		if id == "" {
			return nil, fmt.Errorf("%w: empty shard id", ErrInvalidConfig)
		}
	}
	w := &Worker{sess: sess, prefix: prefix, cfg: cfg, peers: map[string]*peer{}, shards: map[string]*watched{}, owned: map[string]*owned{}}
	w.opts = opts
	w.rnd = sess.NewRand()
	w.opts.Data = nil
	w.opts.Holder = cfg.Member
	mc, err := w.client(MemberKey(prefix, cfg.Member))
	if err != nil {
		return nil, err
	}
	if cfg.Member == "" {
		// The default holder, also for the shard leases.
		w.opts.Holder = mc.Options().Holder
		if mc, err = w.client(MemberKey(prefix, w.opts.Holder)); err != nil {
			return nil, err
		}
	}
	w.member = mc.Options().Holder
	w.memberClient = mc
	w.opts = mc.Options()
	w.store, w.clock = mc.Store(), sess.Clock()
	w.log = sess.Logger().With(slog.String("group", prefix), slog.String("member", w.member))
	return w, nil
}

// client returns a client for key with the worker's options; the session
// gives it a jitter source of its own.
func (w *Worker) client(key string) (*objlease.Client, error) {
	return w.sess.Client(key, w.opts)
}

// Member returns this worker's name in the group.
func (w *Worker) Member() string { return w.member }

// Joined reports whether the worker is a member of the group now: it
// holds its membership record (the lease's validity has not ended, see
// objlease.Lease.ValidFor), and has not left.
func (w *Worker) Joined() bool {
	l := w.joined.Load()
	return l != nil && l.ValidFor() > 0
}

// Owned returns the ids of the shards this worker owns at the time of the
// call, sorted: those whose lease is still valid (objlease.Lease.ValidFor
// is positive), whatever their Work is doing. A shard whose lease was lost
// is not listed from the moment its validity ended, even while its Work
// has not returned yet (see Stopping): by then another worker may own it.
// Like ValidFor, the answer says nothing about pauses after the call.
func (w *Worker) Owned() []string {
	var ids []string
	for _, o := range w.snapshot() {
		if o.shard.Lease.ValidFor() > 0 {
			ids = append(ids, o.shard.ID)
		}
	}
	sort.Strings(ids)
	return ids
}

// Stopping returns the ids of the shards whose lease has ended (it was
// lost) and whose Work has not returned yet, sorted. This worker does not
// own them (see Owned), and does not take them again until their Work has
// returned.
func (w *Worker) Stopping() []string {
	var ids []string
	for _, o := range w.snapshot() {
		select {
		case <-o.done:
			continue
		default:
		}
		if o.shard.Lease.ValidFor() <= 0 {
			ids = append(ids, o.shard.ID)
		}
	}
	sort.Strings(ids)
	return ids
}

// kept returns the ids of the shards this worker keeps, sorted: those it
// owns and those whose Work has not been reaped since their lease ended.
// Rebalancing counts them all, so that a shard is neither taken again nor
// replaced by another while its Work may still run.
func (w *Worker) kept() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := make([]string, 0, len(w.owned))
	for id := range w.owned {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Run joins the group and rebalances every round until ctx ends. It then
// hands every shard back (cancelling each Work context, waiting for Work
// to return, releasing the lease) and leaves the group, so that the others
// can take the shards at once. An error that waiting cannot cure
// (objlease.IsPermanent: a missing bucket, refused credentials, an object
// at the member's key that is not a lease record) ends it at once, and Run
// returns it; it returns nil when ctx ends.
func (w *Worker) Run(ctx context.Context) error {
	var runErr error
	for {
		if runErr = w.round(ctx); runErr != nil {
			w.log.Error("leaving the group: waiting cannot cure this", slog.Any("err", runErr))
			break
		}
		if clock.Sleep(ctx, w.clock, w.opts.PollInterval) != nil {
			break
		}
	}
	// Leaving takes a TTL at most, even cut off from the store: by then
	// every lease of this worker has expired (see release).
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.opts.TTL)
	defer cancel()
	var wg sync.WaitGroup
	for _, o := range w.snapshot() {
		wg.Go(func() { w.release(bg, o) })
	}
	wg.Wait()
	w.joined.Store(nil)
	if l := w.memberLease; l != nil {
		if err := l.Release(bg); err != nil && !errors.Is(err, objlease.ErrLeaseLost) {
			w.log.Warn("leaving the group failed; the membership record will expire", slog.Any("err", err))
		}
		w.memberLease = nil
	}
	return runErr
}

func (w *Worker) snapshot() []*owned {
	w.mu.Lock()
	defer w.mu.Unlock()
	os := make([]*owned, 0, len(w.owned))
	for _, o := range w.owned {
		os = append(os, o)
	}
	return os
}

// round is one step toward balance. It returns only errors that waiting
// cannot cure (objlease.IsPermanent), from joining or listing; the rest
// are logged and the next round tries again.
func (w *Worker) round(ctx context.Context) error {
	w.reap()
	if ctx.Err() != nil {
		return nil
	}
	if w.memberLease == nil || w.memberLease.Err() != nil {
		l, err := w.memberClient.TryAcquire(ctx)
		w.joined.Store(l)
		if err != nil {
			w.memberLease = nil
			if objlease.IsPermanent(err) && ctx.Err() == nil {
				return err
			}
			w.log.Debug("cannot join the group yet", slog.Any("err", err))
		} else {
			w.memberLease = l
		}
	}
	listedMembers, err := w.listMembers(ctx)
	if err != nil {
		if objlease.IsPermanent(err) && ctx.Err() == nil {
			return err
		}
		w.log.Warn("cannot list the group's members", slog.Any("err", err))
		return nil
	}
	members, err := w.liveMembers(ctx, listedMembers)
	if err != nil {
		w.log.Warn("cannot read the group's members", slog.Any("err", err))
		return nil
	}
	changed := !slices.Equal(members, w.lastLive)
	w.lastLive = members
	now := w.clock.Now()
	// The shards are listed only when something may have moved: the first
	// round, a membership change, a member whose renewals are overdue (so
	// that its shards' versions are dated before it expires), this
	// worker's count off its target, and a periodic scan for shards
	// defined, freed or taken unseen.
	scanned := w.holders == nil || changed || w.suspect || !now.Before(w.nextScan) ||
		(w.cfg.Shards == nil && len(w.ids) == 0) // no shards defined yet: waiting for them costs one empty listing a round
	if !scanned && w.memberLease != nil {
		scanned = w.target(members, len(w.ids)) != len(w.kept())
	}
	var listed map[string]providers.Attrs
	if scanned {
		if listed, err = w.listShards(ctx); err != nil {
			if objlease.IsPermanent(err) && ctx.Err() == nil {
				return err
			}
			w.holders = nil // scan again next round
			w.log.Warn("cannot list the group's shards", slog.Any("err", err))
			return nil
		}
		if w.holders, err = w.scan(ctx, w.ids, listed, members, false); err != nil {
			w.holders = nil
			w.log.Warn("cannot read the group's shards", slog.Any("err", err))
			return nil
		}
		w.nextScan = now.Add(w.scanPeriod())
	}
	ids := w.ids
	mine := w.kept()
	inSet := map[string]bool{}
	for _, id := range ids {
		inSet[id] = true
	}
	for _, id := range mine {
		if !inSet[id] { // removed from the set
			w.releaseID(ctx, id)
		}
	}
	mine = w.kept()
	if w.memberLease == nil {
		return nil // not a member: others do not count this worker, so it takes nothing
	}
	holders := w.holders
	target := w.target(members, len(ids))
	if scanned && target > len(mine) {
		// About to take shards: on what the store holds now.
		if holders, err = w.scan(ctx, ids, listed, members, true); err != nil {
			w.holders = nil
			w.log.Warn("cannot read the group's shards", slog.Any("err", err))
			return nil
		}
		w.holders = holders
	}
	switch {
	case len(mine) > target:
		slices.SortFunc(mine, func(a, b string) int { return cmpScore(w.member, a, b) })
		for _, id := range mine[:len(mine)-target] {
			w.releaseID(ctx, id)
		}
	case len(mine) < target:
		var free []string
		for _, id := range ids {
			if h, ok := holders[id]; ok && h == "" {
				free = append(free, id)
			}
		}
		slices.SortFunc(free, func(a, b string) int { return cmpScore(w.member, b, a) })
		for need := target - len(mine); need > 0 && len(free) > 0; free = free[1:] {
			if w.take(ctx, free[0]) {
				holders[free[0]] = w.member
				need--
			}
		}
	}
	return nil
}

// scanPeriod is the time to the next periodic shard scan: two to three
// TTLs, at random, so that the members of a group do not list at once.
func (w *Worker) scanPeriod() time.Duration {
	w.rndMu.Lock()
	f := w.rnd.Float64()
	w.rndMu.Unlock()
	return w.opts.TTL*2 + time.Duration(f*float64(w.opts.TTL))
}
