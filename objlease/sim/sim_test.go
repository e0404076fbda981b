package sim

import (
	"flag"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/objlease/objlease/internal/entropy"
	"github.com/objlease/objlease/objlease/fence"
	"github.com/objlease/objlease/providers/faulty"
)

var (
	flagLong  = flag.Bool("sim.long", false, "run TestSimulationLong: a million operations and more")
	flagFrom  = flag.Uint64("sim.from", 1, "first seed")
	flagSeeds = flag.Int("sim.seeds", 0, "number of seeds (default: 150 for TestSimulation, 5000 for TestSimulationLong)")
	flagOff   = flag.String("sim.off", "", "turn one safeguard off: Fencing, or (with -tags objlease_unsafe) a switch of internal/safeguards (DriftMargin, KeepRecordOnRelease, NonceCheck, UniqueNonces, OwnWriteCheck, ForceWaits, UniqueTombstones, CallbackBeforeRelease, PathLock)")
	flagV     = flag.Bool("sim.v", false, "print every run's trace")
	flagModel = flag.String("sim.model", "", "run only the seeds whose store model is this one (mem, s3, gcs, azure, file)")
)

// result is what one run produced.
type result struct {
	cfg        config
	violations []violation
	hash       uint64 // of the trace up to the end of the workload
	trace      []string
	times      []time.Duration
	ops        map[string]int64
	requests   int64
	faults     faulty.Counts
	elapsed    time.Duration // real time the run took
	// The leases' part alone, before the shard group's is added: a
	// function of the seed.
	leaseTrace  []string
	leaseOps    int64
	leaseFaults faulty.Counts
}

// totalOps counts the library calls the drivers made; keys with a space
// count outcomes of those calls.
func (r *result) totalOps() int64 {
	var n int64
	for k, v := range r.ops {
		if !strings.Contains(k, " ") {
			n += v
		}
	}
	return n
}

// simulate runs one seed in its own bubble: inside it, time is simulated
// and only moves when every goroutine is blocked, so the run is a function
// of the seed alone (see doc.go).
func simulate(t *testing.T, cfg config) (res *result) {
	began := time.Now()
	defer func() { res.elapsed = time.Since(began) }()
	dir := fileStoreDir(t)
	synctest.Test(t, func(t *testing.T) {
		// Nonce salt from the run's seed: reproducible, and still a
		// different draw for every process.
		salt := rand.New(rand.NewPCG(cfg.seed, 0x5a17))
		defer entropy.Replace(func(b []byte) {
			for i := range b {
				b[i] = byte(salt.Uint32())
			}
		})()
		lcfg := cfg
		lcfg.workers = 0 // the shard group runs in a bubble of its own, below
		w, err := newWorld(lcfg, dir)
		if err != nil {
			t.Fatal(err)
		}
		w.run()
		h := fnv.New64a()
		for _, line := range w.trace[:w.opsAt] {
			fmt.Fprintln(h, canon(line))
		}
		// Not the writes' bytes nor all their metadata: manifest nonces and
		// batch ids come from the global generator. Versions by order of
		// first appearance: the file store draws them from crypto/rand, and
		// on S3 a manifest's version is the MD5 of its nonce.
		versions := map[string]int{}
		for _, a := range w.audit.writes {
			if a.at.Sub(w.start) < cfg.duration {
				v := 0
				if !strings.Contains(a.key, "_objlease/") {
					if _, ok := versions[a.version]; !ok {
						versions[a.version] = len(versions) + 1
					}
					v = versions[a.version]
				}
				fmt.Fprintln(h, a.at, a.op, a.key, v, a.metadata[fence.TokenKey])
			}
		}
		res = &result{cfg: cfg, violations: w.check(), hash: h.Sum64(), trace: w.trace, times: w.times, ops: w.ops}
		for _, p := range append(w.procs, w.workers...) {
			res.requests += p.faults[0].Requests()
			for _, f := range p.faults {
				res.faults = res.faults.Add(f.Counts())
			}
		}
	})
	res.leaseTrace, res.leaseOps, res.leaseFaults = res.trace, res.totalOps(), res.faults
	if cfg.workers > 0 {
		simulateGroup(t, cfg, res)
	}
	return res
}

