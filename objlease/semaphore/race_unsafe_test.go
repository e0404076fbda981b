//go:build objlease_unsafe

package semaphore_test

import (
	"sync/atomic"
	"testing"

	"github.com/objlease/objlease/internal/safeguards"
	"github.com/objlease/objlease/providers/mem"
)

// The checker sees what goes wrong when a safety measure of the lease
// protocol is off, through the semaphore too.
func TestManyContendersCheckerCatches(t *testing.T) {
	for _, c := range []struct {
		name    string
		sw      *atomic.Bool
		workers int
	}{
		// Lost writes taken for landed: two holders on one slot.
		{"NonceCheck", &safeguards.NonceCheck, 5},
		// Release deletes the record: the next process to take the slot,
		// remembering no tokens, starts again at 1. As many workers as
		// slots, so that no contender that remembers is waiting.
		{"KeepRecordOnRelease", &safeguards.KeepRecordOnRelease, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.sw.Store(false)
			defer c.sw.Store(true)
			chk, _ := race(t, faultyStore(t, mem.NewDriver(), 1), c.workers, 3, 300, 1)
			v := chk.violations()
			if len(v) == 0 {
				t.Fatalf("%s off: no violation found", c.name)
			}
			t.Logf("%s off: %d violations, first: %s", c.name, len(v), v[0])
		})
	}
}
