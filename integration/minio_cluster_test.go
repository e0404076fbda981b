package integration

// objlease on a distributed MinIO: 4 server processes on this host, one
// drive each, one erasure set (2 data and 2 parity drives). The same
// suites as on a single MinIO server, through one node and across nodes,
// and what a hung node (SIGSTOP: it accepts connections and never
// answers) does to a lease held through a healthy one: the latencies are
// logged, and only what is safe is asserted. docs/stores.md has the
// verdict and the figures these tests log.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/objlease/objlease/integration/emulator"
	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/fence"
	"github.com/objlease/objlease/objlease/fence/fencetest"
	"github.com/objlease/objlease/objlease/leasetest"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/probe"
	"github.com/objlease/objlease/providers/providertest"
	"github.com/objlease/objlease/providers/s3store"
)

// clusterTarget is c's bucket through node i, with a fresh prefix.
func clusterTarget(t *testing.T, c *emulator.Cluster, i int) s3Target {
	t.Helper()
	e := c.Node(i)
	return s3Target{bucket: e.Bucket, prefix: emulator.Prefix(t), emu: e}
}

func TestMinIOClusterConformance(t *testing.T) {
	target := clusterTarget(t, emulator.MinIOCluster(t), 0)
	providertest.Run(t, providertest.Config{
		Bucket:              target.store(t, nil),
		Prefix:              target.prefix,
		MissingBucket:       s3store.New(target.client(t, nil), randomName()),
		DeleteUnconditional: true,
	})
}

func TestMinIOClusterProtocol(t *testing.T) {
	target := clusterTarget(t, emulator.MinIOCluster(t), 0)
	st := target.store(t, nil)
	target.cleanup(t, st)
	leasetest.Run(t, leasetest.Config{Store: st, Prefix: target.prefix + "lease/"})
	fencetest.Run(t, fencetest.Config{Store: st, Prefix: target.prefix + "fence/"})
}

// TestMinIOClusterAcrossNodes: holders writing through different nodes
// contend for one lease as through one: a second holder through another
// node is refused while the first holds, and takes the lease, with a
// higher token, after the release.
func TestMinIOClusterAcrossNodes(t *testing.T) {
	c := emulator.MinIOCluster(t)
	prefix := emulator.Prefix(t)
	key := prefix + "lease"
	var clients []*objlease.Client
	for i := range emulator.ClusterNodes {
		target := clusterTarget(t, c, i)
		cl, err := objlease.New(target.store(t, nil), key, objlease.Options{Holder: fmt.Sprintf("node%d", i+1), TTL: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, cl)
	}
	ctx := t.Context()
	token := uint64(0)
	for i, cl := range clients {
		l, err := cl.TryAcquire(ctx)
		if err != nil {
			t.Fatalf("through node %d: %v", i+1, err)
		}
		if l.Token() <= token {
			t.Fatalf("through node %d: token %d after %d", i+1, l.Token(), token)
		}
		token = l.Token()
		for j, other := range clients {
			if j == i {
				continue
			}
			if _, err := other.TryAcquire(ctx); !errors.Is(err, objlease.ErrHeld) {
				t.Fatalf("through node %d while node %d's holder holds: %v, want ErrHeld", j+1, i+1, err)
			}
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("release through node %d: %v", i+1, err)
		}
	}
}

// TestMinIOClusterDoctor: the self-test judges the cluster as it judges a
// single MinIO server: safe, with the stale DELETE as a caveat, and the
// command exits 0.
func TestMinIOClusterDoctor(t *testing.T) {
	target := clusterTarget(t, emulator.MinIOCluster(t), 0)
	st := target.store(t, nil)
	r, err := probe.Run(t.Context(), st, target.prefix)
	if err != nil {
		t.Fatalf("probe: %v (failures %q)", err, r.Failures)
	}
	if !r.DeleteUnconditional || len(r.Caveats) == 0 {
		t.Fatalf("DeleteUnconditional %v, caveats %q; want the stale delete reported", r.DeleteUnconditional, r.Caveats)
	}
	for _, race := range r.Races {
		t.Logf("race %s: winners %v, verdict %s", race.Kind, race.Winners, race.Verdict())
		if (race.Kind == probe.RaceCreate || race.Kind == probe.RaceReplace) && race.Verdict() != probe.RaceSafe {
			t.Errorf("%s race: %s", race.Kind, race.Verdict())
		}
	}
	e := target.emu
	o := runCLI(t, s3CLIEnv(e, e.AccessKey, e.SecretKey), "doctor", s3CLIURL(e.Endpoint, e.Bucket, target.prefix+"cli/"))
	if o.code != 0 {
		t.Fatalf("doctor: exit %d; stderr:\n%s", o.code, o.stderr)
	}
	t.Logf("doctor:\n%s", o.stdout)
}

func TestMinIOClusterFeatures(t *testing.T) {
	target := clusterTarget(t, emulator.MinIOCluster(t), 0)
	storeFeatures(t, target.store(t, nil), target.prefix)
}

// call is one store call a timedStore saw.
type call struct {
	op      string
	at, dur time.Duration // at: since the store's zero time
	err     error
}

func (c call) String() string {
	res := "ok"
	if c.err != nil {
		res = c.err.Error()
	}
	return fmt.Sprintf("%s at %v took %v: %s", c.op, c.at.Round(100*time.Millisecond), c.dur.Round(10*time.Millisecond), res)
}

// timedStore records every call's start, duration and outcome.
type timedStore struct {
	providers.Store
	zero  time.Time
	mu    sync.Mutex
	calls []call
}

func (s *timedStore) note(op string, begun time.Time, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, call{op, begun.Sub(s.zero), time.Since(begun), err})
}

