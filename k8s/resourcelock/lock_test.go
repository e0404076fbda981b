package resourcelock_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	rl "k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/objlease/objlease/k8s/resourcelock"
	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/faulty"
	"github.com/objlease/objlease/providers/mem"
)

const key = "leases/controller"

func newLock(t *testing.T, store providers.Store, identity string) *resourcelock.Lock {
	t.Helper()
	l, err := resourcelock.New(store, key, identity)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// ler is the record client-go writes for identity.
func ler(identity string, transitions int) rl.LeaderElectionRecord {
	now := metav1.NewTime(time.Now())
	return rl.LeaderElectionRecord{HolderIdentity: identity, LeaseDurationSeconds: 15,
		AcquireTime: now, RenewTime: now, LeaderTransitions: transitions}
}

// stored reads the record at key as objlease does.
func stored(t *testing.T, store providers.Store) (*objlease.Record, string) {
	t.Helper()
	obj, err := store.Get(context.Background(), key, 0)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := objlease.DecodeRecord(key, obj.Data)
	if err != nil {
		t.Fatal(err)
	}
	return rec, obj.Version
}

func TestCreateAndUpdateConflicts(t *testing.T) {
	ctx := context.Background()
	store := mem.New()
	a, b := newLock(t, store, "a"), newLock(t, store, "b")

	if _, _, err := a.Get(ctx); !apierrors.IsNotFound(err) || !errors.Is(err, providers.ErrNotFound) {
		t.Fatalf("Get of an empty key: %v, want a not-found error client-go recognises", err)
	}
	if err := a.Create(ctx, ler("a", 0)); err != nil {
		t.Fatal(err)
	}
	if a.Token() != 1 {
		t.Fatalf("token after create: %d, want 1", a.Token())
	}
	if err := b.Create(ctx, ler("b", 0)); !errors.Is(err, providers.ErrPrecondition) {
		t.Fatalf("second Create: %v, want ErrPrecondition", err)
	}
	got, raw, err := b.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.HolderIdentity != "a" || got.LeaseDurationSeconds != 15 || len(raw) == 0 {
		t.Fatalf("b reads %+v, want a's record", got)
	}

	// a renews: same token, one more renewal.
	for i := 0; i < 3; i++ {
		if err := a.Update(ctx, ler("a", 0)); err != nil {
			t.Fatal(err)
		}
	}
	rec, _ := stored(t, store)
	if rec.Token != 1 || rec.Holder != "a" || rec.Renewals != 3 || rec.TTLMillis != 15000 {
		t.Fatalf("after renewals: %+v", rec)
	}
	// b's view is stale: its takeover is refused.
	if err := b.Update(ctx, ler("b", 1)); !errors.Is(err, providers.ErrPrecondition) {
		t.Fatalf("stale Update: %v, want ErrPrecondition", err)
	}
	_, raw2, err := b.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(raw2) == string(raw) {
		t.Fatal("raw record unchanged after renewals")
	}
	if err := b.Update(ctx, ler("b", 1)); err != nil {
		t.Fatal(err)
	}
	if b.Token() != 2 {
		t.Fatalf("b's token: %d, want 2", b.Token())
	}
	// a's fast-path renewal over its own last write is refused now.
	if err := a.Update(ctx, ler("a", 0)); !errors.Is(err, providers.ErrPrecondition) {
		t.Fatalf("a's renewal after b took over: %v, want ErrPrecondition", err)
	}
	rec, _ = stored(t, store)
	if rec.Token != 2 || rec.Holder != "b" || rec.Renewals != 0 {
		t.Fatalf("after takeover: %+v", rec)
	}
	var data rl.LeaderElectionRecord
	if err := json.Unmarshal(rec.Data, &data); err != nil || data.HolderIdentity != "b" || data.LeaderTransitions != 1 {
		t.Fatalf("record data %s: %v", rec.Data, err)
	}
}

func TestUpdateBeforeGet(t *testing.T) {
	l := newLock(t, mem.New(), "a")
	if err := l.Update(context.Background(), ler("a", 0)); !errors.Is(err, resourcelock.ErrNotInitialized) {
		t.Fatalf("Update before Get: %v", err)
	}
}

// A process that restarts with the same identity renews what client-go
// takes for its own record; the lock starts a new term with a new token.
func TestRestartSameIdentityNewToken(t *testing.T) {
	ctx := context.Background()
	store := mem.New()
	first := newLock(t, store, "a")
	if err := first.Create(ctx, ler("a", 0)); err != nil {
		t.Fatal(err)
	}
	second := newLock(t, store, "a")
	if _, _, err := second.Get(ctx); err != nil {
		t.Fatal(err)
	}
	if err := second.Update(ctx, ler("a", 0)); err != nil {
		t.Fatal(err)
	}
	if second.Token() != 2 {
		t.Fatalf("restarted holder's token: %d, want 2", second.Token())
	}
	if err := second.Update(ctx, ler("a", 0)); err != nil || second.Token() != 2 {
		t.Fatalf("renewal: %v, token %d", err, second.Token())
	}
}

// client-go's release writes a record with no holder: a released record
// keeping the term's token, and the next leader's token is above it.
func TestReleaseKeepsToken(t *testing.T) {
	ctx := context.Background()
	store := mem.New()
	a, b := newLock(t, store, "a"), newLock(t, store, "b")
	if err := a.Create(ctx, ler("a", 0)); err != nil {
		t.Fatal(err)
	}
	if err := a.Update(ctx, rl.LeaderElectionRecord{LeaseDurationSeconds: 1, LeaderTransitions: 0}); err != nil {
		t.Fatal(err)
	}
	rec, _ := stored(t, store)
	if rec.State != objlease.StateReleased || rec.Token != 1 {
		t.Fatalf("released record: %+v", rec)
	}
	got, _, err := b.Get(ctx)
	if err != nil || got.HolderIdentity != "" {
		t.Fatalf("b reads %+v, %v; want no holder", got, err)
	}
	if err := b.Update(ctx, ler("b", 1)); err != nil || b.Token() != 2 {
		t.Fatalf("b takes over: %v, token %d", err, b.Token())
	}
	if a.Token() != 1 {
		t.Fatalf("a's token: %d, want 1", a.Token())
	}
}

// A record that objlease itself holds (no election data) is reported as
// held for its TTL plus the drift bound, and after `objlease break` the
// next leader's token is above the breaker's.
func TestPlainObjleaseRecord(t *testing.T) {
	ctx := context.Background()
	store := mem.New()
	c, err := objlease.New(store, key, objlease.Options{TTL: 10 * time.Second, Holder: "cli"})
	if err != nil {
		t.Fatal(err)
	}
	lease, err := c.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l := newLock(t, store, "a")
	got, _, err := l.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.HolderIdentity != "cli" || got.LeaseDurationSeconds != 11 {
		t.Fatalf("plain record reads as %+v, want holder cli for 11 s", got)
	}
	lease.Release(ctx)
	tok, err := c.Break(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, _, err = l.Get(ctx); err != nil || got.HolderIdentity != "" {
		t.Fatalf("broken record reads as %+v, %v", got, err)
	}
	if err := l.Update(ctx, ler("a", 1)); err != nil {
		t.Fatal(err)
	}
	if l.Token() != tok+1 {
		t.Fatalf("token after break at %d: %d", tok, l.Token())
	}
}

// Objects that are not election records, or records changed by hand, are
// reported with the key and never overwritten.
func TestBadRecordsNotOverwritten(t *testing.T) {
	good := func(mutate func(r *objlease.Record)) string {
		d, _ := json.Marshal(ler("a", 0))
		r := objlease.Record{Schema: 1, Name: key, Token: 5, Holder: "a", Nonce: "n", State: objlease.StateHeld,
			TTLMillis: 15000, WrittenAt: time.Now(), Data: d}
		mutate(&r)
		b, _ := json.Marshal(r)
		return string(b)
	}
	for _, tc := range []struct{ name, body, want string }{
		{"garbage", "hello, world", "not JSON"},
		{"foreign JSON", `{"holderIdentity":"x","leaseDurationSeconds":15}`, "not an objlease record"},
		{"newer schema", `{"objlease":99}`, "newer schema"},
		{"data not election", good(func(r *objlease.Record) { r.Data = []byte("payload") }), "not a LeaderElectionRecord"},
		{"holder edited", good(func(r *objlease.Record) { r.Holder = "mallory" }), `holder "mallory"`},
		{"ttl edited", good(func(r *objlease.Record) { r.TTLMillis = 60000 }), "ttl_ms 60000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			store := mem.New()
			res, err := store.Create(ctx, key, []byte(tc.body), nil)
			if err != nil {
				t.Fatal(err)
			}
			l := newLock(t, store, "a")
			_, _, err = l.Get(ctx)
			if !errors.Is(err, resourcelock.ErrBadRecord) || !strings.Contains(err.Error(), `"`+key+`"`) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Get: %v; want ErrBadRecord naming %q and saying %q", err, key, tc.want)
			}
			if apierrors.IsNotFound(err) {
				t.Fatal("a bad record reads as not found: client-go would try to create it")
			}
			if err := l.Update(ctx, ler("a", 1)); !errors.Is(err, resourcelock.ErrNotInitialized) {
				t.Fatalf("Update after a bad read: %v", err)
			}
			if err := l.Create(ctx, ler("a", 1)); !errors.Is(err, providers.ErrPrecondition) {
				t.Fatalf("Create over a bad record: %v", err)
			}
			obj, err := store.Get(ctx, key, 0)
			if err != nil || obj.Version != res.Version || string(obj.Data) != tc.body {
				t.Fatalf("object changed: %v %q", err, obj.Data)
			}

			// The repair the error names: objlease break --force.
			minToken := uint64(7)
			c, err := objlease.New(store, key, objlease.Options{TTL: 15 * time.Second, Force: true, MinToken: &minToken})
			if err != nil {
				t.Fatal(err)
			}
			tok, err := c.Break(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got, _, err := l.Get(ctx); err != nil || got.HolderIdentity != "" {
				t.Fatalf("Get after break: %+v, %v", got, err)
			}
			if err := l.Update(ctx, ler("a", 1)); err != nil || l.Token() != tok+1 {
				t.Fatalf("Update after break at token %d: %v, token %d", tok, err, l.Token())
			}
		})
	}
}

// A token lower than one the lock saw before means the record was
// rewritten by hand.
func TestTokenWentBack(t *testing.T) {
	ctx := context.Background()
	store := mem.New()
	a := newLock(t, store, "a")
	if err := a.Create(ctx, ler("a", 0)); err != nil {
		t.Fatal(err)
	}
	rewrite := func(token uint64) {
		t.Helper()
		rec, v := stored(t, store)
		rec.Token, rec.Nonce = token, "by hand"
		b, _ := json.Marshal(rec)
		if _, err := store.Replace(ctx, key, b, nil, v); err != nil {
			t.Fatal(err)
		}
	}
	rewrite(5)
	if _, _, err := a.Get(ctx); err != nil {
		t.Fatal(err)
	}
	rewrite(3)
	if _, _, err := a.Get(ctx); !errors.Is(err, resourcelock.ErrBadRecord) || !strings.Contains(err.Error(), "lower than 5") {
		t.Fatalf("Get of a record whose token went back: %v", err)
	}
}

func faultyStore(t *testing.T, ops map[faulty.Op]faulty.Rates) (providers.Store, *faulty.Driver) {
	t.Helper()
	f, err := faulty.New(mem.NewDriver(), faulty.Config{Seed: 7, Ops: ops})
	if err != nil {
		t.Fatal(err)
	}
	return providers.NewBucket(f), f
}

// Every write lands and its reply is lost: the lock recognises its own
// writes, keeps its token on renewals and bumps it on a takeover.
func TestLostRepliesRecognised(t *testing.T) {
	ctx := context.Background()
	store, f := faultyStore(t, map[faulty.Op]faulty.Rates{faulty.Create: {LostReply: 1}, faulty.Replace: {LostReply: 1}})
	a := newLock(t, store, "a")
	if err := a.Create(ctx, ler("a", 0)); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if err := a.Update(ctx, ler("a", 0)); err != nil {
			t.Fatal(err)
		}
	}
	rec, _ := stored(t, store)
	if rec.Token != 1 || rec.Renewals != 5 || a.Token() != 1 {
		t.Fatalf("after lost replies: %+v, token %d", rec, a.Token())
	}
	b := newLock(t, store, "b")
	if _, _, err := b.Get(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Update(ctx, ler("b", 1)); err != nil || b.Token() != 2 {
		t.Fatalf("takeover: %v, token %d", err, b.Token())
	}
	if n := f.Counts()[faulty.KindLostReply]; n != 7 {
		t.Fatalf("lost replies: %d, want 7", n)
	}
}

// Requests lost before reaching the store: the lock finds the record
// unchanged, sends the same bytes again a few times and then reports the
// unknown outcome; the record is intact.
func TestLostRequestsReported(t *testing.T) {
	ctx := context.Background()
	store, _ := faultyStore(t, map[faulty.Op]faulty.Rates{faulty.Replace: {Unknown: 1}})
	a := newLock(t, store, "a")
	if err := a.Create(ctx, ler("a", 0)); err != nil {
		t.Fatal(err)
	}
	before, v := stored(t, store)
	if err := a.Update(ctx, ler("a", 0)); !errors.Is(err, providers.ErrUnknownOutcome) {
		t.Fatalf("Update: %v, want ErrUnknownOutcome", err)
	}
	after, v2 := stored(t, store)
	if v2 != v || after.Nonce != before.Nonce {
		t.Fatal("record changed")
	}
}

// racingStore answers the lock's first Replace as S3 does while another
// conditional write to the key is in flight: 409, and the same to every
// Replace until that write lands, 20 ms later.
type racingStore struct {
	providers.Store
	mu      sync.Mutex
	landing time.Time // while the racer's write is in flight
	racer   []byte
}

func (s *racingStore) Replace(ctx context.Context, k string, data []byte, md map[string]string, ifVersion string) (providers.WriteResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.landing.IsZero() {
		s.landing = time.Now().Add(20 * time.Millisecond)
		time.AfterFunc(20*time.Millisecond, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if _, err := s.Store.Replace(context.Background(), k, s.racer, nil, ifVersion); err != nil {
				panic(err)
			}
		})
	}
	if time.Now().Before(s.landing) {
		return providers.WriteResult{}, fmt.Errorf("%w: a conditional operation is in progress", providers.ErrConflict)
	}
	return s.Store.Replace(ctx, k, data, md, ifVersion)
}

