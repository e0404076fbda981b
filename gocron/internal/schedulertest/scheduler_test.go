package schedulertest_test

// Two gocron schedulers in one process, each with a client of its own to
// the same store (a local directory, versitygw, fake-gcs-server), run a
// job every period; one of them crashes (its store cut off mid-run: no
// tick mark, no release) and the other takes its job over. The tests
// count runs per tick and check the order of tokens; the only time they
// bound is an overall deadline for things to happen at all.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	s3sdk "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/go-co-op/gocron/v2"
	"github.com/google/uuid"
	"google.golang.org/api/option"

	"github.com/objlease/objlease/gocron/gocronlease"
	"github.com/objlease/objlease/integration/emulator"
	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/tick"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/driver"
	"github.com/objlease/objlease/providers/file"
	"github.com/objlease/objlease/providers/gcsstore"
	"github.com/objlease/objlease/providers/s3store"
)

func TestMain(m *testing.M) {
	code := m.Run()
	emulator.StopAll()
	os.Exit(code)
}

const (
	// waitLong bounds each wait for something to happen at all, on a
	// loaded machine; the assertions are on counts and order.
	waitLong = 60 * time.Second
)

// target gives a test a way to open as many clients of one store as it
// wants, and the lease TTL and job period to use with it: a TTL shorter
// than the period, so that a crashed scheduler's lease has expired by the
// other's next trigger but one.
type target struct {
	name        string
	ttl, period time.Duration
	open        func(t *testing.T) func() providers.Store
}

// setup is what a test gets of its target.
type setup struct {
	open        func() providers.Store
	prefix      string
	ttl, period time.Duration
}

var targets = []target{
	{"file", time.Second, 2 * time.Second, func(t *testing.T) func() providers.Store {
		dir := t.TempDir()
		return func() providers.Store {
			s, err := file.New(dir)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	}},
	{"versitygw", time.Second, 2 * time.Second, func(t *testing.T) func() providers.Store {
		e := emulator.VersityGW(t)
		return func() providers.Store {
			return providers.NewBucket(s3store.NewDriver(s3sdk.New(s3sdk.Options{Region: e.Region, BaseEndpoint: aws.String(e.Endpoint), UsePathStyle: true,
				Credentials: credentials.NewStaticCredentialsProvider(e.AccessKey, e.SecretKey, "")}), e.Bucket))
		}
	}},
	// GCS allows one write per second to an object: renewals every
	// second need a TTL of 3 s.
	{"fake-gcs-server", 3 * time.Second, 4 * time.Second, func(t *testing.T) func() providers.Store {
		g := emulator.FakeGCS(t)
		return func() providers.Store {
			c, err := storage.NewClient(context.Background(), option.WithEndpoint(g.Endpoint), option.WithoutAuthentication(),
				option.WithHTTPClient(&http.Client{}))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			return providers.NewBucket(gcsstore.NewDriver(c, g.Bucket))
		}
	}},
}

// eachTarget runs test on every store, in parallel.
func eachTarget(t *testing.T, test func(t *testing.T, s setup)) {
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			test(t, setup{open: tg.open(t), prefix: emulator.Prefix(t), ttl: tg.ttl, period: tg.period})
		})
	}
}

// cutStore is one scheduler's client of the store; cut, it fails every
// request, as if its process had died or been cut off the network.
type cutStore struct {
	providers.Store
	cut atomic.Bool
}

var errCut = errors.New("cut off: the scheduler crashed")

func (s *cutStore) check() error {
	if s.cut.Load() {
		return fmt.Errorf("%w: %w", providers.ErrUnreachable, errCut)
	}
	return nil
}

func (s *cutStore) Get(ctx context.Context, key string, maxBytes int64) (*providers.Object, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	return s.Store.Get(ctx, key, maxBytes)
}

func (s *cutStore) Stat(ctx context.Context, key string) (*driver.Attrs, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	return s.Store.Stat(ctx, key)
}

func (s *cutStore) Create(ctx context.Context, key string, data []byte, md map[string]string) (driver.WriteResult, error) {
	if err := s.check(); err != nil {
		return driver.WriteResult{}, err
	}
	return s.Store.Create(ctx, key, data, md)
}

func (s *cutStore) Replace(ctx context.Context, key string, data []byte, md map[string]string, ifVersion string) (driver.WriteResult, error) {
	if err := s.check(); err != nil {
		return driver.WriteResult{}, err
	}
	return s.Store.Replace(ctx, key, data, md, ifVersion)
}

func (s *cutStore) Delete(ctx context.Context, key string, ifVersion string) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.Store.Delete(ctx, key, ifVersion)
}

