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
func twoRoots(t *testing.T) (outer, inner *providers.Bucket, dir string) {
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
	raceOneFile(t, func(r int) (a, b path) {
		key := fmt.Sprintf("lease-%d", r)
		return path{outer, "x/" + key}, path{inner, key}
	})
}

// path is one way to name a file: a store and a key.
type path struct {
	s   *providers.Bucket
	key string
}

// raceOneFile races Create, then Replace from one version, through the two
// names of one file that names(round) returns.
func raceOneFile(t *testing.T, names func(round int) (a, b path)) {
	ctx := t.Context()
	race := func(ops ...func() error) (wins int, errs []error) {
		start := make(chan struct{})
		var wg sync.WaitGroup
		var mu sync.Mutex
		for _, f := range ops {
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
		a, b := names(r)
		create := func(p path) func() error {
			return func() error { _, err := p.s.Create(ctx, p.key, []byte(p.key), nil); return err }
		}
		wins, errs := race(create(a), create(b))
		if len(errs) > 0 || wins != 1 {
			t.Fatalf("round %d: %d of 2 creates of one file as %q and %q succeeded (errors %v)", r, wins, a.key, b.key, errs)
		}
		at, err := a.s.Stat(ctx, a.key)
		if err != nil {
			t.Fatal(err)
		}
		if bt, err := b.s.Stat(ctx, b.key); err != nil || bt.Version != at.Version {
			t.Fatalf("round %d: %q has version %s, %q has %+v (%v): one file, two objects", r, a.key, at.Version, b.key, bt, err)
		}
		replace := func(p path) func() error {
			return func() error { _, err := p.s.Replace(ctx, p.key, []byte(p.key), nil, at.Version); return err }
		}
		wins, errs = race(replace(a), replace(b))
		if len(errs) > 0 || wins != 1 {
			t.Fatalf("round %d: %d of 2 replaces of version %s through %q and %q succeeded (errors %v)", r, wins, at.Version, a.key, b.key, errs)
		}
	}
}
