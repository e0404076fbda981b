//go:build unix

package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
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
	// What the command left running may hold the pipes open: Wait
	// stops copying from them a while after run has exited.
	cmd.WaitDelay = 5 * time.Second
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
	case errors.Is(err, exec.ErrWaitDelay):
		t.Errorf("run's stdout or stderr still open %v after it exited: something the command started holds it", cmd.WaitDelay)
		return cmd.ProcessState.ExitCode()
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

// gone waits until no process has pid, or only a zombie, and fails after
// 20 s. The process would have been killed long before: the bound is for
// a loaded machine.
func gone(t *testing.T, pid int, what string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
			if i := bytes.LastIndexByte(b, ')'); i >= 0 && bytes.HasPrefix(b[i+1:], []byte(" Z")) {
				return
			}
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("%s (pid %d) still runs 20s after run ended", what, pid)
		}
	}
}

// readPid waits for a command to write a pid into file.
func readPid(t *testing.T, file string, stderr *lockedBuffer) int {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile(file)
		if s := strings.TrimSpace(string(b)); strings.HasSuffix(string(b), "\n") {
			pid, err := strconv.Atoi(s)
			if err != nil {
				t.Fatalf("%s: %q", file, b)
			}
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pid in %s after a minute; stderr:\n%s", file, stderr)
		}
	}
}

// Whatever ends run (SIGKILL, a lost lease, the command's own exit), on
// Linux nothing the command started outlives it: not a background child
// of a script, nor one that moved to a session of its own.
func TestRunLeavesNoProcessBehind(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("only Linux can follow what the command starts; elsewhere it outlives run")
	}
	for _, tc := range []struct {
		name   string
		script string // writes the pids of what it started to $PIDS, one a line
		kill   bool   // SIGKILL run once the pids are written
		code   int    // run's exit status, if not killed
	}{
		{name: "killed", script: `sleep 300 & echo $! > "$PIDS"; wait`, kill: true},
		{name: "killed-setsid", script: `setsid sh -c 'echo $$ > "$PIDS"; exec sleep 300' & wait`, kill: true},
		{name: "exited", script: `sleep 300 </dev/null >/dev/null 2>&1 & echo $! > "$PIDS"; exit 3`, code: 3},
		{name: "exited-setsid", script: `setsid sh -c 'echo $$ > "$PIDS"; exec sleep 300' </dev/null >/dev/null 2>&1 & until [ -s "$PIDS" ]; do sleep 0.01; done`},
		{name: "lost-setsid", script: `setsid sh -c 'echo $$ > "$PIDS"; exec sleep 300' </dev/null >/dev/null 2>&1 & until [ -s "$PIDS" ]; do sleep 0.01; done; objlease break --force "$OBJLEASE_URL" 2>/dev/null; while :; do sleep 0.1; done`, code: exitLost},
		{name: "lost", script: `trap '' TERM; sleep 300 & echo $! > "$PIDS"; objlease break --force "$OBJLEASE_URL" 2>/dev/null; while :; do sleep 0.1; done`, code: exitLost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			pids := filepath.Join(dir, "pids")
			t.Setenv("PIDS", pids)
			cmd, _, stderr := startRun(t, "--ttl", "3s", "--grace", "500ms", "file://"+filepath.Join(dir, "lease"), "--", "sh", "-c", tc.script)
			pid := readPid(t, pids, stderr)
			if tc.kill {
				if err := cmd.Process.Kill(); err != nil {
					t.Fatal(err)
				}
				_ = cmd.Wait() // a process left running holds stderr: see WaitDelay
			} else if code := waitExit(t, cmd); code != tc.code {
				t.Errorf("run exited %d, want %d; stderr:\n%s", code, tc.code, stderr)
			}
			gone(t, pid, "a process the command started")
		})
	}
}