// since returns the calls that started at or after at.
func (s *timedStore) since(at time.Duration) []call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []call
	for _, c := range s.calls {
		if c.at >= at {
			out = append(out, c)
		}
	}
	return out
}

func (s *timedStore) Get(ctx context.Context, key string, maxBytes int64) (o *providers.Object, err error) {
	defer func(begun time.Time) { s.note("get", begun, err) }(time.Now())
	return s.Store.Get(ctx, key, maxBytes)
}

func (s *timedStore) Stat(ctx context.Context, key string) (a *providers.Attrs, err error) {
	defer func(begun time.Time) { s.note("stat", begun, err) }(time.Now())
	return s.Store.Stat(ctx, key)
}

func (s *timedStore) Create(ctx context.Context, key string, data []byte, md map[string]string) (r providers.WriteResult, err error) {
	defer func(begun time.Time) { s.note("create", begun, err) }(time.Now())
	return s.Store.Create(ctx, key, data, md)
}

func (s *timedStore) Replace(ctx context.Context, key string, data []byte, md map[string]string, ifVersion string) (r providers.WriteResult, err error) {
	defer func(begun time.Time) { s.note("replace", begun, err) }(time.Now())
	return s.Store.Replace(ctx, key, data, md, ifVersion)
}

func (s *timedStore) Delete(ctx context.Context, key, ifVersion string) (err error) {
	defer func(begun time.Time) { s.note("delete", begun, err) }(time.Now())
	return s.Store.Delete(ctx, key, ifVersion)
}

func (s *timedStore) List(ctx context.Context, prefix, token string, n int) (p providers.ListPage, err error) {
	defer func(begun time.Time) { s.note("list", begun, err) }(time.Now())
	return s.Store.List(ctx, prefix, token, n)
}

// summary is the calls of a timedStore from at on, by operation: how
// many, how many failed, the longest, and the distinct errors (at most 3).
func (s *timedStore) summary(at time.Duration) []string {
	type agg struct {
		n, failed int
		longest   time.Duration
		errs      []string
	}
	by := map[string]*agg{}
	var ops []string
	for _, c := range s.since(at) {
		a := by[c.op]
		if a == nil {
			a = &agg{}
			by[c.op] = a
			ops = append(ops, c.op)
		}
		a.n++
		a.longest = max(a.longest, c.dur)
		if c.err != nil {
			a.failed++
			msg := c.err.Error()
			var pe *providers.Error
			if errors.As(c.err, &pe) && pe.Err != nil {
				msg = pe.Err.Error() // without the operation and the key
			}
			if len(a.errs) < 3 && !slices.Contains(a.errs, msg) {
				a.errs = append(a.errs, msg)
			}
		}
	}
	var out []string
	for _, op := range ops {
		a := by[op]
		line := fmt.Sprintf("%s: %d calls, %d failed, longest %v", op, a.n, a.failed, a.longest.Round(10*time.Millisecond))
		if len(a.errs) > 0 {
			line += "; " + strings.Join(a.errs, "; ")
		}
		out = append(out, line)
	}
	return out
}

