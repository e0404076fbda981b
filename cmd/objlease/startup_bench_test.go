package main

import (
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkStartup is what wrapping a command in "objlease run" costs: it
// builds the command once, then runs "objlease run file://… -- true" and
// "true" alternately and reports both and their ratio. "objlease version"
// is the process start alone; run adds four requests to the file store
// (create, read, take over, release), each synced to disk.
func BenchmarkStartup(b *testing.B) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		b.Skip("needs the go command to build objlease:", err)
	}
	trueBin, err := exec.LookPath("true")
	if err != nil {
		b.Skip("needs true(1):", err)
	}
	dir := b.TempDir()
	bin := filepath.Join(dir, "objlease")
	if out, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	url := "file://" + filepath.Join(dir, "leases", "startup")
	run := func(name string, args ...string) time.Duration {
		start := time.Now()
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			b.Fatalf("%s %q: %v\n%s", name, args, err, out)
		}
		return time.Since(start)
	}
	var objlease, version, plain time.Duration
	n := 0
	for b.Loop() {
		plain += run(trueBin)
		objlease += run(bin, "run", url, "--", trueBin)
		version += run(bin, "version")
		n++
	}
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 / float64(n) }
	b.ReportMetric(per(objlease), "run-ms/op")
	b.ReportMetric(per(version), "version-ms/op")
	b.ReportMetric(per(plain), "true-ms/op")
	b.ReportMetric(float64(objlease)/float64(plain), "run/true")
	b.ReportMetric(0, "ns/op") // three processes per op; the metrics above say which
}
