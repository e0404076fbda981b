package main

import (
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// BenchmarkPutMemory is the peak resident memory of "objlease put" and
// "objlease batch put" writing 1, 10 and 100 MB from a pipe, and from a
// file on standard input, to a file store: the bytes stream through (a
// pipe through a temporary file), so the peak must not grow with the
// object. It builds the command once and runs each once; use
// -benchtime=1x. Reported as peak-RSS-MB (getrusage's ru_maxrss of the
// child).
func BenchmarkPutMemory(b *testing.B) {
	dir := b.TempDir()
	bin := filepath.Join(dir, "objlease")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	for _, mb := range []int{1, 10, 100} {
		src := filepath.Join(dir, fmt.Sprintf("in-%d", mb))
		f, err := os.Create(src)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.CopyN(f, rand.Reader, int64(mb)<<20); err != nil {
			b.Fatal(err)
		}
		f.Close()
		for _, tc := range []struct{ name, how string }{
			{"put/pipe", "pipe"}, {"put/file", "file"}, {"batch-put/pipe", "pipe"},
		} {
			b.Run(fmt.Sprintf("%s/%dMB", tc.name, mb), func(b *testing.B) {
				args := []string{"put", "--token", "1", "file://" + filepath.Join(dir, "store", tc.name, fmt.Sprint(mb))}
				if tc.name == "batch-put/pipe" {
					args = []string{"batch", "put", "--token", "1", "file://" + filepath.Join(dir, "store", "out", fmt.Sprint(mb)) + "/", "part"}
				}
				cmd := exec.Command(bin, args...)
				cmd.Env = append(os.Environ(), "TMPDIR="+dir)
				in, err := os.Open(src)
				if err != nil {
					b.Fatal(err)
				}
				defer in.Close()
				if tc.how == "file" {
					cmd.Stdin = in
				} else {
					// A pipe, as from another command.
					w, err := cmd.StdinPipe()
					if err != nil {
						b.Fatal(err)
					}
					go func() {
						io.Copy(w, in)
						w.Close()
					}()
				}
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("objlease %q: %v\n%s", args, err, out)
				}
				ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
				b.ReportMetric(float64(ru.Maxrss)/1024, "peak-RSS-MB") // ru_maxrss is in KiB on Linux
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}
