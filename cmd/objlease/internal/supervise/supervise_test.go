package supervise

import (
	"bytes"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// fakeTask records what it is sent; it exits on the signal exitOn (0: only
// on Kill).
type fakeTask struct {
	exitOn os.Signal
	mu     sync.Mutex
	sent   []string
	done   chan struct{}
	once   sync.Once
}

func newFakeTask(exitOn os.Signal) *fakeTask {
	return &fakeTask{exitOn: exitOn, done: make(chan struct{})}
}

func (f *fakeTask) Pid() int              { return 1 }
func (f *fakeTask) Done() <-chan struct{} { return f.done }
func (f *fakeTask) Signal(sig os.Signal) error {
	f.record(sig.String())
	if f.exitOn != nil && sig == f.exitOn {
		f.once.Do(func() { close(f.done) })
	}
	return nil
}
func (f *fakeTask) Kill() error {
	f.record("kill")
	f.once.Do(func() { close(f.done) })
	return nil
}
func (f *fakeTask) Ended() (int, string, error) { return 0, "", nil }

func (f *fakeTask) record(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sent = append(f.sent, s)
}

func (f *fakeTask) got() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.sent, ",")
}

// A command that ignores SIGTERM is killed once grace has passed, not
// before; signals that arrive meanwhile are passed on.
func TestStopKillsAfterGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		log := slog.New(slog.NewTextHandler(&logs, nil))
		task := newFakeTask(nil)
		sigs := make(chan os.Signal, 1)
		stopped := make(chan struct{})
		go func() {
			Stop(log, task, sigs, 10*time.Second)
			close(stopped)
		}()
		synctest.Wait()
		sigs <- syscall.SIGINT
		time.Sleep(10*time.Second - time.Nanosecond)
		synctest.Wait()
		if got := task.got(); got != "terminated,interrupt" {
			t.Fatalf("before grace: sent %q, want SIGTERM then the SIGINT passed on", got)
		}
		<-stopped
		if got := task.got(); got != "terminated,interrupt,kill" {
			t.Fatalf("after grace: sent %q, want a kill after SIGTERM", got)
		}
		if !strings.Contains(logs.String(), "command still running after --grace 10s; sending SIGKILL") {
			t.Errorf("no line says the command was killed:\n%s", &logs)
		}
	})
}

// A command that exits on SIGTERM is not killed.
func TestStopWithoutKill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		task := newFakeTask(syscall.SIGTERM)
		Stop(slog.New(slog.DiscardHandler), task, nil, time.Second)
		time.Sleep(time.Minute)
		if got := task.got(); got != "terminated" {
			t.Fatalf("sent %q, want SIGTERM only", got)
		}
	})
}

// Tend passes signals on until stop closes, then stops the command and
// reports that it did; a command that exits first is not stopped.
func TestTend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := slog.New(slog.DiscardHandler)
		task := newFakeTask(syscall.SIGTERM)
		sigs := make(chan os.Signal, 1)
		stop := make(chan struct{})
		said := false
		result := make(chan bool)
		go func() { result <- Tend(log, task, sigs, stop, func() { said = true }, time.Second) }()
		sigs <- syscall.SIGHUP
		synctest.Wait()
		close(stop)
		if !<-result || !said {
			t.Fatalf("Tend after stop: stopped=false or stopping not called (said=%v)", said)
		}
		if got := task.got(); got != "hangup,terminated" {
			t.Fatalf("sent %q, want the SIGHUP passed on, then SIGTERM", got)
		}

		exited := newFakeTask(nil)
		exited.Kill()
		if Tend(log, exited, nil, make(chan struct{}), func() { t.Error("stopping called for a command that exited") }, time.Second) {
			t.Error("Tend reports a stop for a command that exited by itself")
		}
	})
}
