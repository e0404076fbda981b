//go:build objlease_unsafe

package spin_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/objlease/objlease/internal/safeguards"
	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/objlease/fence"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/mem"
)

// Each replay follows the steps of one trail SPIN found with a safeguard
// off (trails/NAME.txt, written by scripts/spin.sh), on the real code: a
// scripted store (hooks run the other clients' steps at the point where
// the trail interleaves them) and a fake clock. It returns the violation
// of the model's property that it observed, or "" if there was none. Run
// with the safeguard off it must find the violation; with it on, not.
type replay struct {
	name  string       // trail file, without .txt
	sw    *atomic.Bool // the safeguard the model's variant removes
	model string       // the model's property
	run   func(t *testing.T) string
}

var replays = []replay{
	{"drift_margin", &safeguards.DriftMargin, "P_EXCL", replayDriftMargin},
	{"keep_record", &safeguards.KeepRecordOnRelease, "P_TOKEN", replayKeepRecord},
	{"nonce_check", &safeguards.NonceCheck, "P_TOKEN", replayNonceCheck},
	{"unique_nonces", &safeguards.UniqueNonces, "P_TOKEN", replayUniqueNonces},
	{"own_write_check", &safeguards.OwnWriteCheck, "P_RELEASE", replayOwnWriteCheck},
	{"unique_tombstones", &safeguards.UniqueTombstones, "P_FENCE", replayUniqueTombstones},
	{"callback_before_release", &safeguards.CallbackBeforeRelease, "P_EXCL", replayCallbackBeforeRelease},
}

// TestReplays runs every replay with its safeguard off (the violation the
// model found must show) and on (it must not).
func TestReplays(t *testing.T) {
	for _, r := range replays {
		t.Run(r.name, func(t *testing.T) {
			if _, err := os.Stat(filepath.Join("trails", r.name+".txt")); err != nil {
				t.Fatalf("no trail for %s: %v", r.name, err)
			}
			t.Run("off", func(t *testing.T) {
				r.sw.Store(false)
				defer r.sw.Store(true)
				if v := r.run(t); v == "" {
					t.Fatalf("%s off: the code did not fail as the model's trail did (%s)", r.name, r.model)
				} else {
					t.Logf("%s off: %s", r.name, v)
				}
			})
			t.Run("on", func(t *testing.T) {
				if v := r.run(t); v != "" {
					t.Fatalf("%s on: %s", r.name, v)
				}
			})
		})
	}
}

// TestTrailsAreReplayed checks that every trail kept has a replay.
func TestTrailsAreReplayed(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("trails", "*.txt"))
	if len(files) == 0 {
		t.Fatal("no trails")
	}
	have := map[string]bool{}
	for _, r := range replays {
		have[r.name] = true
	}
	for _, f := range files {
		if name := strings.TrimSuffix(filepath.Base(f), ".txt"); !have[name] {
			t.Errorf("trail %s has no replay", name)
		}
	}
}

