//go:build linux

// Package scripts holds the tests of the shell scripts beside it.
package scripts

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Ctrl-C on ./scripts/test.sh while the emulators install stops
// everything it started: test.sh used to exit and leave npm ci (a
// background job, which ignores SIGINT) running under PID 1.
func TestInterruptStopsEverything(t *testing.T) {
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	emu, bin := filepath.Join(dir, "emulators"), filepath.Join(dir, "bin")
	for _, d := range []string{filepath.Join(emu, "bin"), filepath.Join(emu, "stamps"), bin} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The Go emulators look installed; npm is a stand-in that says it
	// started, then runs as long as npm ci would, in a child of its own.
	for name, stamp := range map[string]string{
		"versitygw":       "github.com/versity/versitygw/cmd/versitygw@v1.8.0",
		"fake-gcs-server": "github.com/fsouza/fake-gcs-server@v1.56.1",
	} {
		write(t, filepath.Join(emu, "bin", name), "#!/bin/sh\n", 0o755)
		write(t, filepath.Join(emu, "stamps", name), stamp+"\n", 0o644)
	}
	started := filepath.Join(dir, "npm-started")
	write(t, filepath.Join(bin, "npm"), "#!/bin/sh\nsleep 300 &\necho $! >"+started+"\nwait\n", 0o755)

	// A bystander marked as a test.sh that runs this test marks what it
	// starts: the interrupted script must leave it alone.
	t.Setenv("OBJLEASE_SCRIPT_MARK", fmt.Sprintf("outer-%d", os.Getpid()))
	bystander := exec.Command("sleep", "300")
	if err := bystander.Start(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { ended <- bystander.Wait() }()
	defer func() {
		select {
		case err := <-ended:
			t.Errorf("the interrupted script stopped a process of the run around it: %v", err)
		default:
			bystander.Process.Kill()
		}
	}()

	mark := fmt.Sprintf("OBJLEASE_INTERRUPT_TEST=%d", os.Getpid())
	cmd := exec.Command("bash", filepath.Join(repo, "scripts", "test.sh"))
	// A mark of its own: one inherited from a test.sh running this test
	// would make the interrupted script stop that run's other tests.
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "OBJLEASE_SCRIPT_MARK=") })
	cmd.Env = append(env, mark, "OBJLEASE_EMULATORS_DIR="+emu, "OBJLEASE_SKIP_MINIO=1",
		"PATH="+bin+":"+os.Getenv("PATH"), "CI=")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a terminal's foreground group
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killMarked(mark) })
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(started); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stand-in npm did not start within a minute:\n%s", &out)
		}
	}
	// Ctrl-C: SIGINT to the whole foreground process group.
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Errorf("test.sh: %v, want exit 130:\n%s", err, &out)
	}
	// What it started has had SIGTERM; give it a moment to go.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		left := marked(mark)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still running after test.sh was interrupted: %s\n%s", strings.Join(left, "; "), &out)
		}
	}
}

func write(t *testing.T, name, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// marked lists the live processes (not zombies) whose environment holds
// mark, as "pid: command line".
func marked(mark string) []string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, p := range procs {
		env, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(env, []byte(mark+"\x00")) {
			continue
		}
		dir := filepath.Dir(p)
		if stat, err := os.ReadFile(filepath.Join(dir, "stat")); err == nil {
			if i := bytes.LastIndexByte(stat, ')'); i >= 0 && bytes.HasPrefix(stat[i+1:], []byte(" Z")) {
				continue
			}
		}
		cmdline, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
		out = append(out, filepath.Base(dir)+": "+strings.ReplaceAll(strings.TrimRight(string(cmdline), "\x00"), "\x00", " "))
	}
	return out
}

func killMarked(mark string) {
	for _, p := range marked(mark) {
		var pid int
		fmt.Sscanf(p, "%d:", &pid)
		if pid > 0 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
