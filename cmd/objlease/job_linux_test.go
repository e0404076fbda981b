//go:build linux

package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/objlease/objlease/cmd/objlease/internal/supervise"
)

// A run stopped past its lease's validity (SIGSTOP, a frozen VM, a laptop
// lid) finds, when it resumes, that its supervisor stopped the command at
// the validity's end. A well-behaved command exits 0 on that SIGTERM with
// its work half done: run must not commit its batch or mark its tick, and
// exits 76. Which of the two run saw first was a coin's toss: four
// rounds.
func TestStoppedRunFinishesNothingForAStoppedCommand(t *testing.T) {
	for i := range 4 {
		t.Run(strconv.Itoa(i), stoppedRunFinishesNothing)
	}
}

func stoppedRunFinishesNothing(t *testing.T) {
	dir := t.TempDir()
	url := "file://" + filepath.Join(dir, "leases", "nightly")
	out := "file://" + filepath.Join(dir, "out") + "/"
	pidFile := filepath.Join(dir, "pid")
	run, _, stderr := startRun(t, "--ttl", "1s", "--grace", "30s", "--once-per", "1h", "--commit", out, url, "--", "sh", "-c",
		`echo part1 | objlease batch put --token "$OBJLEASE_TOKEN" "$OBJLEASE_COMMIT_URL" part1 || exit 9
trap 'exit 0' TERM
echo $$ >`+pidFile+`
while :; do sleep 0.05; done`)
	pid := readPid(t, pidFile, stderr)
	if err := run.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer run.Process.Signal(syscall.SIGCONT)
	gone(t, pid, "the command of the stopped run")
	if err := run.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, run); code != exitLost {
		t.Fatalf("the resumed run exited %d, want %d; stderr:\n%s", code, exitLost, stderr)
	}
	if !strings.Contains(stderr.String(), "nothing committed or marked") {
		t.Errorf("no line says that nothing was committed or marked:\n%s", stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "leases", "nightly.tick")); err == nil {
		t.Errorf("the tick was marked done for a command stopped at its deadline; stderr:\n%s", stderr)
	}
	_ = filepath.WalkDir(filepath.Join(dir, "out"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "manifest.json" {
			t.Errorf("the batch was committed (%s) for a command stopped at its deadline; stderr:\n%s", p, stderr)
		}
		return nil
	})
}

// A supervisor that is itself stopped cannot pass run's SIGTERM on when
// the lease is lost: run signals the command's process group directly,
// and at SIGKILL kills the stopped supervisor too, so that the command
// does not run beside the next holder's and run does not hang.
func TestStoppedSupervisorStillStopsTheCommand(t *testing.T) {
	dir := t.TempDir()
	url := "file://" + filepath.Join(dir, "lease")
	pidFile := filepath.Join(dir, "pid")
	run, _, stderr := startRun(t, "--ttl", "30s", "--grace", "1s", url, "--", "sh", "-c",
		`echo $$ >`+pidFile+`; while :; do sleep 0.05; done`)
	pid := readPid(t, pidFile, stderr)
	sup := parentOf(t, pid)
	if err := syscall.Kill(sup, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(sup, syscall.SIGKILL)
	// The break makes run's next renewal (within TTL/3) find the lease lost.
	if b, err := exec.Command(objleaseBin(t), "break", "--force", url).CombinedOutput(); err != nil {
		t.Fatalf("break: %v\n%s", err, b)
	}
	gone(t, pid, "the command under a stopped supervisor")
	exited := make(chan int, 1)
	go func() { exited <- waitExit(t, run) }()
	select {
	case code := <-exited:
		if code != exitLost {
			t.Fatalf("run exited %d, want %d; stderr:\n%s", code, exitLost, stderr)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("run still waits for its stopped supervisor a minute after the loss; stderr:\n%s", stderr)
	}
}

// parentOf is pid's parent, from /proc.
func parentOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatal(err)
	}
	return ppid
}

// At the shortest TTL a renewal lands every 33 ms: the supervisor must
// learn each new end of the validity when it lands, not on a poll that
// lags it, or it stops a command whose lease is renewed fine. A command
// that was stopped makes run exit 76 naming the loss; a healthy command
// killed showed as 143 with nothing on stderr.
func TestShortTTLKeepsAHealthyCommand(t *testing.T) {
	for i := range 3 {
		dir := t.TempDir()
		cmd := exec.Command(objleaseBin(t), "run", "--ttl", "100ms", "file://"+filepath.Join(dir, "lease"), "--", "sleep", "1.5")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		switch {
		case code == 0:
		case code == exitLost && strings.Contains(stderr.String(), "lease lost"):
			// A loss on a loaded machine is the lease's promise kept.
			t.Logf("run %d: the lease was lost (exit 76):\n%s", i, &stderr)
		default:
			t.Fatalf("run %d exited %d; stderr:\n%s", i, code, &stderr)
		}
	}
}

// The supervisor is told a new end of the validity each time a renewal
// lands: under a lease valid for 100 ms, renewed every 5 ms, a command
// lives on. With the end polled every 100 ms it was stopped at the first
// end told.
func TestSupervisorLearnsEachRenewal(t *testing.T) {
	asObjlease(t)
	l := newRenewingLease(100*time.Millisecond, 5*time.Millisecond)
	defer l.stop()
	tk, err := supervise.Start(exec.Command("/bin/sh", "-c", "sleep 1"), supervise.Options{Grace: time.Second, Lease: l})
	if err != nil {
		t.Fatal(err)
	}
	<-tk.Done()
	if e := tk.Ended(); e.Err != nil || e.Stopped || e.Status != 0 {
		t.Fatalf("the command under a lease renewed every 5 ms ended %+v, want exit 0, not stopped", e)
	}
}

// renewingLease is valid for valid after each renewal, every every.
type renewingLease struct {
	expiredLease
	valid   time.Duration
	mu      chan struct{} // a one-slot lock
	until   time.Time
	renewed chan struct{}
	done    chan struct{}
}

func newRenewingLease(valid, every time.Duration) *renewingLease {
	l := &renewingLease{valid: valid, mu: make(chan struct{}, 1), until: time.Now().Add(valid), renewed: make(chan struct{}), done: make(chan struct{})}
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				l.mu <- struct{}{}
				l.until = time.Now().Add(l.valid)
				close(l.renewed)
				l.renewed = make(chan struct{})
				<-l.mu
			case <-l.done:
				return
			}
		}
	}()
	return l
}

func (l *renewingLease) stop() { close(l.done) }

func (l *renewingLease) ValidFor() time.Duration {
	l.mu <- struct{}{}
	defer func() { <-l.mu }()
	return time.Until(l.until)
}

func (l *renewingLease) Renewed() <-chan struct{} {
	l.mu <- struct{}{}
	defer func() { <-l.mu }()
	return l.renewed
}
