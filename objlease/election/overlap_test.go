package election_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/objlease/election"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/mem"
)

// leadership records, in order, when each leader's callback started and
// returned, and how many ran at once.
type leadership struct {
	mu      sync.Mutex
	active  []string
	log     []string
	overlap []string
}

func (l *leadership) start(who string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.active) > 0 {
		l.overlap = append(l.overlap, fmt.Sprintf("%s started while %v still acting", who, l.active))
	}
	l.active = append(l.active, who)
	l.log = append(l.log, "start "+who)
}

func (l *leadership) end(who string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, a := range l.active {
		if a == who {
			l.active = append(l.active[:i], l.active[i+1:]...)
			break
		}
	}
	l.log = append(l.log, "end "+who)
}

func (l *leadership) started(who string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.log {
		if e == "start "+who {
			return true
		}
	}
	return false
}

// TestNoOverlapAfterResign: a leader's callback that goes on acting for 3 s
// after its context ends (flushing, closing connections) must have returned
// before another elector starts leading: the lease is released only after
// the callback returns, and renewed until then.
func TestNoOverlapAfterResign(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := mem.New()
	clk := clock.NewFake(epoch)
	var l leadership
	var mu sync.Mutex
	var observed []election.Leader
	newElector := func(holder string) *election.Elector {
		sess, err := objlease.NewSession(store, objlease.SessionOptions{Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		opts := objlease.Options{TTL: 10 * time.Second, RenewInterval: 2 * time.Second, PollInterval: time.Second, Holder: holder}
		e, err := election.New(sess, "leader", opts, election.Config{
			OnStartedLeading: func(ctx context.Context, _ *objlease.Lease) {
				l.start(holder)
				defer l.end(holder)
				<-ctx.Done()
				cleanup := clk.NewTimer(3 * time.Second) // keeps acting after its context ended
				<-cleanup.C()
			},
			OnNewLeader: func(le election.Leader) { mu.Lock(); observed = append(observed, le); mu.Unlock() },
		})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	e1, e2 := newElector("one"), newElector("two")
	done1 := make(chan error, 1)
	go func() { done1 <- e1.Run(ctx) }()
	drive(t, clk, "one leads", func() bool { return l.started("one") })
	go e2.Run(ctx)
	drive(t, clk, "two observes one", func() bool { mu.Lock(); defer mu.Unlock(); return len(observed) > 0 })

	e1.Resign()
	drive(t, clk, "two leads", func() bool { return l.started("two") })
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.overlap) > 0 {
		t.Fatalf("two leaders acted at once: %v (log %v)", l.overlap, l.log)
	}
	select {
	case err := <-done1:
		if err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatal("one's Run has not returned although two leads")
	}
}

// releaseWatch calls onRelease just before a released record is written.
type releaseWatch struct {
	providers.Store
	onRelease func()
}

func (w *releaseWatch) Replace(ctx context.Context, key string, data []byte, md map[string]string, v string) (providers.WriteResult, error) {
	if r, err := objlease.DecodeRecord(key, data); err == nil && r.State == objlease.StateReleased {
		w.onRelease()
	}
	return w.Store.Replace(ctx, key, data, md, v)
}

// TestRunOnceEndsWorkBeforeRelease: whatever work left running with its
// context is told to stop before the released record lets anyone else run.
func TestRunOnceEndsWorkBeforeRelease(t *testing.T) {
	var workCtx context.Context
	var ended []bool
	store := &releaseWatch{Store: mem.New()}
	store.onRelease = func() { ended = append(ended, workCtx.Err() != nil) }
	c, err := newOn(store, "cron", objlease.SessionOptions{Clock: clock.NewFake(epoch)}, objlease.Options{TTL: 10 * time.Second, Holder: "a"})
	if err != nil {
		t.Fatal(err)
	}
	err = election.RunOnce(context.Background(), c, func(ctx context.Context, _ *objlease.Lease) error {
		workCtx = ctx // e.g. a goroutine still uploading with ctx
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(ended) != 1 || !ended[0] {
		t.Fatalf("work's context still live when the released record was written (%v)", ended)
	}
	if !errors.Is(context.Cause(workCtx), objlease.ErrReleased) {
		t.Errorf("work's context cause %v, want ErrReleased", context.Cause(workCtx))
	}
}
