//go:build objlease_unsafe

package sim

import (
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/objlease/objlease/internal/safeguards"
)

// flagKeepOn is registered only where the test it changes is built.
var flagKeepOn = flag.Bool("sim.keepon", false, "TestCheckerFindsViolations (-tags objlease_unsafe) leaves every safeguard on: what it finds then is a fault of the tree")

// safeguardSwitch returns the switch of internal/safeguards named name, or
// nil.
func safeguardSwitch(name string) *atomic.Bool {
	switch name {
	case "DriftMargin":
		return &safeguards.DriftMargin
	case "KeepRecordOnRelease":
		return &safeguards.KeepRecordOnRelease
	case "NonceCheck":
		return &safeguards.NonceCheck
	case "UniqueNonces":
		return &safeguards.UniqueNonces
	case "OwnWriteCheck":
		return &safeguards.OwnWriteCheck
	case "ForceWaits":
		return &safeguards.ForceWaits
	case "UniqueTombstones":
		return &safeguards.UniqueTombstones
	case "CallbackBeforeRelease":
		return &safeguards.CallbackBeforeRelease
	case "PathLock":
		return &safeguards.PathLock
	case "JudgeByValidity":
		return &safeguards.JudgeByValidity
	case "DeadlineOnRenewal":
		return &safeguards.DeadlineOnRenewal
	case "StopTaskDirectly":
		return &safeguards.StopTaskDirectly
	}
	return nil
}

// switchesHint completes the message for an unknown safeguard.
const switchesHint = ""

// pathLockOff reports whether the file store's PathLock safeguard is off.
func pathLockOff() bool { return !safeguards.PathLock.Load() }

// stopTaskDirectly reports whether a runner stops its command directly
// rather than through its supervisor (cmd/objlease/internal/supervise).
func stopTaskDirectly() bool { return safeguards.StopTaskDirectly.Load() }

// checkerRow is a row of TestCheckerFindsViolations: a safeguard off, the
// violations that show it, and the shape of run that needs it.
type checkerRow struct {
	name  string // of the subtest, if not off
	off   string
	kinds []string
	shape func(*config)
	blind string // why the simulation cannot see it, if it cannot
}

// checkerRows is the safeguards-off table; every switch of
// internal/safeguards has a row (TestEverySwitchHasARow).
var checkerRows = []checkerRow{
	{"", "DriftMargin", []string{vOverlap}, func(c *config) {}, ""},
	{"", "KeepRecordOnRelease", []string{vTokenTwice, vRecordBack}, func(c *config) {}, ""},
	{"", "NonceCheck", []string{vTokenTwice, vOverlap}, func(c *config) {}, ""},
	{"", "Fencing", []string{vRegisterBack, vNotLinear}, func(c *config) {}, ""},
	{"", "UniqueNonces", []string{vTokenTwice, vOverlap}, func(c *config) { c.sharedRand = true }, ""},
	// Rare: a record deleted by hand, recreated with the very token of
	// a holder that then releases before its next renewal.
	{"", "OwnWriteCheck", []string{vOverlap, vTokenTwice}, func(c *config) { c.operator, c.acts, c.leases = 8, actDelete, 1 }, ""},
	{"", "ForceWaits", []string{vOverlap}, func(c *config) { c.force, c.operator, c.acts = true, 4, actTamper }, ""},
	{"", "UniqueTombstones", []string{vRegisterBack, vNotLinear}, func(c *config) { c.model, c.electors, c.pauseCheck = "s3", 3, 0.3 }, ""},
	{"", "CallbackBeforeRelease", []string{vLeaders}, func(c *config) { c.electors = 3 }, ""},
	{"", "PathLock", []string{vOverlap, vTokenTwice, vRecordBack}, func(c *config) { c.model, c.leases = "file", 1 }, ""},
	// The shard group, with a few lease clients beside it.
	{"ShardsCallbackBeforeRelease", "CallbackBeforeRelease", []string{vShardOverlap}, shardRow, ""},
	{"ShardsDriftMargin", "DriftMargin", []string{vShardOverlap}, shardRow, ""},
	{"ShardsFencing", "Fencing", []string{vShardBack}, shardRow, ""},
}

