package job

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"slices"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// fakeLease is a lease whose validity ends at until (the bubble's clock)
// unless renewed, and that ends when lose is called.
type fakeLease struct {
	mu      sync.Mutex
	until   time.Time
	err     error
	done    chan struct{}
	renewed chan struct{}
}

func newFakeLease(valid time.Duration) *fakeLease {
	return &fakeLease{until: time.Now().Add(valid), done: make(chan struct{}), renewed: make(chan struct{})}
}

func (l *fakeLease) Token() uint64 { return 7 }

func (l *fakeLease) ValidFor() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return 0
	}
	return time.Until(l.until)
}

func (l *fakeLease) Done() <-chan struct{} { return l.done }

func (l *fakeLease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

func (l *fakeLease) Renewed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.renewed
}

func (l *fakeLease) renew(valid time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.until = time.Now().Add(valid)
	close(l.renewed)
	l.renewed = make(chan struct{})
}

var errLost = errors.New("lease lost: broken by an operator")

func (l *fakeLease) lose() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.err = errLost
	close(l.done)
}

// fakeTask records what it was sent; it exits with exit once end is
// called, or on SIGTERM if exitOnTerm.
type fakeTask struct {
	mu         sync.Mutex
	sent       []string
	exit       Exit
	exitOnTerm bool
	done       chan struct{}
	once       sync.Once
}

func newFakeTask(exit Exit) *fakeTask { return &fakeTask{exit: exit, done: make(chan struct{})} }

func (t *fakeTask) record(s string) {
	t.mu.Lock()
	t.sent = append(t.sent, s)
	t.mu.Unlock()
}

func (t *fakeTask) end()                  { t.once.Do(func() { close(t.done) }) }
func (t *fakeTask) Done() <-chan struct{} { return t.done }
func (t *fakeTask) Ended() Exit           { return t.exit }
func (t *fakeTask) Kill() error           { t.record("KILL"); t.end(); return nil }

func (t *fakeTask) Signal(sig os.Signal) error {
	t.record(sig.String())
	return nil
}

func (t *fakeTask) Terminate() error {
	t.record("TERM")
	if t.exitOnTerm {
		t.end()
	}
	return nil
}

func (t *fakeTask) signals() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.sent)
}

// steps runs j and lists the steps it took after the task ended.
func steps(j *Job) (Result, []string) {
	var did []string
	j.Finish = func() error { did = append(did, "finish"); return nil }
	j.Release = func() error { did = append(did, "release"); return nil }
	if j.Logger == nil {
		j.Logger = slog.New(slog.DiscardHandler)
	}
	return j.Run(), did
}

func TestDoneFinishesBeforeRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		task := newFakeTask(Exit{How: "exit status 0"})
		task.end()
		res, did := steps(&Job{Lease: newFakeLease(time.Second), Task: task, Grace: time.Second})
		if res.Outcome != Done || !slices.Equal(did, []string{"finish", "release"}) {
			t.Fatalf("outcome %v, steps %v; want done, [finish release]", res.Outcome, did)
		}
	})
}

func TestFailedIsNotFinished(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		task := newFakeTask(Exit{Status: 3})
		task.end()
		res, did := steps(&Job{Lease: newFakeLease(time.Second), Task: task})
		if res.Outcome != Failed || !slices.Equal(did, []string{"release"}) {
			t.Fatalf("outcome %v, steps %v; want failed, [release]", res.Outcome, did)
		}
	})
}

// A runner paused while its task exited 0 and its lease was lost sees
// both at once when it resumes: the exit must not win.
func TestExitSeenWithLossIsLost(t *testing.T) {
	for range 200 {
		l := newFakeLease(time.Second)
		l.lose()
		task := newFakeTask(Exit{How: "exit status 0"})
		task.end()
		res, did := steps(&Job{Lease: l, Task: task})
		if res.Outcome != Lost || !errors.Is(res.Cause, errLost) || slices.Contains(did, "finish") {
			t.Fatalf("outcome %v (cause %v), steps %v; want lost, no finish", res.Outcome, res.Cause, did)
		}
	}
}

// The supervisor stopped the task at the deadline; the runner, paused
// meanwhile, finds the lease not yet ended but its validity over.
func TestExitAfterValidityIsLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newFakeLease(time.Second)
		time.Sleep(2 * time.Second)
		task := newFakeTask(Exit{How: "exit status 0"})
		task.end()
		res, did := steps(&Job{Lease: l, Task: task})
		if res.Outcome != Lost || !errors.Is(res.Cause, ErrValidityEnded) || slices.Contains(did, "finish") {
			t.Fatalf("outcome %v (cause %v), steps %v; want lost by ErrValidityEnded, no finish", res.Outcome, res.Cause, did)
		}
	})
}

func TestStoppedAtDeadlineIsLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		task := newFakeTask(Exit{How: "exit status 0", Stopped: true})
		task.end()
		res, did := steps(&Job{Lease: newFakeLease(time.Second), Task: task})
		if res.Outcome != Lost || slices.Contains(did, "finish") {
			t.Fatalf("outcome %v, steps %v; want lost, no finish", res.Outcome, did)
		}
	})
}

func TestInterruptedIsNotFinished(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		task := newFakeTask(Exit{How: "exit status 0"})
		sigs := make(chan os.Signal, 1)
		j := &Job{Lease: newFakeLease(time.Minute), Task: task, Signals: sigs}
		go func() {
			sigs <- syscall.SIGTERM
			synctest.Wait()
			task.end()
		}()
		res, did := steps(j)
		if res.Outcome != Interrupted || res.Signal != syscall.SIGTERM || slices.Contains(did, "finish") {
			t.Fatalf("outcome %v (signal %v), steps %v; want interrupted by SIGTERM, no finish", res.Outcome, res.Signal, did)
		}
		if got := task.signals(); !slices.Equal(got, []string{"terminated"}) {
			t.Fatalf("task was sent %v, want [terminated]", got)
		}
	})
}

func TestLossTerminatesThenKills(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newFakeLease(time.Minute)
		task := newFakeTask(Exit{Status: 137})
		var told []error
		j := &Job{Lease: l, Task: task, Grace: 5 * time.Second, Stopping: func(err error) { told = append(told, err) }}
		start := time.Now()
		go func() {
			time.Sleep(time.Second)
			l.lose()
		}()
		res, did := steps(j)
		if res.Outcome != Lost || slices.Contains(did, "finish") {
			t.Fatalf("outcome %v, steps %v; want lost, no finish", res.Outcome, did)
		}
		if got := task.signals(); !slices.Equal(got, []string{"TERM", "KILL"}) {
			t.Fatalf("task was sent %v, want [TERM KILL]", got)
		}
		if took := time.Since(start); took != 6*time.Second {
			t.Fatalf("killed %v after the start, want 6s (loss at 1s + grace 5s)", took)
		}
		if len(told) != 1 || !errors.Is(told[0], errLost) {
			t.Fatalf("Stopping was told %v, want the loss once", told)
		}
	})
}

// A supervisor learns a new end of the validity at the instant the
// renewal lands: with a 100 ms TTL a poll would stop healthy commands.
func TestDeadlinesOnRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		now := func() time.Duration { return time.Since(start) }
		l := newFakeLease(100 * time.Millisecond)
		var mu sync.Mutex
		var ends []time.Duration
		stop := make(chan struct{})
		go Deadlines(l, now, 0, func(end time.Duration) bool {
			mu.Lock()
			ends = append(ends, end)
			mu.Unlock()
			return true
		}, stop)
		for range 5 {
			time.Sleep(33 * time.Millisecond)
			l.renew(100 * time.Millisecond)
			synctest.Wait()
			mu.Lock()
			last := ends[len(ends)-1]
			mu.Unlock()
			if want := now() + 100*time.Millisecond; last != want {
				t.Fatalf("after a renewal at %v the supervisor was told %v, want %v", now(), last, want)
			}
		}
		close(stop)
		synctest.Wait()
	})
}

func TestDeadlinesEndWithLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newFakeLease(time.Second)
		ended := make(chan struct{})
		go func() {
			Deadlines(l, func() time.Duration { return 0 }, 0, func(time.Duration) bool { return true }, nil)
			close(ended)
		}()
		l.lose()
		synctest.Wait()
		select {
		case <-ended:
		default:
			t.Fatal("Deadlines still running after the lease ended")
		}
	})
}

// Work done in this process is stopped through its context, and an error
// is a failure.
func TestFunc(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newFakeLease(time.Minute)
		task := Func(context.Background(), func(ctx context.Context) error {
			<-ctx.Done()
			return nil
		})
		go func() {
			time.Sleep(time.Second)
			l.lose()
		}()
		res, did := steps(&Job{Lease: l, Task: task, Grace: time.Second})
		if res.Outcome != Lost || slices.Contains(did, "finish") {
			t.Fatalf("work stopped by the loss: outcome %v, steps %v; want lost, no finish", res.Outcome, did)
		}
		failed := Func(context.Background(), func(context.Context) error { return errors.New("disk full") })
		res, _ = steps(&Job{Lease: newFakeLease(time.Minute), Task: failed})
		if res.Outcome != Failed || res.Exit.How != "disk full" {
			t.Fatalf("failing work: outcome %v (%s), want failed (disk full)", res.Outcome, res.Exit.How)
		}
	})
}
