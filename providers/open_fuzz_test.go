package providers_test

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path"
	"strings"
	"testing"

	"github.com/objlease/objlease/providers"
	_ "github.com/objlease/objlease/providers/file"
	_ "github.com/objlease/objlease/providers/mem"
)

// FuzzOpen: Open never panics; it refuses what it cannot use with an error
// matching ErrBadURL, or naming the directory it could not make; what it
// accepts gives a store that answers for the key without panicking.
//
// Opening a file URL creates nothing, but file URLs are still confined to
// a temporary directory: their path is moved under it, and any path that
// would climb out of it is skipped. Seeds are in testdata/fuzz/FuzzOpen.
func FuzzOpen(f *testing.F) {
	root := f.TempDir()
	f.Fuzz(func(t *testing.T, raw string) {
		ctx := context.Background()
		if u, err := url.Parse(raw); err == nil && u.Scheme == "file" && u.Opaque == "" && strings.HasPrefix(u.Path, "/") {
			confined := path.Clean(root + u.Path)
			if confined != root && !strings.HasPrefix(confined, root+"/") {
				return
			}
			u.Path, u.RawPath = root+u.Path, ""
			raw = u.String()
			defer clearDir(t, root)
		}
		store, key, err := providers.Open(ctx, raw)
		if err != nil {
			if store != nil {
				t.Fatalf("Open(%q) returned a store with error %v", raw, err)
			}
			if !errors.Is(err, providers.ErrBadURL) && !strings.HasPrefix(err.Error(), "file store root") {
				t.Fatalf("Open(%q): %v: neither ErrBadURL nor naming the store root", raw, err)
			}
			return
		}
		defer store.Close()
		if key == "" {
			return // a bucket or directory
		}
		_, err = store.Stat(ctx, key)
		if !errors.Is(err, providers.ErrNotFound) && !errors.Is(err, providers.ErrInvalidKey) {
			t.Fatalf("Open(%q) gave key %q whose Stat says %v, want not found or invalid key", raw, key, err)
		}
	})
}

// clearDir empties dir, so that a long fuzzing run does not fill the disk
// with the directories file URLs create.
func clearDir(t *testing.T, dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(dir + "/" + e.Name()); err != nil {
			t.Fatal(err)
		}
	}
}