// The checks are not blind: with each safeguard off in turn they find the
// violation it prevents, within a bounded number of seeds. Each row runs
// the shape of run that needs the safeguard, with the operator, shared
// seeds, Force and misdirected writes off unless the row needs them, so
// that what is found is the row's. Where the safeguard's fix is in the
// tree (no gate excuses it), the seed that found the violation is run
// again with the safeguard on and must then be clean of it.
func TestCheckerFindsViolations(t *testing.T) {
	for _, tc := range checkerRows {
		if tc.name == "" {
			tc.name = tc.off
		}
		t.Run(tc.name, func(t *testing.T) {
			if tc.blind != "" {
				t.Skip("not visible to the simulation: " + tc.blind)
			}
			shape := func(seed uint64) config {
				c := configFor(seed)
				c.operator, c.sharedRand, c.force, c.misdirect, c.electors, c.workers = 0, false, false, false, 0, 0
				if c.model == "file" {
					c.storeClock = false
				}
				if c.model == "s3" {
					c.model = "mem"
				}
				tc.shape(&c)
				return c
			}
			bound := uint64(40)
			if tc.off == "OwnWriteCheck" {
				// Rarer still since waiting contenders read after every
				// second renewal: first found at seed 155.
				bound = 240
			}
			if *flagSeeds > 0 {
				bound = uint64(*flagSeeds)
			}
			found := func(r *result) *violation {
				for _, v := range r.violations {
					if slices.Contains(tc.kinds, v.kind) {
						return &v
					}
				}
				return nil
			}
			restore := safeguard{func(*config) {}, func() {}}
			if !*flagKeepOn {
				restore = setSafeguard(t, tc.off)
			}
			for seed := *flagFrom; seed < *flagFrom+bound; seed++ {
				cfg := shape(seed)
				restore.off(&cfg)
				r := simulate(t, cfg)
				v := found(r)
				if v == nil {
					continue
				}
				t.Logf("found at seed %d: %s: %s\nreplay: go test -tags objlease_unsafe ./objlease/sim/ -run 'TestCheckerFindsViolations/%s$' -sim.from=%d -sim.v", seed, v.kind, v.msg, tc.name, seed)
				if *flagV {
					t.Logf("%v\n%s", r.cfg, strings.Join(r.trace, "\n"))
				}
				if pending(tc.off) {
					t.Logf("%s: its fix is not in this tree yet (gated), so the same seed is not checked with it on", tc.off)
					return
				}
				restore.on()
				if v := found(simulate(t, shape(seed))); v != nil {
					t.Errorf("seed %d with %s on: %s: %s: the violation is not the safeguard's", seed, tc.off, v.kind, v.msg)
				}
				return
			}
			if *flagKeepOn {
				t.Fatalf("no %v in %d seeds of the shape that needs %s, with it on", tc.kinds, bound, tc.off)
			}
			t.Fatalf("no %v in %d seeds with %s off: the checks cannot see what it prevents", tc.kinds, bound, tc.off)
		})
	}
}

// TestEverySwitchHasARow reads the switches declared in internal/safeguards
// and fails for any that the table above does not turn off, or that
// -sim.off cannot name.
func TestEverySwitchHasARow(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join("..", "..", "internal", "safeguards", "safeguards.go"), nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range f.Decls {
		if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.VAR {
			for _, spec := range g.Specs {
				for _, n := range spec.(*ast.ValueSpec).Names {
					names = append(names, n.Name)
				}
			}
		}
	}
	if len(names) < 9 {
		t.Fatalf("found only the switches %v in internal/safeguards", names)
	}
	for _, name := range names {
		if safeguardSwitch(name) == nil {
			t.Errorf("switch %s: -sim.off cannot turn it off (safeguardSwitch)", name)
		}
		if !slices.ContainsFunc(checkerRows, func(r checkerRow) bool { return r.off == name }) &&
			!slices.ContainsFunc(jobCheckerRows, func(r jobCheckerRow) bool { return r.off == name }) {
			t.Errorf("switch %s: no row of TestCheckerFindsViolations or TestJobCheckerFindsViolations turns it off", name)
		}
	}
}

// pending reports whether a gate still waits for the fix of the named
// safeguard switch.
func pending(name string) bool {
	return slices.ContainsFunc(gates, func(g gate) bool { return strings.Contains(g.fault, "("+name+")") })
}

// shardRow is the shape of the safeguard table's shard rows: the group,
// with few lease clients beside it.
func shardRow(c *config) {
	groupShape(c)
	c.workers = max(c.workers, 3)
	c.shards = max(c.shards, 2)
	c.clients = 3
}