// fileVersion is a version of the file store: rand.Text, from crypto/rand.
var fileVersion = regexp.MustCompile(`\b[A-Z2-7]{26}\b`)

// canon is a trace line without what may differ between two runs of one
// seed: the file store's versions.
func canon(line string) string { return fileVersion.ReplaceAllString(line, "V") }

// fileStoreDir is an empty directory for the file store model, in memory
// where the system offers one: the store syncs every write, and the disk's
// latency is real time the simulation does not need.
func fileStoreDir(t *testing.T) string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "objlease-sim-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}

func replayCommand(cfg config, off string) string {
	cmd := fmt.Sprintf("go test ./objlease/sim/ -run '^TestSimulation$' -sim.from=%d -sim.seeds=1 -sim.v", cfg.seed)
	if off != "" {
		cmd += " -sim.off=" + off
		if off != "Fencing" {
			cmd = strings.Replace(cmd, "go test ", "go test -tags objlease_unsafe ", 1)
		}
	}
	return cmd
}

func report(t *testing.T, r *result, off string) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%v\n", r.cfg)
	for _, v := range r.violations {
		fmt.Fprintf(&b, "  VIOLATION %s: %s\n", v.kind, v.msg)
	}
	// The trace from two TTLs before the first violation to a second
	// after it (its end if the violation has no time); all with -sim.v.
	from, to := 0, len(r.trace)
	if at := r.violations[0].at; !*flagV && at > 0 {
		for from < to && r.times[from] < at-2*r.cfg.ttl {
			from++
		}
		for to > from && r.times[to-1] > at+time.Second {
			to--
		}
	} else if !*flagV {
		from = max(0, to-60)
	}
	fmt.Fprintf(&b, "  trace lines %d to %d of %d (all with -sim.v):\n", from+1, to, len(r.trace))
	for _, line := range r.trace[from:to] {
		fmt.Fprintf(&b, "    %s\n", line)
	}
	fmt.Fprintf(&b, "replay: %s", replayCommand(r.cfg, off))
	t.Error(b.String())
}

// safeguard is one safeguard turned off for the rest of a test; off
// applies it to a run's config, on turns it back on.
type safeguard struct {
	off func(*config)
	on  func()
}

// setSafeguard turns one safeguard off for the rest of the test.
func setSafeguard(t *testing.T, name string) safeguard {
	switch name {
	case "":
		return safeguard{func(*config) {}, func() {}}
	case "Fencing":
		return safeguard{func(c *config) { c.unfenced = true }, func() {}}
	}
	sw := safeguardSwitch(name)
	if sw == nil {
		t.Fatalf("unknown safeguard %q%s", name, switchesHint)
	}
	sw.Store(false)
	t.Cleanup(func() { sw.Store(true) })
	return safeguard{func(*config) {}, func() { sw.Store(true) }}
}

// totals sums what many runs did, for the reliability report.
type totals struct {
	seeds, ops, requests int64
	byOp                 map[string]int64
	faults               faulty.Counts
	violations           int
	badSeeds             map[string]int // seeds that broke each guarantee
	elapsed              time.Duration
	byModel              map[string]*totals
	excused              int // seeds whose violations a gate excused
}

func (s *totals) add(r *result) {
	if s.byModel == nil {
		s.byModel = map[string]*totals{}
	}
	m := s.byModel[r.cfg.model]
	if m == nil {
		m = &totals{}
		s.byModel[r.cfg.model] = m
	}
	m.count(r)
	s.count(r)
}

func (s *totals) count(r *result) {
	s.elapsed += r.elapsed
	s.seeds++
	s.ops += r.totalOps()
	s.requests += r.requests
	s.faults = s.faults.Add(r.faults)
	s.violations += len(r.violations)
	if s.byOp == nil {
		s.byOp, s.badSeeds = map[string]int64{}, map[string]int{}
	}
	for k, v := range r.ops {
		s.byOp[k] += v
	}
	kinds := map[string]bool{}
	for _, v := range r.violations {
		kinds[v.kind] = true
	}
	for k := range kinds {
		s.badSeeds[k]++
	}
}

