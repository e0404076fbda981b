package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/objlease/objlease/providers"
	_ "github.com/objlease/objlease/providers/file"
)

// TestMain makes the test binary double as the holder process the
// failover section starts: "bench.test _holder [flags] URL".
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "_holder" {
		if err := Holder(context.Background(), testEnv(os.Stdout, os.Stderr), os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func testEnv(stdout, stderr *os.File) Env {
	return Env{Stdout: stdout, Stderr: stderr, Log: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Holder: []string{os.Args[0], "_holder"}, Open: func(ctx context.Context, rawURL string, opts providers.OpenOptions) (providers.Store, string, error) {
			return providers.OpenWith(ctx, rawURL, opts)
		}}
}

// runBench runs the bench in this process (its holder processes are this
// test binary) and returns its stdout and stderr.
func runBench(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	dir := t.TempDir()
	outf, err := os.Create(filepath.Join(dir, "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	errf, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer outf.Close()
	defer errf.Close()
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	run := Flags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	err = run(context.Background(), testEnv(outf, errf), fs.Arg(0))
	out, _ := os.ReadFile(outf.Name())
	serr, _ := os.ReadFile(errf.Name())
	return string(out), string(serr), err
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

// A usage error is one: ErrUsage, naming the flag.
func TestUsageErrors(t *testing.T) {
	dir := "file://" + t.TempDir() + "/"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--only", "latency,speed", dir}, "unknown section"},
		{[]string{"--samples", "0", dir}, "--samples 0 must be at least 1"},
		{[]string{"-o", "yaml", dir}, "want text or json"},
	} {
		_, _, err := runBench(t, tc.args...)
		if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("bench %q: %v, want ErrUsage with %q", tc.args, err, tc.want)
		}
	}
}

// Every section, small and short, on the file store: the JSON report says
// what each measured, and the scratch prefix is gone afterwards.
func TestBenchAllSectionsJSON(t *testing.T) {
	dir := t.TempDir()
	out, stderr, err := runBench(t, "-o", "json", "--samples", "10", "--contenders", "1,3",
		"--duration", "1s", "--trials", "1", "--ttl", "1s", "--leases", "50", "file://"+dir+"/")
	if err != nil {
		t.Fatalf("bench: %v; stderr:\n%s", err, stderr)
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
	if c := r.Cost; c == nil || c.WritesPerRenewal != 1 || c.ReadsPerRenewal != 0 || c.ReadsPerPoll != 1 || len(c.Rows) != 4 ||
		len(c.Waiting) != 2 || c.Waiting[0].Rule != ruleObserved || c.Waiting[1].Rule != ruleStoreClock || c.Waiting[0].Seconds <= 0 {
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
	if f == nil || len(f.Rules) != 4 || len(f.Fresh) != 2 {
		t.Fatalf("failover section %+v", f)
	}
	for i, rule := range f.Rules {
		if rule.Elapsed.N != 1 || rule.Early != 0 || rule.Elapsed.P50 <= 0 {
			t.Errorf("failover under the %s rule: %+v", rule.Rule, rule)
		}
		// SIGKILL under each rule, then a graceful release under each.
		if want := []string{endKill, endKill, endRelease, endRelease}[i]; rule.Ending != want {
			t.Errorf("failover row %d ends the holder by %q, want %q", i, rule.Ending, want)
		}
	}
	// The file store reports no store time, so there the store-clock rule
	// falls back to the observed-time rule and the round-trip goal of a
	// fresh takeover does not apply.
	if fr := f.Fresh[0]; fr.Rule != ruleStoreClock || fr.Trials != 1 {
		t.Errorf("fresh takeover with the store clock: %+v, want one trial", fr)
	}
	if m := r.Many; m == nil || m.Leases != 50 || m.Lost != 0 || m.Renewals == 0 || m.MinGapMs <= 0 || m.Waiters != 50 || m.WaitReadsPS <= 0 {
		t.Errorf("many section %+v, want 50 leases renewed and none lost, 50 waiters reading", m)
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
	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && !strings.Contains(p, "/.objlease") {
			t.Errorf("left behind in the store's directory: %s", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
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

// The progress line counts the samples taken, those of the operation it
// names included: after all five, it never says none were.
func TestBenchProgressCountsTheSamplesTaken(t *testing.T) {
	_, stderr, err := runBench(t, "--only", "latency", "--samples", "5", "file://"+t.TempDir()+"/")
	if err != nil {
		t.Fatal(err)
	}
	lines := regexp.MustCompile(`(?m)^objlease bench: latency: .*$`).FindAllString(stderr, -1)
	if len(lines) == 0 || lines[len(lines)-1] != "objlease bench: latency: 5/5 samples of each operation" || strings.Contains(stderr, "latency: 0/5") {
		t.Errorf("progress on stderr:\n%s\nwant it to end with 5/5 samples of each operation, and never say 0/5", stderr)
	}
}
