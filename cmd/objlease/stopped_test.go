//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/objlease/objlease/cmd/objlease/internal/supervise"
	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/shard"
	"github.com/objlease/objlease/providers/mem"
)

// A run that is stopped (SIGSTOP, a debugger, a freezer aimed at it alone)
// cannot stop its command when its lease ends: the supervisor does, on its
// own CLOCK_BOOTTIME timer, so that the command of the next holder never
// runs beside it. run, once resumed, exits 76.
func TestStoppedRunsCommandEndsAtValidity(t *testing.T) {
	dir := t.TempDir()
	url := "file://" + filepath.Join(dir, "leases", "frozen")
	pidFile, log := filepath.Join(dir, "pid1"), filepath.Join(dir, "log")
	// The command ignores nothing: SIGTERM at the validity end stops it.
	run1, _, stderr1 := startRun(t, "--ttl", "1s", "--grace", "30s", url, "--", "sh", "-c",
		`echo $$ >`+pidFile+`; while :; do echo "1 $OBJLEASE_TOKEN" >>`+log+`; sleep 0.05; done`)
	pid1 := readPid(t, pidFile, stderr1)

	if err := run1.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer run1.Process.Signal(syscall.SIGCONT)
	// Without the supervisor's own timer the command writes on for as long
	// as run is stopped; gone fails after 20 s.
	gone(t, pid1, "the command of the stopped run")

	// A second holder takes over once the record has been unchanged for
	// TTL × (1 + drift) by its own clock.
	second := exec.Command(objleaseBin(t), "run", "--ttl", "1s", url, "--", "sh", "-c",
		`echo "2 $OBJLEASE_TOKEN" >>`+log)
	if b, err := second.CombinedOutput(); err != nil {
		t.Fatalf("second run: %v\n%s", err, b)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if last := lines[len(lines)-1]; last != "2 2" {
		t.Fatalf("the log does not end with the second holder's line (token 2), so the first command ran on beside it:\n%s", b)
	}
	for _, l := range lines[:len(lines)-1] {
		if l != "1 1" {
			t.Fatalf("unexpected line %q in the log:\n%s", l, b)
		}
	}

	if err := run1.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, run1); code != exitLost {
		t.Fatalf("the resumed run exited %d, want %d; stderr:\n%s", code, exitLost, stderr1)
	}
}

// A supervisor whose first deadline has already passed does not start the
// command: run reports the lease lost (76) rather than running it.
func TestSupervisorRefusesAnExpiredLease(t *testing.T) {
	ended := expiredLease{}
	asObjlease(t)
	marker := filepath.Join(t.TempDir(), "ran")
	cmd := exec.Command("/bin/sh", "-c", "touch "+marker)
	tk, err := supervise.Start(cmd, supervise.Options{Grace: time.Second, Lease: ended})
	if err != nil {
		t.Fatal(err)
	}
	<-tk.Done()
	err = tk.Ended().Err
	if err == nil || !strings.Contains(err.Error(), "validity ended") {
		t.Fatalf("ended: %v, want the lease's validity ended", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the command ran although the lease's validity had ended")
	}
}

type expiredLease struct{}

func (expiredLease) Token() uint64            { return 1 }
func (expiredLease) ValidFor() time.Duration  { return 0 }
func (expiredLease) Done() <-chan struct{}    { return nil }
func (expiredLease) Err() error               { return nil }
func (expiredLease) Renewed() <-chan struct{} { return nil }

// asObjlease makes a supervisor started from this test process run as the
// objlease command (TestMain dispatches on the program's name).
func asObjlease(t *testing.T) {
	old := os.Args[0]
	os.Args[0] = "objlease"
	t.Cleanup(func() { os.Args[0] = old })
}

// A shard whose lease ended during the back-off before a restart (the
// member paused, another took the shard) is not started again with the
// old token: group join used to log "shard command started" after its own
// "lease lost".
func TestShardNotRestartedAfterItsLeaseEnded(t *testing.T) {
	cl, err := objlease.New(mem.New(), "g/shards/s1", objlease.Options{Holder: "w1", TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	l, err := cl.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	ctx, cancel := context.WithCancelCause(l.Context())
	cancel(fmt.Errorf("%w: taken over by w2", objlease.ErrLeaseLost))

	var stderr lockedBuffer
	c := &cli{stdin: strings.NewReader(""), stdout: io.Discard, stderr: &stderr}
	c.log = slog.New(slog.NewTextHandler(&stderr, nil))
	asObjlease(t)
	marker := filepath.Join(t.TempDir(), "ran")
	c.shardWork(ctx, "file:///g", &shard.Shard{ID: "s1", Lease: l}, []string{"/bin/sh", "-c", "touch " + marker}, time.Second)
	if strings.Contains(stderr.String(), "shard command started") {
		t.Fatalf("the command of a shard no longer held was started:\n%s", &stderr)
	}
	if !strings.Contains(stderr.String(), "no longer held") {
		t.Errorf("no line says why the command was not started:\n%s", &stderr)
	}
}
