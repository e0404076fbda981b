//go:build objlease_unsafe

package shard_test

import (
	"testing"

	"github.com/objlease/objlease/internal/safeguards"
)

// With the safeguard of TestWorkEndsBeforeNextOwnerStarts off (release
// first, then wait for Work) the checker must see the overlap.
func TestWorkEndsBeforeNextOwnerStartsCheckerCatches(t *testing.T) {
	safeguards.CallbackBeforeRelease.Store(false)
	defer safeguards.CallbackBeforeRelease.Store(true)
	// A few tries, of which one must show the overlap.
	for try := 0; try < 5; try++ {
		if len(handover(t, true)) > 0 {
			return
		}
	}
	t.Fatal("with the handover safeguard off the checker saw no overlap in 5 tries: the test cannot fail")
}
