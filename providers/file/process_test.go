package file_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/file"
)

// The tests below run this test binary again as separate OS processes; the
// environment tells the copy which part to play.
const (
	envRole = "OBJLEASE_FILE_TEST_ROLE"
	envDir  = "OBJLEASE_FILE_TEST_DIR"
)

// helper starts a copy of the test binary playing role on dir. The copy
// waits for a byte on stdin before it starts, so that several can be
// released together.
func helper(t *testing.T, role, dir string) (cmd *exec.Cmd, stdin io.WriteCloser, stdout io.Reader) {
	t.Helper()
	cmd = exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), envRole+"="+role, envDir+"="+dir)
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
	switch role {
	case "count":
		count(t, s)
	case "write":
		writeForever(t, s)
	default:
		t.Fatalf("unknown role %q", role)
	}
}

const counterKey = "shared/counter"

// count increments the counter in counterKey by read, then conditional
// write, and prints every value it managed to write.
func count(t *testing.T, s *file.Store) {
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
	const procs = 6
	dir := t.TempDir()
	var (
		mu      sync.Mutex
		written []int
		wg      sync.WaitGroup
		release []io.WriteCloser
	)
	for p := range procs {
		cmd, stdin, stdout := helper(t, "count", dir)
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
func writeForever(t *testing.T, s *file.Store) {
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
	}
}
