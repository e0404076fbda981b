package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/objlease/objlease/providers"
)

// runObjlease runs the objlease command as a separate process (bench
// re-executes itself for the failover section) and returns its stdout,
// stderr and exit code.
func runObjlease(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(objleaseBin(t), args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// objectsUnder lists the keys under prefix in the file store at dir.
func objectsUnder(t *testing.T, dir, prefix string) []string {
	t.Helper()
	store, _, err := providers.Open(context.Background(), "file://"+dir+"/")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	p, err := store.List(context.Background(), prefix, "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, a := range p.Objects {
		keys = append(keys, a.Key)
	}
	return keys
}

func TestBenchTextTable(t *testing.T) {
	out, stderr, code := runObjlease(t, "bench", "--only", "latency,cost,advice", "--samples", "5", "file://"+t.TempDir()+"/")
	if code != 0 {
		t.Fatalf("bench exited %d; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{"LATENCY: 5 samples", "\nrenew ", "\nfenced put, version known ", "COST: measured", "\n30s ", "ADVICE: ", "\nrenew interval "} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "CONTENTION") || strings.Contains(out, "FAILOVER") {
		t.Errorf("sections not asked for were run:\n%s", out)
	}
}

// A prefix that holds a lease is refused without --force; with it, the
// lease is left exactly as it was.
func TestBenchRefusesPrefixWithLeases(t *testing.T) {
	dir := t.TempDir()
	url := "file://" + dir + "/"
	if _, stderr, code := runObjlease(t, "acquire", "--holder", "prod", "--ttl", "1h", url+"jobs/nightly"); code != 0 {
		t.Fatalf("acquire exited %d: %s", code, stderr)
	}
	store, _, err := providers.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	before, err := store.Stat(context.Background(), "jobs/nightly")
	if err != nil {
		t.Fatal(err)
	}

	_, stderr, code := runObjlease(t, "bench", "--only", "cost", url)
	if code != exitUsage || !strings.Contains(stderr, "holds lease records (jobs/nightly)") || !strings.Contains(stderr, "--force") {
		t.Fatalf("bench next to a lease exited %d, want %d; stderr:\n%s", code, exitUsage, stderr)
	}
	if _, stderr, code := runObjlease(t, "bench", "--force", "--only", "cost", url); code != 0 {
		t.Fatalf("bench --force exited %d; stderr:\n%s", code, stderr)
	}
	after, err := store.Stat(context.Background(), "jobs/nightly")
	if err != nil {
		t.Fatal(err)
	}
	if after.Version != before.Version {
		t.Errorf("the lease at jobs/nightly changed: version %s, was %s", after.Version, before.Version)
	}
	if keys := objectsUnder(t, dir, ""); len(keys) != 1 {
		t.Errorf("objects after bench: %q, want only jobs/nightly", keys)
	}
}

func TestBenchUsage(t *testing.T) {
	dir := "file://" + t.TempDir() + "/"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--only", "latency,speed", dir}, "unknown section"},
		{[]string{"--contenders", "1,0", dir}, "is not a positive count"},
		{[]string{"--samples", "0", dir}, "--samples 0 must be at least 1"},
		{[]string{"--ttl", "1s", "--poll", "-1s", dir}, "--poll -1s must not be negative"},
		{[]string{"--only", "failover", "mem://bench/"}, "needs a store other processes can reach"},
		{[]string{}, "bench takes one URL"},
	} {
		_, stderr, code := runObjlease(t, append([]string{"bench"}, tc.args...)...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("bench %q exited %d, want %d with %q; stderr:\n%s", tc.args, code, exitUsage, tc.want, stderr)
		}
	}
}

// Interrupted, bench still removes what it wrote, and exits as the signal
// says.
func TestBenchInterruptedCleansUp(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(objleaseBin(t), "bench", "--only", "contention", "--contenders", "3", "--duration", "1h", "file://"+dir+"/")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	lines := bufio.NewScanner(stderr)
	for lines.Scan() && !strings.Contains(lines.Text(), "objlease bench: contention") {
	}
	go io.Copy(io.Discard, stderr)
	// The contenders have started; wait for their record.
	for deadline := time.Now().Add(30 * time.Second); len(objectsUnder(t, dir, "objlease-bench-")) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("bench wrote nothing")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	var ee *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &ee) || ee.ExitCode() != 128+int(syscall.SIGINT) {
		t.Fatalf("bench exited with %v, want status %d", err, 128+int(syscall.SIGINT))
	}
	if keys := objectsUnder(t, dir, "objlease-bench-"); len(keys) != 0 {
		t.Errorf("left behind after SIGINT: %q", keys)
	}
}
