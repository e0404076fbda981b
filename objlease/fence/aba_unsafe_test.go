//go:build objlease_unsafe

package fence_test

import (
	"testing"

	"github.com/objlease/objlease/internal/safeguards"
	"github.com/objlease/objlease/objlease/fence/fencetest"
)

// TestTombstoneRaceRepeatsWithEmptyTombstones shows that the model
// reproduces the repeat StaleWriterPausedAcrossDelete guards against: with
// empty tombstones both tombstones have the MD5 of nothing as their version,
// and the paused writer's token 6 replaces token 7.
func TestTombstoneRaceRepeatsWithEmptyTombstones(t *testing.T) {
	safeguards.UniqueTombstones.Store(false)
	defer safeguards.UniqueTombstones.Store(true)
	for _, op := range []string{"put", "delete"} {
		r := fencetest.TombstoneRace(t, newMD5Store(), "x", op)
		if !r.Repeated || r.Err != nil || r.Token != 6 {
			t.Errorf("%s with empty tombstones: %+v; want the version repeated and token 6", op, r)
		}
	}
}
