package election_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/objlease/election"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/mem"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// partitionable refuses every write while cut is set, as a network
// partition between one process and the store would.
type partitionable struct {
	providers.Store
	cut atomic.Bool
}

func (p *partitionable) Replace(ctx context.Context, key string, data []byte, md map[string]string, v string) (providers.WriteResult, error) {
	if p.cut.Load() {
		return providers.WriteResult{}, providers.Wrap("replace", key, providers.ErrUnknownOutcome, errors.New("partitioned"))
	}
	return p.Store.Replace(ctx, key, data, md, v)
}

func (p *partitionable) Get(ctx context.Context, key string, max int64) (*providers.Object, error) {
	if p.cut.Load() {
		return nil, providers.Wrap("get", key, errors.New("partitioned"), nil)
	}
	return p.Store.Get(ctx, key, max)
}

type events struct {
	mu sync.Mutex
	eventLog
}

type eventLog struct {
	started []uint64
	stopped int
	leaders []election.Leader
	causes  []error
}

func (ev *events) snapshot() eventLog {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return eventLog{started: append([]uint64(nil), ev.started...), stopped: ev.stopped, leaders: append([]election.Leader(nil), ev.leaders...), causes: append([]error(nil), ev.causes...)}
}

func newElector(t *testing.T, store providers.Store, holder string, clk clock.Clock, ev *events) *election.Elector {
	t.Helper()
	sess, err := objlease.NewSession(store, objlease.SessionOptions{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	opts := objlease.Options{TTL: 10 * time.Second, RenewInterval: 2 * time.Second, PollInterval: time.Second, Holder: holder, Data: []byte("addr-" + holder)}
	e, err := election.New(sess, "leader", opts, election.Config{
		OnStartedLeading: func(ctx context.Context, l *objlease.Lease) {
			ev.mu.Lock()
			ev.started = append(ev.started, l.Token())
			ev.mu.Unlock()
			<-ctx.Done()
			ev.mu.Lock()
			ev.causes = append(ev.causes, context.Cause(ctx))
			ev.mu.Unlock()
		},
		OnStoppedLeading: func() { ev.mu.Lock(); ev.stopped++; ev.mu.Unlock() },
		OnNewLeader:      func(l election.Leader) { ev.mu.Lock(); ev.leaders = append(ev.leaders, l); ev.mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// drive advances the fake clock in small steps until cond holds.
func drive(t *testing.T, clk *clock.Fake, what string, cond func() bool) {
	t.Helper()
	for i := 0; i < 20000; i++ {
		if cond() {
			return
		}
		clk.Advance(50 * time.Millisecond)
		time.Sleep(100 * time.Microsecond) // let woken goroutines run
	}
	t.Fatalf("never happened: %s", what)
}

func TestLeaderChangeResignAndObserve(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := mem.New()
	clk := clock.NewFake(epoch)
	var ev1, ev2 events
	e1 := newElector(t, store, "one", clk, &ev1)
	e2 := newElector(t, store, "two", clk, &ev2)
	done1 := make(chan error, 1)
	go func() { done1 <- e1.Run(ctx) }()
	drive(t, clk, "one leads", func() bool { return len(ev1.snapshot().started) == 1 })
	go e2.Run(ctx)
	drive(t, clk, "two observes one", func() bool {
		l := ev2.snapshot().leaders
		return len(l) == 1 && l[0].Holder == "one" && string(l[0].Data) == "addr-one" && !l[0].Self
	})
	if e1.ValidFor() <= 0 || e2.ValidFor() != 0 {
		t.Fatalf("ValidFor: leader %v, follower %v", e1.ValidFor(), e2.ValidFor())
	}
	observer, _ := newOn(store, "leader", objlease.SessionOptions{Clock: clk}, objlease.Options{})
	if l, ok, err := election.Observe(ctx, observer); err != nil || !ok || l.Holder != "one" || l.Token != 1 {
		t.Fatalf("Observe: %+v %v %v", l, ok, err)
	}

	e1.Resign()
	if err := <-done1; err != nil {
		t.Fatal(err)
	}
	if s := ev1.snapshot(); s.stopped != 1 || !errors.Is(s.causes[0], objlease.ErrReleased) {
		t.Fatalf("after resign: %+v", s)
	}
	drive(t, clk, "two leads", func() bool { return len(ev2.snapshot().started) == 1 })
	if s := ev2.snapshot(); s.started[0] != 2 || !s.leaders[len(s.leaders)-1].Self {
		t.Fatalf("two: %+v (token must be 2: resigning keeps the token)", s)
	}
}

func TestLeaderLosesLeaseBeforeSuccessorLeads(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := mem.New()
	p := &partitionable{Store: m}
	clk := clock.NewFake(epoch)
	var ev1, ev2 events
	e1 := newElector(t, p, "one", clk, &ev1)
	e2 := newElector(t, m, "two", clk, &ev2)
	go e1.Run(ctx)
	drive(t, clk, "one leads", func() bool { return len(ev1.snapshot().started) == 1 })
	go e2.Run(ctx)
	drive(t, clk, "two observes", func() bool { return len(ev2.snapshot().leaders) == 1 })

	p.cut.Store(true)
	var lostFirst bool
	drive(t, clk, "two leads", func() bool {
		s1, s2 := ev1.snapshot(), ev2.snapshot()
		if len(s1.causes) == 1 && len(s2.started) == 0 {
			lostFirst = true
		}
		return len(s2.started) == 1
	})
	if !lostFirst {
		t.Fatal("the successor started leading before the old leader's context ended")
	}
	if s := ev1.snapshot(); !errors.Is(s.causes[0], objlease.ErrLeaseLost) || s.stopped != 1 {
		t.Fatalf("old leader: %+v", s)
	}
	if e1.ValidFor() != 0 {
		t.Fatal("old leader still claims validity")
	}
	// Healed, the old leader follows the new one.
	p.cut.Store(false)
	drive(t, clk, "one observes two", func() bool {
		l := ev1.snapshot().leaders
		return l[len(l)-1].Holder == "two"
	})
}

func TestRunOnce(t *testing.T) {
	ctx := context.Background()
	store := mem.New()
	clk := clock.NewFake(epoch)
	newClient := func(holder string) *objlease.Client {
		c, err := newOn(store, "cron", objlease.SessionOptions{Clock: clk}, objlease.Options{TTL: 10 * time.Second, Holder: holder})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	var ran int
	err := election.RunOnce(ctx, newClient("a"), func(ctx context.Context, l *objlease.Lease) error {
		ran++
		// While a runs, b's attempt finds it held and runs nothing.
		err := election.RunOnce(ctx, newClient("b"), func(context.Context, *objlease.Lease) error { ran += 100; return nil })
		if !errors.Is(err, objlease.ErrHeld) {
			t.Errorf("b: %v, want ErrHeld", err)
		}
		return nil
	})
	if err != nil || ran != 1 {
		t.Fatalf("a: %v, ran %d", err, ran)
	}
	st, _ := newClient("x").Inspect(ctx)
	if st.Record.State != objlease.StateReleased || st.Record.Token != 1 {
		t.Fatalf("after RunOnce: %+v", st.Record)
	}
	// Work sees the lease lost when someone breaks it.
	err = election.RunOnce(ctx, newClient("c"), func(ctx context.Context, l *objlease.Lease) error {
		if _, err := newClient("operator").Break(ctx); err != nil {
			return err
		}
		if err := l.Renew(ctx); !errors.Is(err, objlease.ErrLeaseLost) {
			t.Errorf("renew after break: %v", err)
		}
		<-ctx.Done()
		return context.Cause(ctx)
	})
	if !errors.Is(err, objlease.ErrLeaseLost) {
		t.Fatalf("%v, want ErrLeaseLost", err)
	}
}

func TestNewValidates(t *testing.T) {
	sess, err := objlease.NewSession(mem.New(), objlease.SessionOptions{Clock: clock.NewFake(epoch)})
	if err != nil {
		t.Fatal(err)
	}
	opts := objlease.Options{TTL: 10 * time.Second, Holder: "one"}
	cfg := election.Config{OnStartedLeading: func(context.Context, *objlease.Lease) {}}
	for _, tc := range []struct {
		name string
		sess *objlease.Session
		key  string
		opts objlease.Options
		cfg  election.Config
		want error
	}{
		{"nil session", nil, "leader", opts, cfg, objlease.ErrInvalidOptions},
		{"empty key", sess, "", opts, cfg, objlease.ErrInvalidOptions},
		{"invalid options", sess, "leader", objlease.Options{TTL: -time.Second}, cfg, objlease.ErrInvalidOptions},
		{"nil OnStartedLeading", sess, "leader", opts, election.Config{}, election.ErrInvalidConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if e, err := election.New(tc.sess, tc.key, tc.opts, tc.cfg); !errors.Is(err, tc.want) || e != nil {
				t.Fatalf("New: %v, %v; want an error matching %v", e, err, tc.want)
			}
		})
	}
	if _, err := election.New(sess, "leader", opts, cfg); err != nil {
		t.Fatalf("valid: %v", err)
	}
}

// TestRunAgainAfterResign: an Elector leads again when Run is called after
// a Resign ended the previous one, with the same client, and Resign then
// ends only that second Run.
func TestRunAgainAfterResign(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := mem.New()
	clk := clock.NewFake(epoch)
	var ev events
	e := newElector(t, store, "one", clk, &ev)
	for term := 1; term <= 2; term++ {
		done := make(chan error, 1)
		go func() { done <- e.Run(ctx) }()
		drive(t, clk, fmt.Sprintf("term %d leads", term), func() bool { return len(ev.snapshot().started) == term })
		if e.ValidFor() <= 0 {
			t.Fatalf("term %d: ValidFor %v while leading", term, e.ValidFor())
		}
		e.Resign()
		if err := <-done; err != nil {
			t.Fatalf("term %d: Run: %v", term, err)
		}
		if s := ev.snapshot(); s.stopped != term {
			t.Fatalf("term %d: %+v", term, s)
		}
	}
	if s := ev.snapshot(); s.started[0] != 1 || s.started[1] != 2 {
		t.Fatalf("tokens %v, want [1 2]", s.started)
	}
}

// TestResignWhileIdle: a Resign while no Run is in progress ends the next
// Run at once, without campaigning, and only that one.
func TestResignWhileIdle(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := mem.New()
	clk := clock.NewFake(epoch)
	var ev events
	e := newElector(t, store, "one", clk, &ev)
	e.Resign()
	e.Resign() // twice while idle is still one
	if err := e.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if s := ev.snapshot(); len(s.started) != 0 {
		t.Fatalf("led after a Resign: %+v", s)
	}
	go e.Run(ctx)
	drive(t, clk, "leads on the next Run", func() bool { return len(ev.snapshot().started) == 1 })
}

// TestConcurrentRunRefused: a second Run while one is in progress returns
// ErrRunning at once and leaves the first campaigning.
func TestConcurrentRunRefused(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := mem.New()
	clk := clock.NewFake(epoch)
	var ev events
	e := newElector(t, store, "one", clk, &ev)
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	drive(t, clk, "one leads", func() bool { return len(ev.snapshot().started) == 1 })
	if err := e.Run(ctx); !errors.Is(err, election.ErrRunning) {
		t.Fatalf("second Run: %v, want ErrRunning", err)
	}
	if e.ValidFor() <= 0 || ev.snapshot().stopped != 0 {
		t.Fatalf("the first Run was disturbed: %+v", ev.snapshot())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Watch follows the leaders without campaigning: nobody at first, then
// each leader once, in order, however many reads see it.
func TestWatch(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := mem.New()
	clk := clock.NewFake(epoch)
	observer, err := newOn(store, "leader", objlease.SessionOptions{Clock: clk}, objlease.Options{Holder: "observer"})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	watched := make(chan error, 1)
	go func() {
		watched <- election.Watch(ctx, observer, func(l election.Leader, ok bool) error {
			mu.Lock()
			defer mu.Unlock()
			if !ok {
				seen = append(seen, "nobody")
			} else {
				seen = append(seen, fmt.Sprintf("%s/%d", l.Holder, l.Token))
			}
			return nil
		})
	}()
	snapshot := func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(seen, " ")
	}
	// passing lets the observer read a few times more.
	passing := func(d time.Duration) {
		t.Helper()
		end := clk.Now().Add(d)
		drive(t, clk, "time passing", func() bool { return !clk.Now().Before(end) })
	}
	drive(t, clk, "the observer sees nobody", func() bool { return snapshot() == "nobody" })
	passing(5 * time.Second)
	var ev1, ev2 events
	e1 := newElector(t, store, "one", clk, &ev1)
	done1 := make(chan error, 1)
	go func() { done1 <- e1.Run(ctx) }()
	drive(t, clk, "the observer sees one", func() bool { return strings.HasSuffix(snapshot(), "one/1") })
	passing(10 * time.Second)
	go newElector(t, store, "two", clk, &ev2).Run(ctx)
	e1.Resign()
	if err := <-done1; err != nil {
		t.Fatal(err)
	}
	drive(t, clk, "the observer sees two", func() bool { return strings.HasSuffix(snapshot(), "two/2") })
	cancel()
	if err := <-watched; err != nil {
		t.Fatalf("Watch returned %v once its context ended, want nil", err)
	}
	// A release between the two terms may or may not be read.
	if got := strings.Replace(snapshot(), " nobody two", " two", 1); got != "nobody one/1 two/2" {
		t.Errorf("the observer saw %q, want nobody, one/1, two/2, each once", snapshot())
	}
}