// A 409 to a racing write is followed by a wait for that write to land,
// as the core's writes do: the lock then finds the other write and reports
// the race lost, rather than failing on three 409s in a row sent at once.
func TestConflictWaitsForTheRacingWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		base := mem.New()
		a := newLock(t, base, "a")
		if err := a.Create(ctx, ler("a", 0)); err != nil {
			t.Fatal(err)
		}
		rec, _ := stored(t, base)
		var err error
		rec.Holder, rec.Nonce, rec.Token = "b", "racer", rec.Token+1
		if rec.Data, err = json.Marshal(ler("b", 1)); err != nil {
			t.Fatal(err)
		}
		racer, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		rs := &racingStore{Store: base, racer: racer}
		a2 := newLock(t, rs, "a")
		if _, _, err := a2.Get(ctx); err != nil {
			t.Fatal(err)
		}
		err = a2.Update(ctx, ler("a", 0))
		if !errors.Is(err, providers.ErrPrecondition) {
			t.Fatalf("Update beside a racing write: %v, want ErrPrecondition: the race lost to the write that landed", err)
		}
	})
}

// rewritingStore lets the first Replace land, rewrites the record as a hand
// edit would (the token raised, holder and nonce kept), and loses the reply.
type rewritingStore struct {
	providers.Store
	done bool
}

