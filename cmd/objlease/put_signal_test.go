//go:build linux

package main

import (
	"errors"
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

	"github.com/creack/pty"
)

// putCases are the commands that copy standard input before they write:
// the command line for each, given the directory that holds the store.
var putCases = []struct {
	name string
	args func(dir string) []string
}{
	{"put", func(dir string) []string {
		return []string{"put", "--token", "1", "file://" + filepath.Join(dir, "store", "report.csv")}
	}},
	{"batch put", func(dir string) []string {
		return []string{"batch", "put", "--token", "1", "file://" + filepath.Join(dir, "store", "out") + "/", "part-1"}
	}},
}

// put and batch put copy a pipe on standard input before they write: a
// signal while they read it (the producer still running) ends them at
// once with 128+N, and nothing is written. They used to read on until the
// pipe closed.
func TestPutInterruptedWhileReadingPipe(t *testing.T) {
	for _, pc := range putCases {
		for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
			t.Run(pc.name+"/"+sigName(sig), func(t *testing.T) {
				dir := t.TempDir()
				pr, pw, err := os.Pipe()
				if err != nil {
					t.Fatal(err)
				}
				defer pw.Close() // the producer never ends its output
				cmd, stderr := startPut(t, dir, pc.args(dir), pr, nil)
				pr.Close()
				if _, err := pw.Write([]byte("half a report\n")); err != nil {
					t.Fatal(err)
				}
				waitReadingStdin(t, cmd, stderr)
				if err := cmd.Process.Signal(sig); err != nil {
					t.Fatal(err)
				}
				checkInterrupted(t, cmd, stderr, dir, 128+int(sig), sigName(sig))
			})
		}
	}
}

// At a terminal, Ctrl-C while put or batch put reads standard input ends
// them at once (130), nothing written; Ctrl-D at the start of a line ends
// the input, and what was typed is written.
func TestPutAtTerminal(t *testing.T) {
	for _, pc := range putCases {
		t.Run(pc.name+"/Ctrl-C", func(t *testing.T) {
			dir := t.TempDir()
			cmd, stderr, term := startPutAtTerminal(t, dir, pc.args(dir))
			if _, err := term.Write([]byte("half a line")); err != nil {
				t.Fatal(err)
			}
			waitReadingStdin(t, cmd, stderr)
			if _, err := term.Write([]byte{0x03}); err != nil { // Ctrl-C: SIGINT to the foreground group
				t.Fatal(err)
			}
			checkInterrupted(t, cmd, stderr, dir, 130, "Ctrl-C")
		})
		t.Run(pc.name+"/Ctrl-D", func(t *testing.T) {
			dir := t.TempDir()
			cmd, stderr, term := startPutAtTerminal(t, dir, pc.args(dir))
			waitReadingStdin(t, cmd, stderr)
			if _, err := term.Write([]byte("row 1\nrow 2\n\x04")); err != nil { // Ctrl-D on a line of its own: end of input
				t.Fatal(err)
			}
			if code := exitWithin(t, cmd, stderr, "Ctrl-D"); code != 0 {
				t.Fatalf("exit %d after Ctrl-D, want 0; stderr:\n%s", code, stderr)
			}
			files := filesUnder(t, dir)
			var body []byte
			for _, f := range files {
				if filepath.Base(f) == "report.csv" || filepath.Base(f) == "part-1" {
					b, err := os.ReadFile(filepath.Join(dir, f))
					if err != nil {
						t.Fatal(err)
					}
					body = b
				}
			}
			if string(body) != "row 1\nrow 2\n" {
				t.Fatalf("the object holds %q, want the two rows typed; files: %q", body, files)
			}
		})
	}
}

// startPut starts objlease with args, standard input stdin, attributes
// attr and $TMPDIR inside dir.
func startPut(t *testing.T, dir string, args []string, stdin *os.File, attr *syscall.SysProcAttr) (*exec.Cmd, *lockedBuffer) {
	t.Helper()
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(objleaseBin(t), args...)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	cmd.Stdin = stdin
	stderr := new(lockedBuffer)
	cmd.Stderr = stderr
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd, stderr
}

// startPutAtTerminal starts objlease with args in a session of its own
// whose controlling terminal is its standard input; it returns the
// terminal's other end, where the test types.
func startPutAtTerminal(t *testing.T, dir string, args []string) (*exec.Cmd, *lockedBuffer, *os.File) {
	t.Helper()
	term, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("opening a pseudo-terminal: %v", err)
	}
	cmd, stderr := startPut(t, dir, args, tty, &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0})
	tty.Close()
	t.Cleanup(func() { term.Close() })
	// The terminal echoes what is typed: drain it, or a full echo buffer
	// would block typing.
	go func() {
		buf := make([]byte, 1024)
		for {
			if _, err := term.Read(buf); err != nil {
				return
			}
		}
	}()
	return cmd, stderr, term
}

// waitReadingStdin waits until one of cmd's threads is blocked reading
// standard input (the read system call on descriptor 0).
func waitReadingStdin(t *testing.T, cmd *exec.Cmd, stderr *lockedBuffer) {
	t.Helper()
	want := strconv.Itoa(syscall.SYS_READ) + " 0x0 "
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/syscall", cmd.Process.Pid))
		for _, task := range tasks {
			if b, err := os.ReadFile(task); err == nil && strings.HasPrefix(string(b), want) {
				return
			}
		}
		if len(tasks) == 0 || time.Now().After(deadline) {
			t.Fatalf("objlease is not reading standard input (threads: %d); stderr:\n%s", len(tasks), stderr)
		}
	}
}

// checkInterrupted checks that cmd, sent a signal by how, exits with code
// and one line saying it was interrupted, and wrote nothing under dir.
func checkInterrupted(t *testing.T, cmd *exec.Cmd, stderr *lockedBuffer, dir string, code int, how string) {
	t.Helper()
	if got := exitWithin(t, cmd, stderr, how); got != code {
		t.Errorf("exit %d after %s, want %d; stderr:\n%s", got, how, code, stderr)
	}
	if lines := strings.Split(strings.TrimSpace(stderr.String()), "\n"); len(lines) != 1 || !strings.Contains(lines[0], "interrupted") {
		t.Errorf("stderr is not one line saying it was interrupted:\n%s", stderr)
	}
	if files := filesUnder(t, dir); len(files) > 0 {
		t.Errorf("the interrupted command left files behind: %q", files)
	}
}

// exitWithin waits for cmd to exit and returns its exit code; a command
// still running 10 s after how fails the test.
func exitWithin(t *testing.T, cmd *exec.Cmd, stderr *lockedBuffer, how string) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("still running 10s after %s; stderr:\n%s", how, stderr)
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode()
}

// filesUnder lists the files (not directories) under dir, relative to it.
func filesUnder(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, path)
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func sigName(sig syscall.Signal) string {
	return map[syscall.Signal]string{syscall.SIGINT: "SIGINT", syscall.SIGTERM: "SIGTERM"}[sig]
}
