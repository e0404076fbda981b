package file_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/file"
)

// twoRoots opens one directory tree twice: at D and at D/x, so that key
// "x/k" of the first and key "k" of the second name the same file.
func twoRoots(t *testing.T) (outer, inner *file.Store, dir string) {
	t.Helper()
	dir = t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	outer, err := file.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	inner, err = file.New(filepath.Join(dir, "x"))
	if err != nil {
		t.Fatal(err)
	}
	return outer, inner, dir
}

// Two stores over one tree, racing on the same file through different
// roots: every Create and every Replace from the same version has exactly
// one winner.
func TestTwoRootsExclude(t *testing.T) {
	outer, inner, _ := twoRoots(t)
	ctx := t.Context()
	race := func(a, b func() error) (wins int, errs []error) {
		start := make(chan struct{})
		var wg sync.WaitGroup
		var mu sync.Mutex
		for _, f := range []func() error{a, b} {
			wg.Go(func() {
				<-start
				err := f()
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					wins++
				case !errors.Is(err, providers.ErrPrecondition):
					errs = append(errs, err)
				}
			})
		}
		close(start)
		wg.Wait()
		return wins, errs
	}
	const rounds = 100
	for r := range rounds {
		key := fmt.Sprintf("lease-%d", r)
		wins, errs := race(
			func() error { _, err := outer.Create(ctx, "x/"+key, []byte("outer"), nil); return err },
			func() error { _, err := inner.Create(ctx, key, []byte("inner"), nil); return err },
		)
		if len(errs) > 0 || wins != 1 {
			t.Fatalf("round %d: %d of 2 creates of one file through two roots succeeded (errors %v)", r, wins, errs)
		}
		a, err := inner.Stat(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		wins, errs = race(
			func() error { _, err := outer.Replace(ctx, "x/"+key, []byte("outer"), nil, a.Version); return err },
			func() error { _, err := inner.Replace(ctx, key, []byte("inner"), nil, a.Version); return err },
		)
		if len(errs) > 0 || wins != 1 {
			t.Fatalf("round %d: %d of 2 replaces of version %s through two roots succeeded (errors %v)", r, wins, a.Version, errs)
		}
	}
}
