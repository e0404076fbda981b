//go:build unix

package file_test

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/file"
)

// The tests below run this test binary again as separate OS processes; the
// environment tells the copy which part to play.
const (
	envRole = "OBJLEASE_FILE_TEST_ROLE"
	envDir  = "OBJLEASE_FILE_TEST_DIR"
	envKey  = "OBJLEASE_FILE_TEST_KEY"
)

// helper starts a copy of the test binary playing role on dir. The copy
// waits for a byte on stdin before it starts, so that several can be
// released together.
func helper(t *testing.T, role, dir string) (cmd *exec.Cmd, stdin io.WriteCloser, stdout io.Reader) {
	t.Helper()
	return helperKey(t, role, dir, "")
}

// helperKey is helper for a role that works on key (its default if "").
func helperKey(t *testing.T, role, dir, key string) (cmd *exec.Cmd, stdin io.WriteCloser, stdout io.Reader) {
	t.Helper()
	cmd = exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), envRole+"="+role, envDir+"="+dir, envKey+"="+key)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err = cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, stdin, stdout
}

// TestHelperProcess is the body of the helper processes.
func TestHelperProcess(t *testing.T) {
	role := os.Getenv(envRole)
	if role == "" {
		t.Skip("run as a separate process by TestProcessesCount and TestKilledWriter")
	}
	s, err := file.New(os.Getenv(envDir))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stdin.Read(make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	key := os.Getenv(envKey)
	switch role {
	case "count":
		count(t, s, cmp.Or(key, counterKey))
	case "hold":
		hold(t, s, key)
	case "crash":
		crashAt(t, s, key)
	case "write":
		writeForever(t, s)
	default:
		t.Fatalf("unknown role %q", role)
	}
}

const counterKey = "shared/counter"

// count increments the counter in counterKey by read, then conditional
// write, and prints every value it managed to write.
func count(t *testing.T, s *providers.Bucket, counterKey string) {
	ctx := t.Context()
	for range 300 {
		var n int
		o, err := s.Get(ctx, counterKey, 0)
		switch {
		case errors.Is(err, providers.ErrNotFound):
			n = 1
			_, err = s.Create(ctx, counterKey, []byte("1"), nil)
		case err != nil:
			t.Fatal(err)
		default:
			prev, perr := strconv.Atoi(string(o.Data))
			if perr != nil {
				t.Fatalf("counter holds %q: %v", o.Data, perr)
			}
			n = prev + 1
			_, err = s.Replace(ctx, counterKey, []byte(strconv.Itoa(n)), nil, o.Version)
		}
		switch {
		case err == nil:
			fmt.Printf("wrote %d\n", n)
		case !errors.Is(err, providers.ErrPrecondition):
			t.Fatal(err)
		}
	}
}

// Every process increments one counter through conditional writes; the
// union of the values they wrote must be exactly 1..N.
func TestProcessesCount(t *testing.T) {
	countInProcesses(t, t.TempDir(), func(int) (string, string) { return "", "" })
}

// Processes alternately open the tree at D with key shared/counter and at
// D/shared with key counter: one file, reached through two roots.
func TestProcessesTwoRoots(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "shared"), 0o755); err != nil {
		t.Fatal(err)
	}
	countInProcesses(t, dir, func(p int) (string, string) {
		if p%2 == 0 {
			return "", counterKey
		}
		return "shared", "counter"
	})
}

// countInProcesses runs the count role in several processes; where(p)
// gives process p's root below dir and its key.
func countInProcesses(t *testing.T, dir string, where func(p int) (sub, key string)) {
	const procs = 6
	var (
		mu      sync.Mutex
		written []int
		wg      sync.WaitGroup
		release []io.WriteCloser
	)
	for p := range procs {
		sub, key := where(p)
		cmd, stdin, stdout := helperKey(t, "count", filepath.Join(dir, sub), key)
		release = append(release, stdin)
		wg.Go(func() {
			var mine []int
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				if v, ok := strings.CutPrefix(sc.Text(), "wrote "); ok {
					n, err := strconv.Atoi(v)
					if err != nil {
						t.Errorf("process %d: %q", p, sc.Text())
					}
					mine = append(mine, n)
				}
			}
			if err := cmd.Wait(); err != nil {
				t.Errorf("process %d: %v", p, err)
			}
			t.Logf("process %d: %d successful writes of 300 tries", p, len(mine))
			mu.Lock()
			written = append(written, mine...)
			mu.Unlock()
		})
	}
	for _, w := range release {
		w.Write([]byte{1})
		w.Close()
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	slices.Sort(written)
	for i, n := range written {
		if n != i+1 {
			t.Fatalf("values written, sorted, differ from 1..%d at position %d (%d): a write was lost or doubled", len(written), i, n)
		}
	}
	s, err := file.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	o, err := s.Get(t.Context(), counterKey, 0)
	if err != nil {
		t.Fatal(err)
	}
	if string(o.Data) != strconv.Itoa(len(written)) {
		t.Errorf("final counter %s, but %d writes succeeded", o.Data, len(written))
	}
}