func (s *cutStore) List(ctx context.Context, prefix, pageToken string, pageSize int) (driver.ListPage, error) {
	if err := s.check(); err != nil {
		return driver.ListPage{}, err
	}
	return s.Store.List(ctx, prefix, pageToken, pageSize)
}

// event is one trigger of the job on one scheduler: a run, or a refusal.
type event struct {
	sched string
	kind  string // "run", "held", "done" (tick already done), "not leader", "error"
	tick  string // a run's tick
	token uint64 // a run's token
	err   error
}

// journal is the events of both schedulers, in the order they happened.
type journal struct {
	mu     sync.Mutex
	events []event
}

func (j *journal) add(e event) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.events = append(j.events, e)
}

func (j *journal) all() []event {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.events)
}

// waitFor waits until cond holds for the events so far.
func (j *journal) waitFor(t *testing.T, what string, cond func([]event) bool) {
	t.Helper()
	deadline := time.Now().Add(waitLong)
	for !cond(j.all()) {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s; events:\n%s", waitLong, what, show(j.all()))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func count(es []event, sched, kind string) int {
	n := 0
	for _, e := range es {
		if (sched == "" || e.sched == sched) && e.kind == kind {
			n++
		}
	}
	return n
}

func show(es []event) string {
	var b strings.Builder
	for _, e := range es {
		fmt.Fprintf(&b, "  %s %s", e.sched, e.kind)
		if e.kind == "run" {
			fmt.Fprintf(&b, " tick %s token %d", e.tick, e.token)
		}
		if e.err != nil {
			fmt.Fprintf(&b, " (%v)", e.err)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// startAt is the first trigger of a scheduler's job: offset into the
// next period but one.
func startAt(period, offset time.Duration) time.Time {
	return time.Now().Truncate(period).Add(2*period + offset)
}

// scheduler is one of the two schedulers, its client of the store and
// the crash switch of its job.
type scheduler struct {
	name  string
	store *cutStore
	s     gocron.Scheduler
	crash *atomic.Bool // the next run crashes this scheduler
}

// newScheduler starts a gocron scheduler with opt, running one job named
// "report" every period from start.
func newScheduler(t *testing.T, name string, store *cutStore, start time.Time, period time.Duration, task func(context.Context) error, jobOpts []gocron.JobOption, opts ...gocron.SchedulerOption) *scheduler {
	t.Helper()
	s, err := gocron.NewScheduler(opts...)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.NewJob(gocron.DurationJob(period), gocron.NewTask(task),
		append([]gocron.JobOption{gocron.WithName("report"), gocron.WithStartAt(gocron.WithStartDateTime(start))}, jobOpts...)...)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { _ = s.Shutdown() })
	return &scheduler{name: name, store: store, s: s}
}

// Two schedulers with a Locker each, a job every period: every tick runs
// once across both, under a token higher than the tick before's; the
// scheduler that ran a tick crashes during its next run, and the other
// takes the job over once the crashed run's lease has expired, with a
// higher token. The schedulers trigger together (and contend for the
// lease: the loser finds it held), or one after the other within each
// tick (the later finds the lease free and the tick done: without the
// tick's mark the job would run twice).
func TestLockerOncePerTickAndTakeover(t *testing.T) {
	t.Run("together", func(t *testing.T) {
		t.Parallel()
		testLocker(t, map[string]time.Duration{"a": 300 * time.Millisecond, "b": 300 * time.Millisecond})
	})
	t.Run("staggered", func(t *testing.T) {
		t.Parallel()
		testLocker(t, map[string]time.Duration{"a": 300 * time.Millisecond, "b": 900 * time.Millisecond})
	})
}

// testLocker runs the Locker test with each scheduler's first trigger at
// its offset into a period.
func testLocker(t *testing.T, offsets map[string]time.Duration) {
	eachTarget(t, func(t *testing.T, su setup) {
		open, prefix, ttl, period := su.open, su.prefix, su.ttl, su.period
		var j journal
		start := startAt(period, 0)
		scheds := map[string]*scheduler{}
		crash := new(atomic.Bool)
		var crashed atomic.Value // name of the scheduler that crashed
		for _, name := range []string{"a", "b"} {
			store := &cutStore{Store: open()}
			t.Cleanup(func() { store.Store.Close() })
			locker, err := gocronlease.NewLocker(store, objlease.SessionOptions{}, objlease.Options{TTL: ttl, Holder: name},
				gocronlease.LockerConfig{Prefix: prefix, Period: period})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = locker.Close(context.Background()) })
			task := locker.Wrap(func(ctx context.Context) error {
				token, ok := gocronlease.TokenFrom(ctx)
				tk, tok := gocronlease.TickFrom(ctx)
				l := gocronlease.LeaseFrom(ctx)
				if !ok || !tok || l == nil || l.Token() != token || l.ValidFor() <= 0 || ctx.Err() != nil {
					j.add(event{sched: name, kind: "error", err: fmt.Errorf("job context: token %d %v, tick %q %v, lease %v", token, ok, tk, tok, l)})
					return nil
				}
				j.add(event{sched: name, kind: "run", tick: tk, token: token})
				if crash.CompareAndSwap(true, false) {
					// Dies mid-run: neither the tick's mark nor the
					// release is ever written.
					store.cut.Store(true)
					crashed.Store(name)
				}
				return nil
			})
			refused := gocron.AfterLockError(func(_ uuid.UUID, _ string, err error) {
				kind := "error"
				switch {
				case errors.Is(err, objlease.ErrHeld):
					kind = "held"
				case errors.Is(err, gocronlease.ErrTickDone):
					kind = "done"
				}
				j.add(event{sched: name, kind: kind, err: err})
			})
			scheds[name] = newScheduler(t, name, store, start.Add(offsets[name]), period, task, []gocron.JobOption{gocron.WithEventListeners(refused)},
				gocron.WithDistributedLocker(locker))
		}

		// Both schedulers trigger every tick; one runs it.
		j.waitFor(t, "4 runs", func(es []event) bool { return count(es, "", "run") >= 4 })
		crash.Store(true)
		j.waitFor(t, "a crash", func([]event) bool { return crashed.Load() != nil })
		victim := crashed.Load().(string)
		survivor := map[string]string{"a": "b", "b": "a"}[victim]
		_ = scheds[victim].s.Shutdown() // the rest of the crash
		atCrash := len(j.all())
		j.waitFor(t, "3 runs of the survivor after the crash", func(es []event) bool {
			return count(es[atCrash:], survivor, "run") >= 3
		})
		_ = scheds[survivor].s.Shutdown()
		es := j.all()
		t.Logf("events:\n%s", show(es))

		// Every tick ran once across both schedulers; ticks and tokens
		// went up run after run (a new lease per run).
		perTick := map[string]int{}
		var runs []event
		for _, e := range es {
			switch e.kind {
			case "run":
				perTick[e.tick]++
				runs = append(runs, e)
			case "error":
				t.Errorf("%s: %v", e.sched, e.err)
			}
		}
		for tk, n := range perTick {
			if n != 1 {
				t.Errorf("tick %s ran %d times, want once", tk, n)
			}
		}
		for i := 1; i < len(runs); i++ {
			if runs[i].token <= runs[i-1].token || runs[i].tick <= runs[i-1].tick {
				t.Errorf("run %d: tick %s token %d after tick %s token %d: want both higher", i, runs[i].tick, runs[i].token, runs[i-1].tick, runs[i-1].token)
			}
		}
		held, done := count(es[:atCrash], "", "held"), count(es[:atCrash], "", "done")
		t.Logf("before the crash: %d runs, %d triggers refused with the lease held, %d with the tick done", count(es[:atCrash], "", "run"), held, done)
		if offsets["a"] == offsets["b"] && held+done == 0 {
			t.Errorf("no trigger was refused before the crash: the two schedulers did not contend")
		}
		if offsets["a"] != offsets["b"] && done == 0 {
			t.Errorf("no trigger found its tick done before the crash: the schedulers' triggers did not follow each other")
		}

		// The crashed run's lease held the job until it expired, then the
		// survivor took over with a higher token: within a few of its
		// triggers (it must see the record unchanged for a TTL, shorter
		// than a period, between two of them).
		var crashToken uint64
		for _, e := range es[:atCrash] {
			if e.kind == "run" && e.sched == victim {
				crashToken = e.token
			}
		}
		var waited int
		var took uint64
		for _, e := range es[atCrash:] {
			if e.sched != survivor {
				continue
			}
			if e.kind == "run" {
				took = e.token
				break
			}
			waited++
		}
		t.Logf("%s crashed holding token %d; %s took over with token %d after %d refused triggers; runs per tick: %v",
			victim, crashToken, survivor, took, waited, perTick)
		if took <= crashToken {
			t.Errorf("takeover token %d, want above the crashed run's %d", took, crashToken)
		}
		if waited > 3 {
			t.Errorf("%s refused %d triggers after the crash before taking over, want at most 3", survivor, waited)
		}
		if n := count(es[atCrash:], victim, "run"); n != 0 {
			t.Errorf("the crashed scheduler ran %d times after its crash", n)
		}

		// The mark remembers every tick run, but the crashed one, with its
		// run's token.
		marks, err := tick.Read(context.Background(), open(), prefix+"report")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range runs {
			m := marks.Find(r.tick)
			switch {
			case r.token == crashToken && m != nil:
				t.Errorf("the crashed run's tick %s is marked done by token %d", r.tick, m.Token)
			case r.token != crashToken && (m == nil || m.Token != r.token):
				t.Errorf("tick %s ran under token %d, mark %+v", r.tick, r.token, m)
			}
		}
	})
}

// countingElector records each refusal of the Elector it wraps.
type countingElector struct {
	*gocronlease.Elector
	sched string
	j     *journal
}

func (c countingElector) IsLeader(ctx context.Context) error {
	err := c.Elector.IsLeader(ctx)
	if err != nil {
		c.j.add(event{sched: c.sched, kind: "not leader", err: err})
	}
	return err
}

// Two schedulers with an Elector each: the leader runs every tick under
// one token; it crashes (its store cut off, no release), and once its
// lease has expired the other leads, runs the ticks from then on under a
// higher token, and no tick runs on both.
func TestElectorTakeover(t *testing.T) {
	eachTarget(t, func(t *testing.T, su setup) {
		open, prefix, ttl, period := su.open, su.prefix, su.ttl, su.period
		var j journal
		start := startAt(period, 300*time.Millisecond)
		scheds := map[string]*scheduler{}
		crash := new(atomic.Bool)
		var crashed atomic.Value
		for _, name := range []string{"a", "b"} {
			store := &cutStore{Store: open()}
			t.Cleanup(func() { store.Store.Close() })
			el, err := gocronlease.NewElector(context.Background(), store, objlease.SessionOptions{}, prefix+"leader", objlease.Options{TTL: ttl, Holder: name})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = el.Close(context.Background()) })
			task := el.Wrap(func(ctx context.Context) error {
				token, ok := gocronlease.TokenFrom(ctx)
				if !ok || token != el.Token() || ctx.Err() != nil {
					j.add(event{sched: name, kind: "error", err: fmt.Errorf("job context: token %d %v, elector's %d", token, ok, el.Token())})
					return nil
				}
				// The tick, for counting: the trigger's period by this
				// machine's clock (the triggers are 300 ms into theirs).
				j.add(event{sched: name, kind: "run", tick: time.Now().UTC().Truncate(period).Format(time.RFC3339), token: token})
				if crash.CompareAndSwap(true, false) {
					store.cut.Store(true)
					crashed.Store(name)
				}
				return nil
			})
			scheds[name] = newScheduler(t, name, store, start, period, task, nil,
				gocron.WithDistributedElector(countingElector{Elector: el, sched: name, j: &j}))
		}

		j.waitFor(t, "3 runs", func(es []event) bool { return count(es, "", "run") >= 3 })
		crash.Store(true)
		j.waitFor(t, "a crash", func([]event) bool { return crashed.Load() != nil })
		victim := crashed.Load().(string)
		survivor := map[string]string{"a": "b", "b": "a"}[victim]
		atCrash := len(j.all())
		j.waitFor(t, "3 runs of the survivor after the crash", func(es []event) bool {
			return count(es[atCrash:], survivor, "run") >= 3
		})
		_ = scheds[victim].s.Shutdown()
		_ = scheds[survivor].s.Shutdown()
		es := j.all()
		t.Logf("events:\n%s", show(es))

		perTick := map[string]int{}
		tokens := map[string][]uint64{} // per scheduler, in order
		for _, e := range es {
			switch e.kind {
			case "run":
				perTick[e.tick]++
				tokens[e.sched] = append(tokens[e.sched], e.token)
			case "error":
				t.Errorf("%s: %v", e.sched, e.err)
			}
		}
		for tk, n := range perTick {
			if n != 1 {
				t.Errorf("tick %s ran %d times, want once", tk, n)
			}
		}
		// Before the crash only the victim ran, in one term; after it
		// only the survivor, in one term of a higher token.
		if n := count(es[:atCrash], survivor, "run"); n != 0 {
			t.Errorf("%s ran %d times while %s led", survivor, n, victim)
		}
		if n := count(es[atCrash:], victim, "run"); n != 0 {
			t.Errorf("%s ran %d times after it crashed", victim, n)
		}
		before, after := tokens[victim], tokens[survivor]
		if slices.Min(before) != slices.Max(before) || slices.Min(after) != slices.Max(after) || after[0] <= before[0] {
			t.Errorf("tokens: %s %v before the crash, %s %v after: want one each, the second higher", victim, before, survivor, after)
		}
		waited := 0
		for _, e := range es[atCrash:] {
			if e.sched == survivor && e.kind == "run" {
				break
			}
			if e.sched == survivor && e.kind == "not leader" {
				waited++
			}
		}
		t.Logf("%s led with token %d and crashed; %s led with token %d after %d refused triggers; runs per tick: %v",
			victim, before[0], survivor, after[0], waited, perTick)
		if waited > 3 {
			t.Errorf("%s was refused %d triggers after the crash before leading, want at most 3", survivor, waited)
		}
	})
}
