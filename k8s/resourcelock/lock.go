package resourcelock

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	rl "k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/objlease/objlease/internal/recordwrite"
	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/providers"
)

// ErrBadRecord: the object at the lock's key is not a leader election
// record this lock can use: not an objlease record, an objlease record of
// a newer schema, one whose data is not a LeaderElectionRecord, one whose
// holder, TTL and data disagree, or one whose token went back. The lock
// never overwrites it: `objlease break --force URL` replaces it with a
// released record (with --min-token N if the object shows no token), and
// the next leader's token is above that record's. The error names the
// key; it also matches objlease.ErrBadRecord or objlease.ErrNewerSchema
// when the object is not a valid objlease record.
var ErrBadRecord = errors.New("not a usable leader election record")

// ErrNotInitialized: Update was called before Get or Create showed this
// lock a record to update.
var ErrNotInitialized = errors.New("lock not initialized: call Get or Create first")

// groupResource is what the not-found error of Get names: client-go's
// apierrors.IsNotFound, which decides whether to Create, needs one.
var groupResource = schema.GroupResource{Group: "objlease", Resource: "leases"}

// ownWrites is how many of its latest writes a lock recognises as its own
// when it reads them back, whatever became of their replies.
const ownWrites = 8

// Lock is a client-go resourcelock.Interface kept as an objlease lease
// record at one key of a store. It is safe for concurrent use; client-go
// uses a lock from one LeaderElector at a time.
type Lock struct {
	store    providers.Store
	key      string
	identity string
	log      *slog.Logger
	salt     string

	mu sync.Mutex
	// cur is the object this lock last read or wrote at the key: nil before
	// the first Get or Create; absent (version "") if the key was empty.
	cur *seen
	// highest is the highest token this lock has seen at the key.
	highest uint64
	// term is the token of the latest held record this lock wrote.
	term uint64
	// sent are the nonces of this lock's latest writes, newest last.
	sent []string
}

// seen is one version of the object at the key.
type seen struct {
	version string
	rec     *objlease.Record // nil if absent
	ler     rl.LeaderElectionRecord
	mine    bool // this lock wrote it
}

var _ rl.Interface = (*Lock)(nil)

// Option configures a Lock.
type Option func(*Lock)

// WithLogger sends the election's events (client-go's RecordEvent: "became
// leader", "stopped leading") and the lock's notes on lost replies and
// conflicts to log. Default: discard.
func WithLogger(log *slog.Logger) Option { return func(l *Lock) { l.log = log } }

// New returns a lock at key in store for the candidate named identity,
// which must be unique among the candidates (as client-go requires). Pass
// the lock as leaderelection.LeaderElectionConfig.Lock.
func New(store providers.Store, key, identity string, opts ...Option) (*Lock, error) {
	switch {
	case store == nil:
		return nil, errors.New("resourcelock: nil store")
	case key == "":
		return nil, errors.New("resourcelock: empty key")
	case identity == "":
		return nil, fmt.Errorf("resourcelock %q: empty identity", key)
	}
	var salt [6]byte
	if _, err := rand.Read(salt[:]); err != nil {
		return nil, fmt.Errorf("resourcelock %q: %w", key, err)
	}
	l := &Lock{store: store, key: key, identity: identity, salt: hex.EncodeToString(salt[:])}
	for _, o := range opts {
		o(l)
	}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	l.log = l.log.With(slog.String("lock", key), slog.String("identity", identity))
	return l, nil
}

// Identity returns the candidate's identity.
func (l *Lock) Identity() string { return l.identity }

// Describe names the lock in client-go's logs: "objlease:" and the key.
func (l *Lock) Describe() string { return "objlease:" + l.key }

// Key returns the key of the record in its store.
func (l *Lock) Key() string { return l.key }

// RecordEvent logs an election event at level Info (see WithLogger).
func (l *Lock) RecordEvent(event string) {
	l.log.Info("leader election: "+event, slog.Uint64("token", l.Token()))
}