func record(t *testing.T, s providers.Store) *objlease.Record {
	t.Helper()
	obj, err := s.Get(context.Background(), key, 0)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := objlease.DecodeRecord(key, obj.Data)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// believes is the model's belief: inside its validity on its own clock, its
// context not cancelled.
func believes(l *objlease.Lease) bool {
	return l != nil && l.ValidFor() > 0 && l.Context().Err() == nil
}

// acquireWaiting makes c take the lease, waiting on clk as long as c's rule
// makes it wait.
func acquireWaiting(t *testing.T, c *objlease.Client, clk *clock.Fake) *objlease.Lease {
	t.Helper()
	for range 10 {
		l, err := c.TryAcquire(context.Background())
		var held *objlease.Error
		switch {
		case err == nil:
			return l
		case errors.Is(err, objlease.ErrHeld) && errors.As(err, &held):
			clk.Advance(held.Wait)
		default:
			t.Fatalf("%s: %v", c.Options().Holder, err)
		}
	}
	t.Fatalf("%s never acquired", c.Options().Holder)
	return nil
}

func release(ls ...*objlease.Lease) {
	for _, l := range ls {
		if l != nil {
			l.Release(context.Background())
		}
	}
}

// drift_margin: c1's create lands and its reply is slow; c0, refused, reads
// the record and waits out its TTL; it takes over; then c1's reply
// arrives and c1 counts its validity from it: two holders believe at once.
func replayDriftMargin(t *testing.T) string {
	m := mem.New()
	h := newHooks(m)
	clk := clock.NewFake(epoch)
	c1 := newClient(t, h, "c1", clk)
	c0 := newClient(t, m, "c0", clk)
	var l0 *objlease.Lease
	h.after["create"] = func(err error) error {
		if err == nil {
			l0 = acquireWaiting(t, c0, clk) // while c1's reply is on its way
		}
		return err
	}
	// c1's first renewal, due at once, is on its way while we look (the
	// model's step after "c1 holds").
	// With the margin, c1's reply comes after its validity ended: its
	// acquisition is lost and its record given back (a replace that must
	// not wait), and c1 never holds.
	// The renewal is told from the give-back by what it writes: it may
	// start before TryAcquire has returned.
	looked := make(chan struct{})
	h.beforeReplace = func(data []byte) {
		if rec, err := objlease.DecodeRecord(key, data); err == nil && rec.State == objlease.StateHeld {
			<-looked
		}
	}
	l1, err := c1.TryAcquire(context.Background())
	if errors.Is(err, objlease.ErrLeaseLost) {
		close(looked)
		release(l0)
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	both := believes(l0) && believes(l1)
	close(looked)
	defer release(l0, l1)
	if both {
		return fmt.Sprintf("two holders believe at once: c0 (token %d) and c1 (token %d, valid for %v more)", l0.Token(), l1.Token(), l1.ValidFor())
	}
	return ""
}

// keep_record: c1 acquires and releases; c0, which never saw the record,
// acquires: with the record deleted, token 1 is granted a second time.
func replayKeepRecord(t *testing.T) string {
	ctx := context.Background()
	m := mem.New()
	clk := clock.NewFake(epoch)
	l1, err := newClient(t, m, "c1", clk).TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l0, err := newClient(t, m, "c0", clk).TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer release(l0)
	if l0.Token() == l1.Token() {
		return fmt.Sprintf("token %d granted twice (c1, then c0 after c1's release)", l0.Token())
	}
	return ""
}

// nonce_check: c1's create is held up and never lands; its reply is
// unknown, and it assumes it landed; c0 creates: both hold token 1.
func replayNonceCheck(t *testing.T) string {
	ctx := context.Background()
	m := mem.New()
	h := newHooks(m)
	clk := clock.NewFake(epoch)
	h.before["create"] = func() error { return unknown("create") }
	l1, err := newClient(t, h, "c1", clk).TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l0, err := newClient(t, m, "c0", clk).TryAcquire(ctx)
	defer release(l0, l1)
	if err == nil && l0.Token() == l1.Token() {
		return fmt.Sprintf("token %d granted twice (c1 assumed its create landed; c0 created)", l0.Token())
	}
	return ""
}

// unique_nonces: twins (one holder name, one Rand seed). c1's create is
// held up; c0 creates, drawing the same nonce; c1's reply is unknown, and
// its re-read finds c0's record with its holder and nonce: both hold
// token 1.
func replayUniqueNonces(t *testing.T) string {
	ctx := context.Background()
	m := mem.New()
	h := newHooks(m)
	clk := clock.NewFake(epoch)
	seeded := func(so *objlease.SessionOptions) { so.Rand = rand.New(rand.NewPCG(7, 7)) }
	c1 := newClient(t, h, "twin", clk, seeded)
	c0 := newClient(t, m, "twin", clk, seeded)
	var l0 *objlease.Lease
	h.before["create"] = func() error {
		var err error
		if l0, err = c0.TryAcquire(ctx); err != nil {
			t.Fatal(err)
		}
		return unknown("create")
	}
	l1, err := c1.TryAcquire(ctx)
	defer release(l0, l1)
	if err == nil && l0.Token() == l1.Token() {
		return fmt.Sprintf("token %d granted twice (c1 took c0's write for its own)", l1.Token())
	}
	return ""
}

// own_write_check: c1 holds token 1; the operator deletes the record; c0
// recreates it with token 1; c1 releases: its write is refused, it
// re-reads, and takes c0's record (same token) for its own, releasing it
// while c0 holds.
func replayOwnWriteCheck(t *testing.T) string {
	ctx := context.Background()
	m := mem.New()
	clk := clock.NewFake(epoch)
	l1, err := newClient(t, m, "c1", clk).TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := m.Get(ctx, key, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Delete(ctx, key, obj.Version); err != nil { // the operator
		t.Fatal(err)
	}
	l0, err := newClient(t, m, "c0", clk).TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer release(l0)
	l1.Release(ctx)
	if rec := record(t, m); rec.State == objlease.StateReleased && believes(l0) {
		return fmt.Sprintf("c1's release ended c0's tenure (token %d): the record is released while c0 holds", rec.Token)
	}
	return ""
}

// unique_tombstones: on a store whose versions are MD5s of the bytes, c0
// (token 1) deletes the data object, stats the tombstone and pauses; c1
// takes the lease (token 2) and deletes the object: an identical
// tombstone, the same version; c0's write matches it and lands: token 1
// after 2.
func replayUniqueTombstones(t *testing.T) string {
	ctx := context.Background()
	s := md5Store{mem.New()}
	h := newHooks(s)
	const data = "out/report.csv"
	opts := fence.Options{UniquePayloads: true}
	if err := fence.Delete(ctx, s, data, 1, opts); err != nil { // c0
		t.Fatal(err)
	}
	h.after["stat"] = func(err error) error {
		if derr := fence.Delete(ctx, s, data, 2, opts); derr != nil { // c1, while c0 pauses
			t.Fatal(derr)
		}
		return err
	}
	err := fence.Delete(ctx, h, data, 1, opts) // c0 again, token 1
	if err == nil {
		a, serr := s.Stat(ctx, data)
		if serr != nil {
			t.Fatal(serr)
		}
		return fmt.Sprintf("the data object accepted token 1 after token 2 (its token is now %s)", a.Metadata[fence.TokenKey])
	}
	if !errors.Is(err, fence.ErrStale) {
		t.Fatalf("c0: %v, want ErrStale", err)
	}
	return ""
}

// callback_before_release: c1 holds and releases; its released record
// lands; c0 reads it and takes over, before c1's release returns: with the
// record written before c1's context ends, both believe at once.
func replayCallbackBeforeRelease(t *testing.T) string {
	ctx := context.Background()
	m := mem.New()
	h := newHooks(m)
	clk := clock.NewFake(epoch)
	l1, err := newClient(t, h, "c1", clk).TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c0 := newClient(t, m, "c0", clk)
	var l0 *objlease.Lease
	var both bool
	h.after["replace"] = func(err error) error {
		if err == nil {
			if l0, err = c0.TryAcquire(ctx); err != nil {
				t.Fatal(err)
			}
			both = believes(l0) && l1.Context().Err() == nil
		}
		return err
	}
	if err := l1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	defer release(l0)
	if both {
		return fmt.Sprintf("two holders believe at once: c0 took token %d while c1's context was still live", l0.Token())
	}
	return ""
}

// md5Store models S3's versions: a version is the MD5 of the object's
// bytes, metadata left out, so identical bytes give an earlier version
// again.
type md5Store struct{ m *providers.Bucket }

func md5Version(b []byte) string { s := md5.Sum(b); return hex.EncodeToString(s[:]) }

func (s md5Store) Get(ctx context.Context, k string, max int64) (*providers.Object, error) {
	o, err := s.m.Get(ctx, k, max)
	if err != nil {
		return nil, err
	}
	o.Version = md5Version(o.Data)
	return o, nil
}

func (s md5Store) Stat(ctx context.Context, k string) (*providers.Attrs, error) {
	o, err := s.Get(ctx, k, 0)
	if err != nil {
		return nil, err
	}
	return &o.Attrs, nil
}

func (s md5Store) Create(ctx context.Context, k string, d []byte, md map[string]string) (providers.WriteResult, error) {
	res, err := s.m.Create(ctx, k, d, md)
	res.Version = md5Version(d)
	return res, err
}

func (s md5Store) current(ctx context.Context, op, k, ifVersion string) (string, error) {
	o, err := s.m.Get(ctx, k, 0)
	switch {
	case errors.Is(err, providers.ErrNotFound):
		return "", providers.Wrap(op, k, providers.ErrPrecondition, err)
	case err != nil:
		return "", err
	case md5Version(o.Data) != ifVersion:
		return "", providers.Wrap(op, k, providers.ErrPrecondition, nil)
	}
	return o.Version, nil
}

func (s md5Store) Replace(ctx context.Context, k string, d []byte, md map[string]string, ifVersion string) (providers.WriteResult, error) {
	v, err := s.current(ctx, "replace", k, ifVersion)
	if err != nil {
		return providers.WriteResult{}, err
	}
	res, err := s.m.Replace(ctx, k, d, md, v)
	res.Version = md5Version(d)
	return res, err
}

func (s md5Store) Delete(ctx context.Context, k, ifVersion string) error {
	v, err := s.current(ctx, "delete", k, ifVersion)
	if err != nil {
		return err
	}
	return s.m.Delete(ctx, k, v)
}

func (s md5Store) List(ctx context.Context, prefix, token string, n int) (providers.ListPage, error) {
	return s.m.List(ctx, prefix, token, n)
}

func (s md5Store) Properties() providers.Properties {
	return providers.Properties{Name: "md5", VersionsRepeat: true}
}
func (s md5Store) As(any) bool  { return false }
func (s md5Store) Close() error { return nil }

func unknown(op string) error {
	return providers.Wrap(op, key, providers.ErrUnknownOutcome, errors.New("reply lost"))
}
