//go:build objlease_unsafe

package sim

import (
	"slices"
	"strings"
	"testing"
)

// jobCheckerRows is the job simulation's safeguards-off table: a switch of
// internal/safeguards that a job under a lease needs, and the violations
// that show it.
var jobCheckerRows = []jobCheckerRow{
	{"JudgeByValidity", []string{vFinishedStopped, vStoppedNotLost}, func(*jobConfig) {}},
	{"DeadlineOnRenewal", []string{vHealthyStopped}, func(*jobConfig) {}},
	// A loss the runner sees while the supervisor is stopped: renewals
	// that fail, not a break (which excuses an overlap).
	{"StopTaskDirectly", []string{vCommandsOverlap}, func(c *jobConfig) { c.faults, c.breaks = 3, 0 }},
}

type jobCheckerRow struct {
	off   string
	kinds []string
	shape func(*jobConfig)
}

func (r jobCheckerRow) config(seed uint64) jobConfig {
	c := jobConfigFor(seed)
	r.shape(&c)
	return c
}

// TestJobCheckerFindsViolations: with each safeguard of the job layer off
// in turn, the job simulation finds every violation it prevents within a
// bounded number of seeds, and the seed that found one is clean with the
// safeguard on.
func TestJobCheckerFindsViolations(t *testing.T) {
	for _, tc := range jobCheckerRows {
		t.Run(tc.off, func(t *testing.T) {
			bound := uint64(60)
			if *flagSeeds > 0 {
				bound = uint64(*flagSeeds)
			}
			sw := safeguardSwitch(tc.off)
			sw.Store(false)
			defer sw.Store(true)
			first := map[string]uint64{}
			for seed := *flagFrom; seed < *flagFrom+bound && len(first) < len(tc.kinds); seed++ {
				vs, trace, _ := simulateJobs(t, tc.config(seed))
				for _, v := range vs {
					if _, seen := first[v.kind]; seen || !slices.Contains(tc.kinds, v.kind) {
						continue
					}
					first[v.kind] = seed
					t.Logf("%s found at seed %d: %s\nreplay: go test -tags objlease_unsafe ./objlease/sim/ -run 'TestJobCheckerFindsViolations/%s$' -sim.from=%d -sim.v", v.kind, seed, v.msg, tc.off, seed)
					if *flagV {
						t.Logf("%v\n%s", tc.config(seed), strings.Join(trace, "\n"))
					}
				}
			}
			sw.Store(true)
			for _, kind := range tc.kinds {
				seed, ok := first[kind]
				if !ok {
					t.Errorf("no %q in %d seeds with %s off: the checks cannot see what it prevents", kind, bound, tc.off)
					continue
				}
				if vs, _, _ := simulateJobs(t, tc.config(seed)); slices.ContainsFunc(vs, func(v violation) bool { return v.kind == kind }) {
					t.Errorf("seed %d with %s on still has %q: the violation is not the safeguard's", seed, tc.off, kind)
				}
			}
		})
	}
}