// Token returns the fencing token of this lock's latest term as leader,
// or 0 if it has not led. Call it once leading (in OnStartedLeading) and
// stamp it on the writes the leader makes: the token stays the same while
// the leader renews, and every later leader's is higher. It never goes
// down; it can rise within one client-go term only if the lock could not
// recognise its own latest write (every reply lost for long), and a
// resource fenced with the higher token then refuses the lower one too.
func (l *Lock) Token() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.term
}

// Get reads the record. It returns an error that apierrors.IsNotFound
// (and errors.Is providers.ErrNotFound) accepts if the key is empty, and
// an ErrBadRecord error naming the key if the object is not a usable
// record. The raw bytes are the object's: they change with every write.
func (l *Lock) Get(ctx context.Context) (*rl.LeaderElectionRecord, []byte, error) {
	s, raw, err := l.read(ctx)
	if err != nil {
		return nil, nil, err
	}
	if s.rec == nil {
		return nil, nil, fmt.Errorf("resourcelock %q: %w: %w", l.key, apierrors.NewNotFound(groupResource, l.key), providers.ErrNotFound)
	}
	ler := s.ler
	return &ler, raw, nil
}

// read reads the object at the key and makes it the lock's current view.
func (l *Lock) read(ctx context.Context) (*seen, []byte, error) {
	obj, err := l.store.Get(ctx, l.key, objlease.MaxRecordSize)
	if errors.Is(err, providers.ErrNotFound) {
		s := &seen{}
		l.mu.Lock()
		l.cur = s
		l.mu.Unlock()
		return s, nil, nil
	}
	if errors.Is(err, providers.ErrTooLarge) {
		return nil, nil, l.bad(fmt.Sprintf("the object is larger than a record can be (%d bytes)", objlease.MaxRecordSize), nil)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("resourcelock %q: reading the record: %w", l.key, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if c := l.cur; c != nil && c.rec != nil && c.version == obj.Version {
		return c, obj.Data, nil
	}
	s, err := l.decode(obj.Version, obj.Data)
	if err != nil {
		return nil, nil, err
	}
	l.cur = s
	l.highest = max(l.highest, s.rec.Token)
	if s.mine && s.rec.State == objlease.StateHeld {
		// A write whose reply was lost, now seen to have landed.
		l.term = max(l.term, s.rec.Token)
	}
	return s, obj.Data, nil
}

// decode checks an object read at the key; the caller holds l.mu.
func (l *Lock) decode(version string, data []byte) (*seen, error) {
	rec, err := objlease.DecodeRecord(l.key, data)
	if err != nil {
		var re *objlease.Error
		if errors.As(err, &re) {
			return nil, l.bad(re.Reason, re.Err)
		}
		return nil, l.bad(err.Error(), nil)
	}
	if rec.Token < l.highest {
		return nil, l.bad(fmt.Sprintf("its token %d is lower than %d, which this lock saw there before: it was rewritten by something other than a lock or objlease", rec.Token, l.highest), nil)
	}
	s := &seen{version: version, rec: rec, mine: slices.Contains(l.sent, rec.Nonce)}
	if len(rec.Data) == 0 {
		// A plain objlease record (a lease taken with objlease itself, or
		// broken with `objlease break`): no election data. Its holder holds
		// it for its TTL plus objlease's drift bound.
		s.ler = rl.LeaderElectionRecord{
			LeaseDurationSeconds: int(math.Ceil((time.Duration(rec.TTLMillis) * time.Millisecond).Seconds() * (1 + objlease.DefaultDriftBound))),
			RenewTime:            metav1.NewTime(rec.WrittenAt),
			AcquireTime:          metav1.NewTime(rec.AcquiredAt),
		}
		if rec.State == objlease.StateHeld {
			s.ler.HolderIdentity = rec.Holder
		}
		return s, nil
	}
	dec := json.NewDecoder(bytes.NewReader(rec.Data))
	if err := dec.Decode(&s.ler); err != nil || dec.More() {
		if err == nil {
			err = errors.New("trailing data")
		}
		return nil, l.bad(fmt.Sprintf("its data is not a LeaderElectionRecord: %v", err), nil)
	}
	switch {
	case rec.State == objlease.StateHeld && s.ler.HolderIdentity != rec.Holder:
		return nil, l.bad(fmt.Sprintf("its holder %q and its election data's holderIdentity %q disagree: changed by hand?", rec.Holder, s.ler.HolderIdentity), nil)
	case rec.State == objlease.StateReleased && s.ler.HolderIdentity != "":
		return nil, l.bad(fmt.Sprintf("it is released but its election data names holderIdentity %q: changed by hand?", s.ler.HolderIdentity), nil)
	case int64(s.ler.LeaseDurationSeconds)*1000 != rec.TTLMillis:
		return nil, l.bad(fmt.Sprintf("its ttl_ms %d and its election data's leaseDurationSeconds %d disagree: changed by hand?", rec.TTLMillis, s.ler.LeaseDurationSeconds), nil)
	}
	return s, nil
}

// bad returns an ErrBadRecord error naming the key.
func (l *Lock) bad(reason string, cause error) error {
	const fix = "the lock never overwrites it; objlease break --force replaces it with a released record"
	if cause != nil {
		return fmt.Errorf("resourcelock %q: %w (%w): %s; %s", l.key, ErrBadRecord, cause, reason, fix)
	}
	return fmt.Errorf("resourcelock %q: %w: %s; %s", l.key, ErrBadRecord, reason, fix)
}

// Create writes ler as a new record, only if the key is empty: otherwise
// an error matching providers.ErrPrecondition. The token is one above the
// highest this lock has seen at the key (1 for a fresh key).
func (l *Lock) Create(ctx context.Context, ler rl.LeaderElectionRecord) error {
	l.mu.Lock()
	rec, err := l.record(ler, nil)
	l.mu.Unlock()
	if err != nil {
		return err
	}
	return l.write(ctx, ler, rec, "")
}

// Update replaces the record with ler, only if it is still the version
// this lock last read or wrote: otherwise an error matching
// providers.ErrPrecondition. The token stays the same if ler renews the
// term of the record this lock itself last wrote (same holder, same
// LeaderTransitions), and goes up by one otherwise. An ler with no holder
// (client-go's release) writes a released record with the term's token.
func (l *Lock) Update(ctx context.Context, ler rl.LeaderElectionRecord) error {
	l.mu.Lock()
	cur := l.cur
	if cur == nil {
		l.mu.Unlock()
		return fmt.Errorf("resourcelock %q: %w", l.key, ErrNotInitialized)
	}
	if cur.rec == nil {
		l.mu.Unlock()
		return fmt.Errorf("resourcelock %q: update: the key was empty when last read: %w", l.key, providers.ErrPrecondition)
	}
	rec, err := l.record(ler, cur)
	l.mu.Unlock()
	if err != nil {
		return err
	}
	return l.write(ctx, ler, rec, cur.version)
}

// record returns the record to write for ler over prev (nil: create); the
// caller holds l.mu.
func (l *Lock) record(ler rl.LeaderElectionRecord, prev *seen) (*objlease.Record, error) {
	ttl := time.Duration(ler.LeaseDurationSeconds) * time.Second
	if ler.LeaseDurationSeconds <= 0 || ttl > objlease.MaxTTL {
		return nil, fmt.Errorf("resourcelock %q: leaseDurationSeconds %d is not in (0, %v]", l.key, ler.LeaseDurationSeconds, objlease.MaxTTL)
	}
	data, err := json.Marshal(ler)
	if err != nil {
		return nil, fmt.Errorf("resourcelock %q: %w", l.key, err)
	}
	if len(data) > objlease.MaxDataSize {
		return nil, fmt.Errorf("resourcelock %q: the election record is %d bytes as JSON, more than a lease record carries (%d)", l.key, len(data), objlease.MaxDataSize)
	}
	now := time.Now().UTC()
	rec := &objlease.Record{
		Schema:     1,
		Name:       l.key,
		Holder:     ler.HolderIdentity,
		Nonce:      l.nonce(),
		State:      objlease.StateHeld,
		TTLMillis:  ttl.Milliseconds(),
		AcquiredAt: now,
		WrittenAt:  now,
		Data:       data,
	}
	base := l.highest
	if prev != nil {
		base = max(base, prev.rec.Token)
	}
	switch {
	case ler.HolderIdentity == "":
		// client-go's release: the term ends; its token stays, so that the
		// next leader's is above it.
		rec.State = objlease.StateReleased
		rec.Holder = l.identity
		if prev != nil {
			rec.Token = prev.rec.Token
			return rec, nil
		}
	case prev != nil && prev.mine && prev.rec.State == objlease.StateHeld && prev.rec.Holder == ler.HolderIdentity &&
		prev.ler.LeaderTransitions == ler.LeaderTransitions:
		// A renewal of this lock's own term.
		rec.Token = prev.rec.Token
		rec.AcquiredAt = prev.rec.AcquiredAt
		rec.Renewals = prev.rec.Renewals + 1
		return rec, nil
	}
	if rec.Token, err = recordwrite.NextToken("resourcelock", l.key, base); err != nil {
		return nil, err
	}
	return rec, nil
}

// nonce returns a nonce for one write, remembering it as this lock's.
// The caller holds l.mu.
func (l *Lock) nonce() string {
	var b [10]byte
	rand.Read(b[:])
	n := l.salt + hex.EncodeToString(b[:])
	l.sent = append(l.sent, n)
	if len(l.sent) > ownWrites {
		l.sent = slices.Delete(l.sent, 0, len(l.sent)-ownWrites)
	}
	return n
}

// write writes rec conditionally (create if ifVersion is ""), on the
// write path objlease's own writes take (recordwrite.Writer.Write): if the
// outcome is unknown, or the store reports a conflict, it re-reads until
// it can tell whether rec landed (the record then carries rec's nonce);
// if the object is unchanged, it sends the same bytes again, a few times;
// after a conflict it waits for the racing write to land. A read error
// that re-reading will not cure (objlease.IsPermanent: a missing bucket,
// refused credentials) ends it at once with objlease.ErrAmbiguous; so
// does the end of ctx. A later Get still recognises the write as this
// lock's if it landed.
func (l *Lock) write(ctx context.Context, ler rl.LeaderElectionRecord, rec *objlease.Record, ifVersion string) error {
	body, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("resourcelock %q: %w", l.key, err)
	}
	w := recordwrite.Writer{
		Store:     l.store,
		Key:       l.key,
		Noun:      "resourcelock",
		Unusable:  func(err error) bool { return errors.Is(err, ErrBadRecord) },
		Permanent: objlease.IsPermanent,
		Log: func(level slog.Level, msg string, attrs ...any) {
			l.log.Log(context.Background(), level, msg, attrs...)
		},
	}
	r, err := w.Write(ctx, body, ifVersion, func(ctx context.Context) (recordwrite.Found, error) {
		return l.readBack(ctx, rec)
	})
	switch {
	case err == nil && !r.ReadBack:
		l.wrote(&seen{version: r.Version, rec: rec, ler: ler, mine: true})
		return nil
	case err == nil:
		return nil
	case errors.Is(err, ErrBadRecord), errors.Is(err, objlease.ErrAmbiguous):
		return err // names the key
	}
	return fmt.Errorf("resourcelock %q: writing the record: %w", l.key, err)
}

// wrote makes s, written by this lock, its current view.
func (l *Lock) wrote(s *seen) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cur = s
	l.highest = max(l.highest, s.rec.Token)
	if s.rec.State == objlease.StateHeld {
		l.term = max(l.term, s.rec.Token)
	}
}

// readBack re-reads the record to resolve the write of rec: it is this
// lock's own write if it carries rec's nonce, token and holder.
func (l *Lock) readBack(ctx context.Context, rec *objlease.Record) (recordwrite.Found, error) {
	s, _, err := l.read(ctx)
	if err != nil {
		return recordwrite.Found{}, err
	}
	if s.rec != nil && s.rec.Nonce == rec.Nonce && s.rec.Token == rec.Token && s.rec.Holder == rec.Holder {
		// Token and holder too: a record rewritten after the write landed
		// may keep its nonce, and is not this lock's.
		l.log.Info("the write landed", slog.Uint64("token", rec.Token))
		l.wrote(s)
		return recordwrite.Found{Version: s.version, Own: true}, nil
	}
	return recordwrite.Found{Version: s.version}, nil
}
