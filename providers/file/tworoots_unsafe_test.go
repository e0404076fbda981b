//go:build objlease_unsafe

package file_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/objlease/objlease/internal/safeguards"
)

// With the PathLock safeguard off (a lock per store root, as earlier
// releases had), the race above finds two winners: the test can tell.
func TestTwoRootsWithoutPathLock(t *testing.T) {
	safeguards.PathLock.Store(false)
	defer safeguards.PathLock.Store(true)
	outer, inner, _ := twoRoots(t)
	ctx := t.Context()
	for r := range 200 {
		key := fmt.Sprintf("lease-%d", r)
		start := make(chan struct{})
		var wg sync.WaitGroup
		var wins atomic.Int32
		for _, p := range []path{{outer, "x/" + key}, {inner, key}} {
			wg.Go(func() {
				<-start
				if _, err := p.s.Create(ctx, p.key, []byte(p.key), nil); err == nil {
					wins.Add(1)
				}
			})
		}
		close(start)
		wg.Wait()
		if wins.Load() == 2 {
			t.Logf("round %d: both creates succeeded", r)
			return
		}
	}
	t.Fatal("200 rounds without two winners: the safeguard switch no longer restores the per-root lock")
}
