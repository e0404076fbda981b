package sim

import (
	"flag"
	"slices"
)

var flagStrict = flag.Bool("sim.strict", false, "excuse nothing: report every violation, gated ones included")

// gate excuses, in the short run only, the violations a known fault of
// the library causes in runs of the shape that exposes it, until its fix
// is in the tree: then the gate is deleted. The long run, and the short
// one with -sim.strict, excuse nothing.
type gate struct {
	fault string // what is wrong, and the safeguard switch of its fix if it has one
	kinds []string
	shape func(config) bool
}

// gates lists the faults whose fixes are not in this tree yet: none now.
// A fault the simulation finds before its fix lands gets an entry here
// (what is wrong, the violation kinds, the run shapes that show it).
var gates []gate

// excused returns the violations no gate excuses, and the faults of the
// gates that excused the others.
func excused(cfg config, vs []violation) (left []violation, by []string) {
	if *flagStrict {
		return vs, nil
	}
	for _, v := range vs {
		i := slices.IndexFunc(gates, func(g gate) bool { return g.shape(cfg) && slices.Contains(g.kinds, v.kind) })
		if i < 0 {
			left = append(left, v)
		} else if !slices.Contains(by, gates[i].fault) {
			by = append(by, gates[i].fault)
		}
	}
	return left, by
}