// cutStore fails every call once cut, at once and without a request, as a
// holder that lost its network (or whose process stopped) would.
type cutStore struct {
	providers.Store
	cut atomic.Bool
}

func (s *cutStore) check(op, key string) error {
	if s.cut.Load() {
		return providers.Wrap(op, key, providers.ErrUnreachable, errors.New("cut off by the test"))
	}
	return nil
}

func (s *cutStore) Get(ctx context.Context, key string, maxBytes int64) (*providers.Object, error) {
	if err := s.check("get", key); err != nil {
		return nil, err
	}
	return s.Store.Get(ctx, key, maxBytes)
}

func (s *cutStore) Stat(ctx context.Context, key string) (*providers.Attrs, error) {
	if err := s.check("stat", key); err != nil {
		return nil, err
	}
	return s.Store.Stat(ctx, key)
}

func (s *cutStore) Create(ctx context.Context, key string, data []byte, md map[string]string) (providers.WriteResult, error) {
	if err := s.check("create", key); err != nil {
		return providers.WriteResult{}, err
	}
	return s.Store.Create(ctx, key, data, md)
}

func (s *cutStore) Replace(ctx context.Context, key string, data []byte, md map[string]string, ifVersion string) (providers.WriteResult, error) {
	if err := s.check("replace", key); err != nil {
		return providers.WriteResult{}, err
	}
	return s.Store.Replace(ctx, key, data, md, ifVersion)
}

// hung is one run of the hung-node scenario.
type hung struct {
	t       *testing.T
	c       *emulator.Cluster
	zero    time.Time
	key     string
	out     string // the object both write to, fenced
	holder  *objlease.Client
	a, b    *timedStore // the holder's (node 1) and the contender's (node 3)
	cut     *cutStore   // under a
	rivals  *objlease.Client
	l       *objlease.Lease
	lostAt  time.Duration // when the holder saw its lease end; 0: not yet
	renewed []time.Duration
	mu      sync.Mutex
}

