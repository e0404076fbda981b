package sim

import (
	"math/rand/v2"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/providers"
)

// newOn is objlease.New on a session of its own with so: the test's
// clock, logger or seed.
func newOn(store providers.Store, key string, so objlease.SessionOptions, opts objlease.Options) (*objlease.Client, error) {
	sess, err := objlease.NewSession(store, so)
	if err != nil {
		return nil, err
	}
	return sess.Client(key, opts)
}

// session are the options of a session of p's, on its clock, seeded by
// rnd: each of p's clients has a session of its own, as objlease.New gives.
func (p *proc) session(rnd *rand.Rand) objlease.SessionOptions {
	return objlease.SessionOptions{Clock: p.clock.lib, Rand: rnd}
}
