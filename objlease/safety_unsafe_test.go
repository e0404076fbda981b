//go:build objlease_unsafe

package objlease_test

import (
	"sync/atomic"
	"testing"

	"github.com/objlease/objlease/internal/safeguards"
)

// switchOff turns a safeguard off for the rest of the test.
func switchOff(t *testing.T, sw *atomic.Bool) {
	t.Helper()
	sw.Store(false)
	t.Cleanup(func() { sw.Store(true) })
}

// Either measure alone keeps a same-seeded contender's create from being
// taken for one's own: the holder check with nonces from the seed alone,
// unique nonces with a nonce match taken as proof.
func TestSameSeedRaceEachMeasureAlone(t *testing.T) {
	for _, tc := range []struct {
		name string
		off  *atomic.Bool
	}{
		{"holder check alone", &safeguards.UniqueNonces},
		{"unique nonces alone", &safeguards.OwnWriteCheck},
	} {
		t.Run(tc.name, func(t *testing.T) {
			switchOff(t, tc.off)
			sameSeedRace(t)
		})
	}
}
