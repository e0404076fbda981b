package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// lockedBuffer collects a process's stderr while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// objleaseBin is the objlease command testscript.Main installed on $PATH:
// this test binary, run as a separate process.
func objleaseBin(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("objlease")
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// startRun starts "objlease run args..." and returns it with a reader of
// its stdout (the command's) and its stderr.
func startRun(t *testing.T, args ...string) (*exec.Cmd, *bufio.Reader, *lockedBuffer) {
	t.Helper()
	cmd := exec.Command(objleaseBin(t), append([]string{"run"}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := new(lockedBuffer)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd, bufio.NewReader(out), stderr
}

func readLine(t *testing.T, r *bufio.Reader, stderr *lockedBuffer) string {
	t.Helper()
	line, err := r.ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	if line == "" {
		t.Fatalf("the command printed nothing; stderr:\n%s", stderr)
	}
	return strings.TrimSuffix(line, "\n")
}

func waitExit(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	err := cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	t.Fatalf("run: %v", err)
	return -1
}

// A command that ignores SIGTERM is killed with SIGKILL once --grace has
// passed after its lease was lost.
func TestRunKillsAfterGrace(t *testing.T) {
	url := "file://" + filepath.Join(t.TempDir(), "leases", "stubborn")
	// exec keeps the ignored SIGTERM, so the process that run waits for
	// is the one ignoring it.
	cmd, out, stderr := startRun(t, "--ttl", "2s", "--grace", "200ms", url, "--",
		"sh", "-c", `trap '' TERM; echo $$; exec sleep 60`)
	pid, err := strconv.Atoi(readLine(t, out, stderr))
	if err != nil {
		t.Fatal(err)
	}
	// Break the lease under it: run's next renewal is refused.
	if b, err := exec.Command(objleaseBin(t), "break", "--force", url).CombinedOutput(); err != nil {
		t.Fatalf("break: %v\n%s", err, b)
	}
	if code := waitExit(t, cmd); code != exitLost {
		t.Fatalf("run exited %d, want %d; stderr:\n%s", code, exitLost, stderr)
	}
	log := stderr.String()
	term := strings.Index(log, "sending SIGTERM")
	kill := strings.Index(log, "sending SIGKILL")
	if term < 0 || kill < term {
		t.Errorf("stderr does not show SIGTERM then SIGKILL:\n%s", log)
	}
	if !strings.Contains(log, "command stopped (signal: killed)") {
		t.Errorf("stderr does not show the command killed by SIGKILL:\n%s", log)
	}
	// run reaped the command, so its pid names no process, not even a zombie.
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("command (pid %d) still exists after run exited: kill 0: %v", pid, err)
	}
}

// SIGINT and SIGTERM sent to run reach the command, run exits with the
// command's status, and the lease is released.
func TestRunForwardsSignals(t *testing.T) {
	for _, tc := range []struct {
		sig  syscall.Signal
		said string
		code int
	}{
		{syscall.SIGINT, "got INT", 5},
		{syscall.SIGTERM, "got TERM", 6},
	} {
		t.Run(tc.sig.String(), func(t *testing.T) {
			url := "file://" + filepath.Join(t.TempDir(), "fwd")
			// sh runs a trap once the command in progress ends: short
			// sleeps keep that prompt.
			cmd, out, stderr := startRun(t, url, "--", "sh", "-c",
				`trap 'echo got INT; exit 5' INT; trap 'echo got TERM; exit 6' TERM; echo ready; while :; do sleep 0.1; done`)
			if got := readLine(t, out, stderr); got != "ready" {
				t.Fatalf("command said %q, want ready", got)
			}
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			if got := readLine(t, out, stderr); got != tc.said {
				t.Errorf("command said %q, want %q", got, tc.said)
			}
			if code := waitExit(t, cmd); code != tc.code {
				t.Fatalf("run exited %d, want %d; stderr:\n%s", code, tc.code, stderr)
			}
			b, err := exec.Command(objleaseBin(t), "inspect", "-o", "json", url).Output()
			if err != nil {
				t.Fatalf("inspect: %v", err)
			}
			if !strings.Contains(string(b), `"state":"released"`) {
				t.Errorf("lease not released after the command exited: %s", b)
			}
		})
	}
}