func startHung(t *testing.T, ttl time.Duration, env ...string) *hung {
	c := emulator.StartMinIOCluster(t, env...)
	prefix := emulator.Prefix(t)
	h := &hung{t: t, c: c, zero: time.Now(), key: prefix + "lease", out: prefix + "out"}
	h.cut = &cutStore{Store: clusterTarget(t, c, 0).store(t, nil)}
	h.a = &timedStore{Store: h.cut, zero: h.zero}
	h.b = &timedStore{Store: clusterTarget(t, c, 2).store(t, nil), zero: h.zero}
	opts := func(holder string) objlease.Options {
		return objlease.Options{Holder: holder, TTL: ttl, PollInterval: time.Second}
	}
	var err error
	if h.holder, err = objlease.New(h.a, h.key, opts("holder")); err != nil {
		t.Fatal(err)
	}
	if h.rivals, err = objlease.New(h.b, h.key, opts("contender")); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if h.l, err = h.holder.TryAcquire(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := fence.Put(ctx, h.a, h.out, h.l.Token(), []byte("holder"), fence.Options{UniquePayloads: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.rivals.TryAcquire(ctx); !errors.Is(err, objlease.ErrHeld) {
		t.Fatalf("contender while held: %v, want ErrHeld", err)
	}
	go h.watch()
	return h
}

// since is the time since the scenario started.
func (h *hung) since() time.Duration { return time.Since(h.zero).Round(100 * time.Millisecond) }

// watch records each renewal of the holder's lease as it lands, and when
// the holder learns that the lease ended.
func (h *hung) watch() {
	for {
		renewed := h.l.Renewed()
		select {
		case <-renewed:
			h.mu.Lock()
			h.renewed = append(h.renewed, h.since())
			h.mu.Unlock()
		case <-h.l.Done():
			h.mu.Lock()
			h.lostAt = h.since()
			h.mu.Unlock()
			return
		}
	}
}

// pause hangs node 2 and returns the time it did.
func (h *hung) pause() time.Duration {
	at := h.since()
	h.c.Nodes[1].Pause()
	h.t.Logf("%v: node 2 paused", at)
	return at
}

// fenceAcross checks fencing across nodes while node 2 hangs, whatever
// became of the lease: a write with a token above the holder's through
// node 3, then one with the holder's token through node 1, which must be
// refused.
func (h *hung) fenceAcross() {
	t := h.t
	ctx := t.Context()
	key := h.out + "-across"
	newer := h.l.Token() + 1
	if _, err := fence.Put(ctx, h.b, key, newer, []byte("newer"), fence.Options{UniquePayloads: true}); err != nil {
		t.Logf("%v: fenced write with token %d through node 3: %v", h.since(), newer, err)
		return
	}
	stale := clusterTarget(t, h.c, 0).store(t, nil)
	if _, err := fence.Put(ctx, stale, key, h.l.Token(), []byte("stale"), fence.Options{UniquePayloads: true}); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("%v: fenced write with token %d through node 1 after token %d through node 3: %v, want ErrStale", h.since(), h.l.Token(), newer, err)
	}
	t.Logf("%v: node 2 hanging, token %d through node 3 then token %d through node 1: refused", h.since(), newer, h.l.Token())
}

// takeover checks a lease the contender took: the holder knew it had lost
// its lease, the token is higher, and the holder's fenced write with its
// token, sent through a node of its own (not cut off), is refused after
// the contender's.
func (h *hung) takeover(l2 *objlease.Lease) {
	t := h.t
	ctx := t.Context()
	select {
	case <-h.l.Done():
	default:
		t.Fatalf("%v: the contender took the lease while the holder still held it (valid for %v)", h.since(), h.l.ValidFor())
	}
	if l2.Token() <= h.l.Token() {
		t.Fatalf("contender's token %d is not above the holder's %d", l2.Token(), h.l.Token())
	}
	if _, err := fence.Put(ctx, h.b, h.out, l2.Token(), []byte("contender"), fence.Options{UniquePayloads: true}); err != nil {
		t.Fatalf("contender's fenced write: %v", err)
	}
	stale := clusterTarget(t, h.c, 0).store(t, nil)
	if _, err := fence.Put(ctx, stale, h.out, h.l.Token(), []byte("holder, stale"), fence.Options{UniquePayloads: true}); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("the old holder's fenced write with token %d: %v, want ErrStale", h.l.Token(), err)
	}
	t.Logf("%v: the contender holds token %d; the old holder's fenced write with token %d was refused", h.since(), l2.Token(), h.l.Token())
	if err := l2.Release(ctx); err != nil {
		t.Logf("contender's release: %v", err)
	}
}

// acquire has the contender try for the lease for at most bound, and
// reports the outcome on the channel.
func (h *hung) acquire(bound time.Duration) <-chan taken {
	got := make(chan taken, 1)
	ctx, cancel := context.WithTimeout(h.t.Context(), bound)
	go func() {
		defer cancel()
		l2, err := h.rivals.Acquire(ctx)
		got <- taken{l2, err, h.since()}
	}()
	return got
}

// taken is how the contender's Acquire ended.
type taken struct {
	l   *objlease.Lease
	err error
	at  time.Duration
}

// settle checks the contender's outcome: a lease taken must be a clean
// takeover; none taken is safe, and logged.
func (h *hung) settle(tk taken) {
	if tk.err != nil {
		h.t.Logf("%v: the contender did not take the lease: %v", tk.at, tk.err)
		return
	}
	h.t.Logf("%v: the contender took the lease", tk.at)
	h.takeover(tk.l)
}

// report logs what the holder and the contender saw from at on.
func (h *hung) report(at time.Duration) {
	h.mu.Lock()
	h.t.Logf("holder: renewals landed at %v; it saw its lease end at %v (0s: it did not)", h.renewed, h.lostAt)
	h.mu.Unlock()
	for _, line := range h.a.summary(at) {
		h.t.Logf("holder through node 1: %s", line)
	}
	for _, line := range h.b.summary(at) {
		h.t.Logf("contender through node 3: %s", line)
	}
}

// TestMinIOClusterHungNode: what a hung node (SIGSTOP: the kernel accepts
// its connections and nothing answers) does to a lease held through
// another node, with MinIO's drive timeout at its default (30 s) and at
// 2 s. Whatever the latency does to the leases, there are never two
// holders, a contender that takes the lease gets a higher token and the
// old holder's fenced write is then refused, and fenced writes through two
// nodes refuse the stale one while the node hangs. Latencies are logged,
// never asserted; so is whether the holder kept its lease.
func TestMinIOClusterHungNode(t *testing.T) {
	t.Run("default drive timeout", hungDefault)
	t.Run("drive timeout 2s", hungShort)
}

// hungFor is how long hungDefault keeps node 2 paused: longer than MinIO's
// drive timeout, 30 s by default.
const hungFor = 45 * time.Second

// hungDefault: node 2 hangs for hungFor, the holder (TTL 15 s) renewing
// through node 1 and a contender trying through node 3. Reads through any
// node wait for the hung drive (MinIO's drive timeout, 30 s), longer than
// objlease's request timeout (10 s). After the node is back the contender
// may take the lease or, if MinIO still refuses conditional writes to the
// record, not: either is logged.
func hungDefault(t *testing.T) {
	h := startHung(t, 15*time.Second)
	ctx := t.Context()
	// A read that waits as long as MinIO makes it: its latency is the
	// figure docs/stores.md quotes.
	patient := &timedStore{Store: clusterTarget(t, h.c, 2).store(t, nil).WithRequestTimeout(2 * hungFor), zero: h.zero}
	objleaseBin(t) // built before the pause

	pausedAt := h.pause()
	defer h.report(pausedAt)
	resumed := false
	defer func() {
		if !resumed {
			h.c.Nodes[1].Resume()
		}
	}()
	got := h.acquire(hungFor + time.Minute)
	doctor := h.doctor()
	patient.Get(ctx, h.key, 0)
	for _, c := range patient.since(0) {
		t.Logf("a read through node 3, node 2 hanging, without objlease's request timeout: %v", c)
	}
	h.fenceAcross()

	var tk *taken
	select {
	case r := <-got:
		tk = &r
	case <-time.After(hungFor - (h.since() - pausedAt)):
	}
	h.c.Nodes[1].Resume()
	resumed = true
	t.Logf("%v: node 2 resumed", h.since())
	if tk == nil {
		r := <-got
		tk = &r
	}
	h.settle(*tk)
	<-doctor
}

// doctor runs objlease doctor through node 1, with its default request
// timeout, and logs how it ended; it fails the test only if doctor calls
// the store unsafe, which a hang must never make it say.
func (h *hung) doctor() <-chan struct{} {
	t := h.t
	bin := objleaseBin(t)
	e := h.c.Node(0)
	u := s3CLIURL(e.Endpoint, e.Bucket, emulator.Prefix(t)+"doctor/")
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "doctor", u)
		home := t.TempDir()
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "AWS_EC2_METADATA_DISABLED=true",
			"AWS_CONFIG_FILE=" + filepath.Join(home, "aws-config"), "AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(home, "aws-credentials")},
			s3CLIEnv(e, e.AccessKey, e.SecretKey)...)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		began := h.since()
		err := cmd.Run()
		t.Logf("%v: doctor through node 1, begun at %v, node 2 hanging: %v\n%s%s", h.since(), began, err, stdout.String(), stderr.String())
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 1 {
			t.Errorf("doctor called the store unsafe while a node hung")
		}
	}()
	return done
}

// hungShort: MinIO's drive timeout at 2 s (MINIO_DRIVE_MAX_TIMEOUT) and a
// TTL of 45 s: node 2 hangs while the holder renews and the contender
// tries. Then the holder's store is cut off, as if its process had
// stopped, and the contender tries to take the lease, node 2 still
// hanging.
func hungShort(t *testing.T) {
	const ttl = 45 * time.Second
	h := startHung(t, ttl, "MINIO_DRIVE_MAX_TIMEOUT=2s")
	ctx := t.Context()
	pausedAt := h.pause()
	defer h.c.Nodes[1].Resume()
	defer h.report(pausedAt)

	// Two renewal intervals through the hang, the contender trying.
	for h.since()-pausedAt < 2*ttl/3 {
		time.Sleep(ttl / 9)
		l2, err := h.rivals.TryAcquire(ctx)
		if err == nil {
			h.settle(taken{l2, nil, h.since()})
			return
		}
		t.Logf("%v: contender: %v; holder valid for %v", h.since(), err, h.l.ValidFor().Round(time.Millisecond))
	}
	h.fenceAcross()
	h.cut.cut.Store(true)
	t.Logf("%v: the holder's store is cut off", h.since())
	h.settle(<-h.acquire(3 * ttl))
}
