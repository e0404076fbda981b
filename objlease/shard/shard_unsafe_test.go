//go:build objlease_unsafe

package shard_test

import (
	"testing"
	"time"

	"github.com/objlease/objlease/internal/safeguards"
	"github.com/objlease/objlease/providers/mem"
)

// With the safeguard of TestWorkEndsBeforeNextOwnerStarts off (release
// first, then wait for Work) the checker must see the overlap.
func TestWorkEndsBeforeNextOwnerStartsCheckerCatches(t *testing.T) {
	safeguards.CallbackBeforeRelease.Store(false)
	defer safeguards.CallbackBeforeRelease.Store(true)
	// Work lingers for real time while the group moves in fake time, so
	// one handover may slip through unseen on a busy machine: a few
	// tries, of which one must show the overlap.
	for try := 0; try < 5; try++ {
		g := newGroup(t, mem.New(), 6)
		g.overlapExpected = true
		g.chk.linger = 20 * time.Millisecond
		g.join("w1")
		g.drive("w1 owns all", func() bool { return g.balanced("w1") })
		g.join("w2")
		g.drive("balanced", func() bool { return g.balanced("w1", "w2") })
		g.quiet(2 * time.Second)
		if len(g.chk.overlaps()) > 0 {
			return
		}
	}
	t.Fatal("with the handover safeguard off the checker saw no overlap in 5 tries: the test cannot fail")
}