const tornKey = "torn/object"

// writeForever rewrites tornKey with 64 KiB of one letter, the letter also
// in its metadata, and prints a line after each write.
func writeForever(t *testing.T, s *providers.Bucket) {
	ctx := t.Context()
	for i := 0; ; i++ {
		letter := string(rune('a' + i%26))
		data := bytes.Repeat([]byte(letter), 64<<10)
		md := map[string]string{"letter": letter}
		a, err := s.Stat(ctx, tornKey)
		if errors.Is(err, providers.ErrNotFound) {
			_, err = s.Create(ctx, tornKey, data, md)
		} else if err == nil {
			_, err = s.Replace(ctx, tornKey, data, md, a.Version)
		}
		if err != nil {
			t.Fatal(err)
		}
		fmt.Println("wrote")
	}
}

// A writer killed at any point leaves the last complete object readable,
// never a partial one, and its lock does not outlive it.
func TestKilledWriter(t *testing.T) {
	dir := t.TempDir()
	s, err := file.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 5 {
		cmd, stdin, stdout := helper(t, "write", dir)
		stdin.Write([]byte{1})
		// Let it write a varying number of times, then kill it mid-loop.
		sc := bufio.NewScanner(stdout)
		for range 10 + 7*round {
			if !sc.Scan() {
				t.Fatalf("round %d: writer stopped early: %v", round, cmd.Wait())
			}
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()

		o, err := s.Get(t.Context(), tornKey, 0)
		if err != nil {
			t.Fatalf("round %d: object after kill: %v", round, err)
		}
		letter := o.Metadata["letter"]
		if len(o.Data) != 64<<10 || len(letter) != 1 || strings.Trim(string(o.Data), letter) != "" {
			t.Fatalf("round %d: object after kill is inconsistent: metadata %q, %d bytes starting %q", round, o.Metadata, len(o.Data), o.Data[:min(len(o.Data), 16)])
		}
		page, err := s.List(t.Context(), "", "", 10)
		if err != nil || len(page.Objects) != 1 {
			t.Fatalf("round %d: list after kill: %+v, %v", round, page.Objects, err)
		}
		if b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(tornKey))); err != nil || !bytes.Equal(b, o.Data) {
			t.Fatalf("round %d: the file itself holds %d bytes starting %q (%v), not the object's", round, len(b), b[:min(len(b), 16)], err)
		}
	}
}

