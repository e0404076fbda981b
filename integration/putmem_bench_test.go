//go:build linux

package integration

// BenchmarkPutPeakRSS measures the peak resident memory of "objlease put"
// against the size of what it writes: the command runs as a child
// process, fed N MiB on a pipe, and the kernel reports its peak RSS
// (ru_maxrss).
// With OBJLEASE_BENCH_BEFORE set to a git revision, the command built at
// that revision is measured beside the one built from this tree:
//
//	OBJLEASE_EMULATORS=process OBJLEASE_BENCH_BEFORE=4b2668a \
//	  go test -run '^$' -bench BenchmarkPutPeakRSS -benchtime 1x .

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/objlease/objlease/integration/emulator"
)

// buildAt builds the command from the root module at git revision rev
// into dir.
func buildAt(b *testing.B, rev, dir string) string {
	b.Helper()
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		b.Fatal(err)
	}
	archive := exec.Command("sh", "-c", `git -C .. archive "$0" | tar -x -C "$1"`, rev, src)
	if out, err := archive.CombinedOutput(); err != nil {
		b.Fatalf("git archive %s: %v\n%s", rev, err, out)
	}
	bin := filepath.Join(dir, "objlease-"+rev)
	build := exec.Command("go", "build", "-o", bin, "./cmd/objlease")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build at %s: %v\n%s", rev, err, out)
	}
	return bin
}

// launcherSource is a small program that runs its arguments as a command
// and writes the command's peak RSS (KiB) to fd 3. The benchmark measures
// through it because Go starts a child with vfork: the kernel then counts
// the parent's own peak RSS (the benchmark's, tens of MiB) in the child's
// ru_maxrss. The launcher's peak, a few MiB, is the floor it leaves.
const launcherSource = `package main

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

func main() {
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	if cmd.ProcessState == nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Fprintln(os.NewFile(3, "rss"), cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss)
	os.Exit(cmd.ProcessState.ExitCode())
}
`

// buildLauncher builds launcherSource into dir.
func buildLauncher(b *testing.B, dir string) string {
	b.Helper()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(launcherSource), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module launcher\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	bin := filepath.Join(dir, "launcher")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build launcher: %v\n%s", err, out)
	}
	return bin
}

// patterned is an endless stream of bytes that no two blocks share.
type patterned struct{ n uint64 }

func (p *patterned) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = byte(p.n>>3) ^ byte(p.n>>17) ^ byte(p.n*7)
		p.n++
	}
	return len(b), nil
}

func BenchmarkPutPeakRSS(b *testing.B) {
	type variant struct{ name, bin string }
	variants := []variant{{"after", objleaseBin(b)}}
	if rev := os.Getenv("OBJLEASE_BENCH_BEFORE"); rev != "" {
		variants = append([]variant{{"before", buildAt(b, rev, b.TempDir())}}, variants...)
	}
	launcher := buildLauncher(b, b.TempDir())
	s3, gcs, az := emulator.VersityGW(b), emulator.FakeGCS(b), emulator.Azurite(b)
	prefix := emulator.Prefix(b)
	stores := []struct {
		name string
		url  func(key string) string
		env  []string
	}{
		{"file", func(key string) string { return "file://" + b.TempDir() + "/" + key }, nil},
		{"s3", func(key string) string { return s3CLIURL(s3.Endpoint, s3.Bucket, prefix+key) }, s3CLIEnv(s3, s3.AccessKey, s3.SecretKey)},
		{"gcs", func(key string) string { return "gs://" + gcs.Bucket + "/" + prefix + key }, []string{"STORAGE_EMULATOR_HOST=" + gcs.Host}},
		{"azblob", func(key string) string { return "azblob://" + az.Container + "/" + prefix + key }, []string{"AZURE_STORAGE_CONNECTION_STRING=" + az.ConnectionString}},
	}
	for _, st := range stores {
		for _, mb := range []int{1, 10, 100} {
			for _, v := range variants {
				b.Run(fmt.Sprintf("%s/%dMiB/%s", st.name, mb, v.name), func(b *testing.B) {
					var peak int64
					for i := range b.N {
						key := fmt.Sprintf("putrss/%s/%d/%s/%d", st.name, mb, v.name, i)
						cmd := exec.Command(launcher, v.bin, "put", "--token", "1", "--unique-payloads", st.url(key))
						cmd.Env = append(os.Environ(), st.env...)
						cmd.Stdin = io.LimitReader(&patterned{n: uint64(i) << 40}, int64(mb)<<20)
						r, w, err := os.Pipe()
						if err != nil {
							b.Fatal(err)
						}
						cmd.ExtraFiles = []*os.File{w}
						out, err := cmd.CombinedOutput()
						w.Close()
						rss, rerr := io.ReadAll(r)
						r.Close()
						if err != nil || rerr != nil {
							b.Fatalf("put %d MiB: %v %v\n%s", mb, err, rerr, out)
						}
						// Linux reports ru_maxrss in KiB.
						kib, err := strconv.ParseInt(strings.TrimSpace(string(rss)), 10, 64)
						if err != nil {
							b.Fatalf("launcher reported %q: %v", rss, err)
						}
						peak = max(peak, kib)
					}
					b.ReportMetric(float64(peak)/1024, "peak-MiB")
					b.ReportMetric(float64(peak)/1024/float64(mb), "peak/input")
				})
			}
		}
	}
}
