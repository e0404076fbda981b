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
// per round one membership listing per member, a read of a member's record
// per renewal of it, and the owners' renewals; the shard-related requests
// of the whole group grow with M/TTL (the renewals) plus N listings of the
// shards every two to three TTLs, not with N × M. A listing dates every
// version it shows (objlease.Client.Observe); a worker reads a shard only
// when its version may be something other than a live owner's renewal.
//
// A worker that owns a shard runs Config.Work for it with a context that
// ends before anyone else can own the shard: when the worker hands the shard
// over (rebalancing, shutdown) the context is cancelled, the worker waits for
// Work to return, and only then releases the lease; when the lease is lost
// the context ends no later than the end of its safe validity. Work that
// goes on acting after its context ended is stopped only by fencing.
package shard

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/objlease/objlease/internal/ctxsleep"
	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/providers"
)

// ErrInvalidConfig: the Config is incomplete or inconsistent.
var ErrInvalidConfig = errors.New("invalid shard group config")

// errHandingOver is the cause of a Work context when this worker hands its
// shard over: the shard's lease is about to be released.
var errHandingOver = fmt.Errorf("%w: handing the shard over", objlease.ErrReleased)

// Config configures a Worker.
type Config struct {
	// Prefix is the group's key prefix; records live under PREFIX/members/
	// and PREFIX/shards/.
	Prefix string
	// Member names this worker in the group and is the holder of its
	// leases. It must be unique among live workers. Default: as
	// objlease.Options.Holder.
	Member string
	// Shards is the shard set. If nil, the set is the shards whose records
	// exist under PREFIX/shards/ (see Define), listed every round.
	Shards []string
	// Options set the timings of every lease (TTL, RenewInterval,
	// PollInterval, DriftBound, StoreClock), the logger and jitter source.
	// Holder and Data are ignored; Clock must be nil (the session's is
	// used). PollInterval is the round
	// interval. Every worker of a group should use the same TTL.
	Options objlease.Options
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
	cfg    Config
	log    *slog.Logger
	opts   objlease.Options
	member string
	rndMu  sync.Mutex
	seed   *rand.Rand // seeds each client's own jitter source; guarded by rndMu

	memberClient *objlease.Client
	memberLease  *objlease.Lease
	peers        map[string]*objlease.Client // member key -> observer
	shards       map[string]*watched         // shard id -> what this worker knows of it
	lastLive     []string                    // the live members of the previous round
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

// MembersPrefix returns the key prefix of a group's membership records.
func MembersPrefix(prefix string) string { return join(prefix, "members/") }

// ShardsPrefix returns the key prefix of a group's shard records.
func ShardsPrefix(prefix string) string { return join(prefix, "shards/") }

// ShardKey returns the key of a shard's lease record.
func ShardKey(prefix, id string) string { return ShardsPrefix(prefix) + id }

// MemberKey returns the key of a member's heartbeat record. The name is
// its last path segment, with the ASCII characters a URL path escapes
// written as %XX (an ASCII name has the key it always had) and other
// Unicode as it is. A name whose segment would be longer than
// maxMemberSegment bytes is cut and followed by a hash of the whole name,
// so that every valid holder name (at most 256 bytes) fits every store: a
// file store's 255-byte path segment, S3's and GCS's 1,024-byte key.
// Members are named by their records, never by their keys.
func MemberKey(prefix, member string) string {
	return MembersPrefix(prefix) + memberSegment(member)
}

// maxMemberSegment leaves room under a file system's 255-byte name for
// the file store's own prefixes (.objlease-attrs-new.).
const maxMemberSegment = 200

func memberSegment(member string) string {
	var b strings.Builder
	cut := -1 // where the segment passed the length a hashed one keeps
	for _, r := range member {
		if r < utf8.RuneSelf {
			b.WriteString(url.PathEscape(string(r)))
		} else {
			b.WriteRune(r)
		}
		if cut < 0 && b.Len() > maxMemberSegment-hashedSuffix {
			cut = b.Len() - len(url.PathEscape(string(r)))
			if r >= utf8.RuneSelf {
				cut = b.Len() - utf8.RuneLen(r)
			}
		}
	}
	if b.Len() <= maxMemberSegment {
		return b.String()
	}
	sum := sha256.Sum256([]byte(member))
	return b.String()[:cut] + "~" + hex.EncodeToString(sum[:8])
}

// hashedSuffix is the length of "~" and 16 hex digits.
const hashedSuffix = 17

func join(prefix, sub string) string {
	if prefix == "" || strings.HasSuffix(prefix, "/") {
		return prefix + sub
	}
	return prefix + "/" + sub
}

// New validates cfg and returns a Worker whose leases are held through
// sess, in the session's store; Run makes it join the group.
func New(sess *objlease.Session, cfg Config) (*Worker, error) {
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
	w := &Worker{sess: sess, cfg: cfg, peers: map[string]*objlease.Client{}, shards: map[string]*watched{}, owned: map[string]*owned{}}
	w.opts = cfg.Options
	w.seed = cfg.Options.Rand
	if w.seed == nil {
		w.seed = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	w.opts.Data = nil
	w.opts.Holder = cfg.Member
	mc, err := w.client(MemberKey(cfg.Prefix, cfg.Member))
	if err != nil {
		return nil, err
	}
	if cfg.Member == "" {
		// The default holder, also for the shard leases.
		w.opts.Holder = mc.Holder()
		if mc, err = w.client(MemberKey(cfg.Prefix, w.opts.Holder)); err != nil {
			return nil, err
		}
	}
	w.member = mc.Holder()
	w.memberClient = mc
	w.opts = mc.Options()
	w.opts.Rand = nil  // each client gets its own, from w.seed
	w.opts.Clock = nil // the session's
	w.log = w.opts.Logger.With(slog.String("group", cfg.Prefix), slog.String("member", w.member))
	return w, nil
}

// client returns a client for key with the worker's options and a jitter
// source of its own: a *rand.Rand is not safe to share between clients.
func (w *Worker) client(key string) (*objlease.Client, error) {
	o := w.opts
	w.rndMu.Lock()
	o.Rand = rand.New(rand.NewPCG(w.seed.Uint64(), w.seed.Uint64()))
	w.rndMu.Unlock()
	return w.sess.Client(key, o)
}

// Member returns this worker's name in the group.
func (w *Worker) Member() string { return w.member }

// Joined reports whether the worker is a member of the group now: it
// holds its membership record, and has not left.
func (w *Worker) Joined() bool {
	l := w.joined.Load()
	return l != nil && l.Err() == nil
}

// Owned returns the ids of the shards this worker owns, sorted.
func (w *Worker) Owned() []string {
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
		if ctxsleep.On(ctx, w.sess.Clock(), w.opts.PollInterval) != nil {
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
	now := w.sess.Clock().Now()
	// The shards are listed only when something may have moved: the first
	// round, a membership change, a member whose renewals are overdue (so
	// that its shards' versions are dated before it expires), this
	// worker's count off its target, and a periodic scan for shards
	// defined, freed or taken unseen.
	scanned := w.holders == nil || changed || w.suspect || !now.Before(w.nextScan) ||
		(w.cfg.Shards == nil && len(w.ids) == 0) // no shards defined yet: waiting for them costs one empty listing a round
	if !scanned && w.memberLease != nil {
		scanned = w.target(members, len(w.ids)) != len(w.Owned())
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
	mine := w.Owned()
	inSet := map[string]bool{}
	for _, id := range ids {
		inSet[id] = true
	}
	for _, id := range mine {
		if !inSet[id] { // removed from the set
			w.releaseID(ctx, id)
		}
	}
	mine = w.Owned()
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
	f := w.seed.Float64()
	w.rndMu.Unlock()
	return w.opts.TTL*2 + time.Duration(f*float64(w.opts.TTL))
}

// target is this worker's share among the live members of m shards:
// floor(m/n), or the ceiling for the first m mod n members by name. It
// needs no shard's holder, so that a worker learns whether to move from
// the membership listing alone, and every member computes the same
// shares, whatever it last read of the others' shards.
func (w *Worker) target(members []string, m int) int {
	counts := make(map[string]int, len(members))
	for _, n := range members {
		counts[n] = 0
	}
	return Target(w.member, counts, m)
}

// Target returns the number of shards member should own, given how many
// each live member owns now (counts, including member) and the number of
// shards m: floor(m/n) or ceil(m/n). The m mod n members owning the most,
// ties broken by name, are meant to own the ceiling. A Worker counts every
// member at zero, so that the ceiling goes to the first members by name:
// every member then computes the same shares from the membership alone,
// without reading the others' shards.
func Target(member string, counts map[string]int, m int) int {
	n := len(counts)
	if n == 0 {
		return 0
	}
	names := make([]string, 0, n)
	for k := range counts {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		if counts[names[i]] != counts[names[j]] {
			return counts[names[i]] > counts[names[j]]
		}
		return names[i] < names[j]
	})
	t := m / n
	if i := slices.Index(names, member); i >= 0 && i < m%n {
		t++
	}
	return t
}

// cmpScore orders shard ids by their affinity to member (a rendezvous
// hash): a worker keeps the shards it likes best and tries free ones in the
// same order, so that the choice is deterministic and different workers
// rarely race for one shard.
func cmpScore(member, a, b string) int {
	sa, sb := score(member, a), score(member, b)
	switch {
	case sa < sb:
		return -1
	case sa > sb:
		return 1
	}
	return strings.Compare(a, b)
}

func score(member, id string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(member))
	h.Write([]byte{0})
	h.Write([]byte(id))
	return h.Sum64()
}

// listMembers lists the group's membership records, in key order (some
// stores, S3 Express One Zone, do not list in it).
func (w *Worker) listMembers(ctx context.Context) ([]providers.Attrs, error) {
	var members []providers.Attrs
	err := providers.Walk(ctx, w.sess.Store(), MembersPrefix(w.cfg.Prefix), func(a providers.Attrs) error {
		members = append(members, a)
		return nil
	})
	slices.SortFunc(members, func(a, b providers.Attrs) int { return strings.Compare(a.Key, b.Key) })
	return members, err
}

// listShards lists the group's shard records by key, and sets w.ids to
// the shard set: Config.Shards, or the shards listed, in key order.
func (w *Worker) listShards(ctx context.Context) (map[string]providers.Attrs, error) {
	listed := map[string]providers.Attrs{}
	var ids []string
	sp := ShardsPrefix(w.cfg.Prefix)
	err := providers.Walk(ctx, w.sess.Store(), sp, func(a providers.Attrs) error {
		listed[a.Key] = a
		ids = append(ids, strings.TrimPrefix(a.Key, sp))
		return nil
	})
	if err != nil {
		return nil, err
	}
	if w.cfg.Shards != nil {
		w.ids = w.cfg.Shards
	} else {
		slices.Sort(ids)
		w.ids = ids
	}
	return listed, nil
}

// liveMembers returns the members whose heartbeat is held and unexpired for
// this worker, this worker included while it is a member, given the listed
// membership records. It reads a record only when the listing shows a
// version it has not read (a renewal, a release, a new member): an
// unchanged one is judged from what was read, its expiry counted from
// its first sighting.
func (w *Worker) liveMembers(ctx context.Context, listed []providers.Attrs) ([]string, error) {
	var live []string
	w.suspect = false
	if w.memberLease != nil {
		live = append(live, w.member)
	}
	for _, a := range listed {
		if a.Key == w.memberClient.Key() {
			continue
		}
		c, ok := w.peers[a.Key]
		if !ok {
			var err error
			if c, err = w.client(a.Key); err != nil {
				return nil, err
			}
			w.peers[a.Key] = c
		}
		st, err := c.Judge(nil, a)
		var unchanged time.Duration // since this client first saw the version
		if err == nil {
			if unchanged = st.Unchanged; st.Record == nil {
				st, err = c.Inspect(ctx)
			}
		}
		switch {
		case errors.Is(err, providers.ErrNotFound):
			continue // gone since it was listed
		case errors.Is(err, objlease.ErrBadRecord), errors.Is(err, objlease.ErrNewerSchema), errors.Is(err, objlease.ErrFencedObject):
			continue // not a member record
		case err != nil:
			return nil, err
		}
		if r := st.Record; r != nil && r.State == objlease.StateHeld && st.ExpiresIn > 0 && r.Holder != w.member {
			live = append(live, r.Holder)
			// A live member renews within a renewal interval; one that has
			// not for longer (and a round) may be dead.
			if unchanged > w.opts.RenewInterval+w.opts.PollInterval {
				w.suspect = true
			}
		}
	}
	sort.Strings(live)
	return slices.Compact(live), nil
}

// scan returns the holder of every shard this worker does not own, ""
// for a shard free to take (absent, released, or expired for this
// worker); a shard that cannot be read is left out. It reads a shard only
// when the listing shows a version it has not read and either fresh is
// set or that version may not be its owner's renewal: the owner last read
// is not a live member, or the version has gone unchanged for half a TTL
// (longer than any live holder waits between renewals: its owner may have
// died, and the version must be read before it can expire). A live
// member's renewals are not read, so a shard that changed hands unseen
// keeps its old holder until a fresh scan, which every move is decided
// on. The versions it does not read still count as seen from the
// listing, for their expiry.
func (w *Worker) scan(ctx context.Context, ids []string, listed map[string]providers.Attrs, live []string, fresh bool) (map[string]string, error) {
	w.mu.Lock()
	mine := map[string]bool{}
	for id := range w.owned {
		mine[id] = true
	}
	w.mu.Unlock()
	holders := map[string]string{}
	for _, id := range ids {
		s, err := w.watch(id)
		if err != nil {
			return nil, err
		}
		if mine[id] {
			// Once it is no longer ours, read what becomes of it.
			s.holder, s.readAt = "", time.Time{}
			holders[id] = w.member
			continue
		}
		a, ok := listed[ShardKey(w.cfg.Prefix, id)]
		if !ok {
			holders[id], s.holder, s.readAt = "", "", time.Time{}
			continue
		}
		st, err := s.c.Judge(nil, a)
		if err == nil && st.Record == nil {
			now := w.sess.Clock().Now()
			if !fresh && !s.readAt.IsZero() && st.Unchanged < w.opts.TTL/2 &&
				s.holder != "" && s.holder != w.member && slices.Contains(live, s.holder) {
				holders[id] = s.holder // its owner's renewal
				continue
			}
			st, err = s.c.Inspect(ctx)
			s.readAt = now
		}
		switch {
		case errors.Is(err, providers.ErrNotFound):
			holders[id], s.holder = "", ""
			continue
		case err != nil:
			if ctx.Err() != nil {
				return nil, err
			}
			s.readAt = time.Time{}
			w.log.Warn("cannot read shard", slog.String("shard", id), slog.Any("err", err))
			continue
		}
		switch {
		case st.Record == nil || st.Record.State != objlease.StateHeld || st.ExpiresIn <= 0:
			s.holder = ""
		case st.Record.Holder == w.member:
			// Ours by name but not by lease (an earlier run, or a write
			// whose reply was lost): taken back once it expires.
			s.holder = "\x00" + w.member
		default:
			s.holder = st.Record.Holder
		}
		holders[id] = s.holder
	}
	return holders, nil
}

func (w *Worker) watch(id string) (*watched, error) {
	if s, ok := w.shards[id]; ok {
		return s, nil
	}
	c, err := w.client(ShardKey(w.cfg.Prefix, id))
	if err != nil {
		return nil, err
	}
	s := &watched{c: c}
	w.shards[id] = s
	return s, nil
}

// take tries once to take shard id and starts its Work.
func (w *Worker) take(ctx context.Context, id string) bool {
	ws, err := w.watch(id)
	if err != nil {
		return false
	}
	l, err := ws.c.TryAcquire(ctx)
	if err != nil {
		if !errors.Is(err, objlease.ErrHeld) && ctx.Err() == nil {
			w.log.Warn("cannot take shard", slog.String("shard", id), slog.Any("err", err))
		}
		return false
	}
	if l.ValidFor() <= 0 {
		// Granted already expired (the reply came late, the process was
		// paused): someone else may own the shard by now, and the lease's
		// context has not ended yet, so Work must not start. There is
		// nothing left to hand over: the release only stops the lease's
		// goroutines, and gives up when the worker stops.
		_ = l.Release(ctx)
		w.log.Warn("shard taken too late: its lease had expired", slog.String("shard", id), slog.Uint64("token", l.Token()))
		return false
	}
	s := &Shard{ID: id, Lease: l}
	cbCtx, cancel := context.WithCancelCause(l.Context())
	o := &owned{shard: s, cancel: cancel, done: make(chan struct{})}
	w.mu.Lock()
	w.owned[id] = o
	w.mu.Unlock()
	w.log.Info("shard taken", slog.String("shard", id), slog.Uint64("token", l.Token()))
	go func() {
		defer close(o.done)
		w.cfg.Work(cbCtx, s)
	}()
	return true
}

// reap forgets the shards whose leases were lost, once their Work returned.
func (w *Worker) reap() {
	for _, o := range w.snapshot() {
		if o.shard.Lease.Err() == nil {
			continue
		}
		select {
		case <-o.done:
		default:
			continue // Work has not returned yet; the shard is not ours, nor free to take again
		}
		o.cancel(nil)
		w.mu.Lock()
		delete(w.owned, o.shard.ID)
		w.mu.Unlock()
		w.log.Warn("shard lost", slog.String("shard", o.shard.ID), slog.Any("err", o.shard.Lease.Err()))
	}
}

func (w *Worker) releaseID(ctx context.Context, id string) {
	w.mu.Lock()
	o := w.owned[id]
	w.mu.Unlock()
	if o != nil {
		w.release(context.WithoutCancel(ctx), o)
	}
}

// release hands a shard over: Work's context ends, Work returns, and only
// then is the lease released, so that the next owner's Work cannot start
// while this one's runs.
func (w *Worker) release(ctx context.Context, o *owned) {
	l := o.shard.Lease
	// A release that cannot reach the store gives up after a TTL: by then
	// the lease has expired and the shard is free to take anyway, and a
	// worker must not hang in it (ctx is not cancelled while handing over).
	ctx, cancel := context.WithTimeout(ctx, w.opts.TTL)
	defer cancel()
	var err error
	if callbackBeforeRelease() {
		o.cancel(errHandingOver)
		<-o.done
		err = l.Release(ctx)
	} else {
		err = l.Release(ctx)
		o.cancel(errHandingOver)
		<-o.done
	}
	if err != nil && !errors.Is(err, objlease.ErrLeaseLost) {
		w.log.Warn("releasing shard failed; it will expire", slog.String("shard", o.shard.ID), slog.Any("err", err))
	}
	w.mu.Lock()
	delete(w.owned, o.shard.ID)
	w.mu.Unlock()
	w.log.Info("shard released", slog.String("shard", o.shard.ID), slog.Uint64("token", l.Token()))
}
