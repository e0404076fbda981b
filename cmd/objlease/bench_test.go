package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
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

// Every section, small and short, on the file store: the JSON report says
// what each measured, and the scratch prefix is gone afterwards.
func TestBenchAllSectionsJSON(t *testing.T) {
	dir := t.TempDir()
	out, stderr, code := runObjlease(t, "bench", "-o", "json", "--samples", "10", "--contenders", "1,3",
		"--duration", "1s", "--trials", "1", "--ttl", "1s", "file://"+dir+"/")
	if code != 0 {
		t.Fatalf("bench exited %d; stderr:\n%s", code, stderr)
	}
	var r benchReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("stdout is not the JSON report: %v\n%s", err, out)
	}
	if !strings.HasPrefix(r.Scratch, "objlease-bench-") || r.Store != "file" || r.TTLMs != 1000 {
		t.Errorf("report header %+v", r)
	}
	if r.Latency == nil || len(r.Latency.Ops) != 1+len(latencyOps) {
		t.Fatalf("latency section %+v", r.Latency)
	}
	wantReqs := map[string]float64{opRaw: 1, opAcquire: 1, opRenew: 1, opFenced: 2, opFencedKnown: 1, opRelease: 1}
	for _, o := range r.Latency.Ops {
		n := 10
		if o.Op == opRaw {
			n = 10 * len(latencyOps) // one before each lease operation
		}
		if o.N != n || o.Requests != wantReqs[o.Op] || o.P50 <= 0 || o.P50 > o.P99 {
			t.Errorf("latency of %s: %+v, want %d samples of %v requests each", o.Op, o, n, wantReqs[o.Op])
		}
	}
	if c := r.Cost; c == nil || c.WritesPerRenewal != 1 || c.ReadsPerRenewal != 0 || c.ReadsPerPoll != 1 || len(c.Rows) != 4 {
		t.Errorf("cost section %+v, want one write per renewal, one read per poll, rows at 1s and 30s", c)
	}
	if len(r.Contention) != 2 {
		t.Fatalf("contention section %+v, want runs with 1 and 3 contenders", r.Contention)
	}
	for _, c := range r.Contention {
		if c.Acquisitions == 0 || c.Overlaps != 0 || c.TokenRegressions != 0 || c.MaxPer < c.MinPer {
			t.Errorf("contention with %d: %+v", c.Contenders, c)
		}
	}
	f := r.Failover
	if f == nil || len(f.Rules) != 2 || len(f.Fresh) != 2 {
		t.Fatalf("failover section %+v", f)
	}
	for _, rule := range f.Rules {
		if rule.Elapsed.N != 1 || rule.Early != 0 || rule.Elapsed.P50 <= 0 {
			t.Errorf("failover under the %s rule: %+v", rule.Rule, rule)
		}
	}
	// The file store reports no store time, so there the store-clock rule
	// falls back to the observed-time rule and the round-trip goal of a
	// fresh takeover does not apply.
	if fr := f.Fresh[0]; fr.Rule != ruleStoreClock || fr.Trials != 1 {
		t.Errorf("fresh takeover with the store clock: %+v, want one trial", fr)
	}
	if a := r.Advice; a == nil || a.TTLMs < 1000 || math.Abs(3*a.RenewMs-a.TTLMs) > 1 {
		t.Errorf("advice %+v", a)
	}
	if !strings.Contains(stderr, "objlease bench: latency") {
		t.Errorf("no progress lines on stderr:\n%s", stderr)
	}
	if keys := objectsUnder(t, dir, r.Scratch); len(keys) != 0 {
		t.Errorf("left behind under %s: %q", r.Scratch, keys)
	}
	// Nothing but the store's own files (locks; temporary files of a
	// holder process killed mid-write) may remain on disk.
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && !strings.Contains(p, "/.objlease") {
			t.Errorf("left behind in the store's directory: %s", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
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

// Progress rewrites one line on a terminal and prints a line every few
// seconds elsewhere, phases at once either way.
func TestBenchProgress(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var tty, plain bytes.Buffer
	pt := &progress{w: &tty, tty: true, now: func() time.Time { return now }}
	pp := &progress{w: &plain, now: func() time.Time { return now }}
	for _, p := range []*progress{pt, pp} {
		p.show(true, "phase %d", 1)
		p.show(false, "step a")
		now = now.Add(time.Second)
		p.show(false, "step b")
		now = now.Add(5 * time.Second)
		p.show(false, "step c")
		p.clear()
	}
	if want := "\r\x1b[Kphase 1\r\x1b[Kstep b\r\x1b[Kstep c\r\x1b[K"; tty.String() != want {
		t.Errorf("on a terminal: %q, want %q", tty.String(), want)
	}
	if want := "objlease bench: phase 1\nobjlease bench: step c\n"; plain.String() != want {
		t.Errorf("elsewhere: %q, want %q", plain.String(), want)
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