func (s *totals) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d seeds, %d operations, %d store requests, %d violations, %v\n", s.seeds, s.ops, s.requests, s.violations, s.elapsed.Round(time.Second))
	fmt.Fprintf(&b, "  | store model | seeds | operations | store requests | violations | time |\n")
	for _, m := range modelNames {
		if t := s.byModel[m]; t != nil {
			fmt.Fprintf(&b, "  | %s | %d | %d | %d | %d | %v |\n", m, t.seeds, t.ops, t.requests, t.violations, t.elapsed.Round(100*time.Millisecond))
		}
	}
	if s.excused > 0 {
		fmt.Fprintf(&b, "  seeds whose violations gates excused: %d\n", s.excused)
	}
	for _, k := range allKinds {
		if n := s.badSeeds[k]; n > 0 {
			fmt.Fprintf(&b, "  seeds with %q: %d\n", k, n)
		}
	}
	keys := make([]string, 0, len(s.byOp))
	for k := range s.byOp {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "  %-20s %d\n", k, s.byOp[k])
	}
	for _, k := range faulty.Kinds() {
		fmt.Fprintf(&b, "  fault %-14v %d\n", k, s.faults[k])
	}
	return b.String()
}

// runSeeds runs n seeds from the -sim.from seed and fails on every
// violation, printing the replay command: with the trace for the first
// few violating seeds, by one line for the rest.
func runSeeds(t *testing.T, n int, gated bool) *totals {
	if *flagSeeds > 0 {
		n = *flagSeeds
	}
	mod := setSafeguard(t, *flagOff).off
	var sum totals
	bad := 0
	for seed := *flagFrom; seed < *flagFrom+uint64(n); seed++ {
		cfg := configFor(seed)
		if *flagModel != "" && cfg.model != *flagModel {
			continue
		}
		mod(&cfg)
		r := simulate(t, cfg)
		sum.add(r)
		if gated && *flagOff == "" {
			var by []string
			if r.violations, by = excused(cfg, r.violations); len(by) > 0 {
				sum.excused++
				t.Logf("seed %d: violations excused until these are fixed: %s\nreplay: %s -sim.strict", seed, strings.Join(by, "; "), replayCommand(cfg, ""))
			}
		}
		switch {
		case len(r.violations) > 0 && bad >= 3:
			var b strings.Builder
			seen := map[string]bool{}
			for _, v := range r.violations {
				if !seen[v.kind] {
					seen[v.kind] = true
					fmt.Fprintf(&b, "\n  %s: %s", v.kind, v.msg)
				}
			}
			t.Errorf("seed %d (%s):%s\nreplay: %s", seed, cfg.model, b.String(), replayCommand(cfg, *flagOff))
		case len(r.violations) > 0:
			bad++
			report(t, r, *flagOff)
		case *flagV:
			t.Logf("%v\n%s", r.cfg, strings.Join(r.trace, "\n"))
		}
	}
	return &sum
}

// TestSimulation is the short simulation of the normal test suite.
func TestSimulation(t *testing.T) {
	t.Log(runSeeds(t, 150, true))
}

// TestSimulationLong is the long simulation, run on demand:
//
//	go test ./objlease/sim/ -run TestSimulationLong -sim.long -timeout 0 -v
func TestSimulationLong(t *testing.T) {
	if !*flagLong {
		t.Skip("run with -sim.long")
	}
	t.Log(runSeeds(t, 5000, false))
}

// A run is a function of its seed: its leases' part exactly; the shard
// group's only as far as the library's renewal scheduler allows (see
// simulateGroup).
func TestSimulationReproducible(t *testing.T) {
	n := 5
	if *flagSeeds > 0 {
		n = *flagSeeds
	}
	for seed := *flagFrom; seed < *flagFrom+uint64(n); seed++ {
		a, b := simulate(t, configFor(seed)), simulate(t, configFor(seed))
		if a.hash != b.hash || a.leaseFaults != b.leaseFaults || a.leaseOps != b.leaseOps {
			for i := range min(len(a.leaseTrace), len(b.leaseTrace)) {
				if canon(a.leaseTrace[i]) != canon(b.leaseTrace[i]) {
					t.Fatalf("seed %d: runs differ at trace line %d:\n  %s\n  %s", seed, i, a.leaseTrace[i], b.leaseTrace[i])
				}
			}
			t.Fatalf("seed %d: runs differ (%d and %d trace lines)", seed, len(a.leaseTrace), len(b.leaseTrace))
		}
	}
}