func (s *rewritingStore) Replace(ctx context.Context, k string, data []byte, md map[string]string, v string) (providers.WriteResult, error) {
	res, err := s.Store.Replace(ctx, k, data, md, v)
	if err != nil || s.done {
		return res, err
	}
	s.done = true
	var rec map[string]any
	if err := json.Unmarshal(data, &rec); err != nil {
		return res, err
	}
	rec["token"] = uint64(1 << 62)
	b, _ := json.Marshal(rec)
	if _, err := s.Store.Replace(ctx, k, b, md, res.Version); err != nil {
		return res, err
	}
	return providers.WriteResult{}, providers.Wrap("replace", k, providers.ErrUnknownOutcome, errors.New("connection reset"))
}

// A write whose reply is lost is recognised by its nonce; a record that
// carries the nonce with another token was rewritten after the write
// landed, and is not the lock's: taking it for its own, the lock would
// write its own lower token over it at the next renewal.
func TestRewrittenOwnWriteIsNotAdopted(t *testing.T) {
	ctx := context.Background()
	store := &rewritingStore{Store: mem.New()}
	a := newLock(t, store, "a")
	if err := a.Create(ctx, ler("a", 0)); err != nil {
		t.Fatal(err)
	}
	if err := a.Update(ctx, ler("a", 0)); !errors.Is(err, providers.ErrPrecondition) {
		t.Fatalf("Update over a rewritten record: %v, want ErrPrecondition", err)
	}
	a.Update(ctx, ler("a", 0))
	if rec, _ := stored(t, store); rec.Token != 1<<62 {
		t.Fatalf("record token %d after the updates, want the rewrite's %d left alone", rec.Token, uint64(1<<62))
	}
}

