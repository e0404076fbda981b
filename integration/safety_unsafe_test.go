//go:build objlease_unsafe

package integration

import (
	"testing"

	"github.com/objlease/objlease/internal/safeguards"
	"github.com/objlease/objlease/objlease/fence/fencetest"
)

// TestS3FenceTombstoneABAEmptyTombstones: with the UniqueTombstones
// safeguard off, the race of TestS3FenceTombstoneABA repeats the ETag and
// the paused writer's token 6 replaces token 7. Not run on a real bucket.
func TestS3FenceTombstoneABAEmptyTombstones(t *testing.T) {
	target := newS3Target(t)
	if target.real() {
		t.Skip("the unsafe mode is not exercised on a real bucket")
	}
	store := target.open(t)
	target.cleanup(t, store)
	safeguards.UniqueTombstones.Store(false)
	defer safeguards.UniqueTombstones.Store(true)
	for _, op := range []string{"put", "delete"} {
		t.Run(op, func(t *testing.T) {
			r := fencetest.TombstoneRace(t, store, target.prefix+op+"-empty", op)
			if !r.Repeated || r.Err != nil || r.Token != 6 {
				t.Fatalf("empty tombstones: %+v; want the ETag repeated and token 6 (the repeat this server shows)", r)
			}
		})
	}
}