// crashAt replaces tornKey with 64 KiB of "b" and is killed by SIGKILL at
// the stage of the write named by key.
func crashAt(t *testing.T, s *providers.Bucket, stage string) {
	file.SetCrashHook(s, func(at string) {
		if at == stage {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
	})
	a, err := s.Stat(t.Context(), tornKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Replace(t.Context(), tornKey, bytes.Repeat([]byte("b"), 64<<10), map[string]string{"letter": "b"}, a.Version); err != nil {
		t.Fatal(err)
	}
	t.Fatalf("not killed at %q", stage)
}

// A writer killed at each stage of a write leaves the old object (before
// the commit point) or the new one (after it) whole, and readers and the
// next writer carry on from there.
func TestKilledAtEachStage(t *testing.T) {
	for _, tc := range []struct {
		stage string
		want  string
	}{
		{"pending written", "a"},
		{"sidecar written", "a"},
		{"committed", "b"},
		{"data in place", "b"},
	} {
		t.Run(strings.ReplaceAll(tc.stage, " ", "-"), func(t *testing.T) {
			dir := t.TempDir()
			s, err := file.New(dir)
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			if _, err := s.Create(ctx, tornKey, bytes.Repeat([]byte("a"), 64<<10), map[string]string{"letter": "a"}); err != nil {
				t.Fatal(err)
			}
			cmd, stdin, _ := helperKey(t, "crash", dir, tc.stage)
			stdin.Write([]byte{1})
			err = cmd.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("writer: %v, want killed by SIGKILL", err)
			}
			a, err := s.Stat(ctx, tornKey)
			if err != nil {
				t.Fatal(err)
			}
			o, err := s.Get(ctx, tornKey, 0)
			if err != nil {
				t.Fatal(err)
			}
			if o.Version != a.Version || o.Metadata["letter"] != tc.want || string(o.Data) != strings.Repeat(tc.want, 64<<10) {
				t.Fatalf("after a kill at %q: version %s (stat said %s), metadata %v, %d bytes starting %q; want %q whole",
					tc.stage, o.Version, a.Version, o.Metadata, len(o.Data), o.Data[:min(len(o.Data), 8)], tc.want)
			}
			if b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(tornKey))); err != nil || !bytes.Equal(b, o.Data) {
				t.Fatalf("the file itself holds %d bytes starting %q (%v), not the object's", len(b), b[:min(len(b), 8)], err)
			}
			if page, err := s.List(ctx, "", "", 10); err != nil || len(page.Objects) != 1 || page.Objects[0].Version != o.Version {
				t.Fatalf("list: %+v, %v", page.Objects, err)
			}
			res, err := s.Replace(ctx, tornKey, []byte("next"), nil, o.Version)
			if err != nil {
				t.Fatalf("next write: %v", err)
			}
			if err := s.Delete(ctx, tornKey, res.Version); err != nil {
				t.Fatal(err)
			}
			left, _ := os.ReadDir(dir)
			left = slices.DeleteFunc(left, func(e os.DirEntry) bool { return e.Name() == ".objlease-locks" })
			if len(left) != 0 {
				t.Errorf("left behind after delete: %v", left)
			}
		})
	}
}

// hold takes key's lock as the store would, says so, and keeps it until
// its stdin closes.
func hold(t *testing.T, s *providers.Bucket, key string) {
	p := file.LockFile(s, key)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_RDONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	fmt.Println("locked")
	io.Copy(io.Discard, os.Stdin)
}

// While another process holds a key's lock, every operation that needs it
// gives up when its context ends, with the context's cause and not as an
// unknown outcome: nothing was sent.
func TestLockHonoursContext(t *testing.T) {
	dir := t.TempDir()
	s, err := file.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	const key = "jobs/nightly"
	res, err := s.Create(t.Context(), key, []byte("v1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	cmd, stdin, stdout := helperKey(t, "hold", dir, key)
	stdin.Write([]byte{1})
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() || sc.Text() != "locked" {
		t.Fatalf("lock holder: %q, %v", sc.Text(), cmd.Wait())
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()

	cause := errors.New("caller gave up")
	for _, op := range []struct {
		name string
		do   func(ctx context.Context) error
	}{
		{"create", func(ctx context.Context) error { _, err := s.Create(ctx, key, []byte("x"), nil); return err }},
		{"replace", func(ctx context.Context) error {
			_, err := s.Replace(ctx, key, []byte("x"), nil, res.Version)
			return err
		}},
		{"delete", func(ctx context.Context) error { return s.Delete(ctx, key, res.Version) }},
		// Data that no longer matches its sidecar sends a read to the lock.
		{"get", func(ctx context.Context) error {
			if b, err := os.ReadFile(filepath.Join(dir, "jobs", "nightly")); err != nil || string(b) != "v1" {
				t.Errorf("after the abandoned writes the file holds %q, %v; want v1", b, err)
			}
			if err := os.WriteFile(filepath.Join(dir, "jobs", "nightly"), []byte("edited"), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := s.Get(ctx, key, 0)
			return err
		}},
	} {
		// Ending the context while the operation waits, whenever that is.
		ctx, cancel := context.WithTimeoutCause(t.Context(), 50*time.Millisecond, cause)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- op.do(ctx) }()
		select {
		case err := <-done:
			var pe *providers.Error
			if !errors.Is(err, cause) || errors.Is(err, providers.ErrUnknownOutcome) || !errors.As(err, &pe) || pe.Key != key {
				t.Errorf("%s while the lock is held elsewhere: %v, want the context's cause naming the key, not an unknown outcome", op.name, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s still waiting for the lock 10 s after its context ended", op.name)
		}
	}
	stdin.Close()
	cmd.Wait()
	o, err := s.Get(t.Context(), key, 0)
	if err != nil || string(o.Data) != "edited" || o.Version == res.Version {
		t.Errorf("after the abandoned writes: %+v, %v; want the edited file, a plain file now", o, err)
	}
}