// gonePermanentlyStore loses the reply of its first Replace, which never
// lands, and then refuses every read: its bucket is gone.
type gonePermanentlyStore struct {
	providers.Store
	mu   sync.Mutex
	gone bool
}

func (s *gonePermanentlyStore) Replace(ctx context.Context, k string, data []byte, md map[string]string, v string) (providers.WriteResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gone = true
	return providers.WriteResult{}, providers.Wrap("replace", k, providers.ErrUnknownOutcome, errors.New("connection reset"))
}

func (s *gonePermanentlyStore) Get(ctx context.Context, k string, maxBytes int64) (*providers.Object, error) {
	s.mu.Lock()
	gone := s.gone
	s.mu.Unlock()
	if gone {
		return nil, providers.Wrap("get", k, providers.ErrNoBucket, nil)
	}
	return s.Store.Get(ctx, k, maxBytes)
}

// A write whose reply is lost is resolved by re-reading; a read error that
// re-reading will not cure (a missing bucket) ends that at once, as the
// core's writes do, rather than when the context ends.
func TestPermanentReadErrorEndsResolution(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &gonePermanentlyStore{Store: mem.New()}
		a := newLock(t, store, "a")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := a.Create(ctx, ler("a", 0)); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		err := a.Update(ctx, ler("a", 0))
		if waited := time.Since(start); waited != 0 {
			t.Fatalf("Update returned after %v (%v), want at once", waited, err)
		}
		if !errors.Is(err, providers.ErrNoBucket) || !errors.Is(err, objlease.ErrAmbiguous) ||
			!errors.Is(err, providers.ErrUnknownOutcome) || !strings.Contains(err.Error(), `"`+key+`"`) {
			t.Fatalf("Update: %v, want ErrAmbiguous naming the key and matching ErrNoBucket and the lost reply", err)
		}
	})
}
