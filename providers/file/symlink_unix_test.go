//go:build unix

package file_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/file"
)

// A symbolic link to a file is the file it points at, also before that
// file exists: writes through the link and through the file's own path
// exclude each other.
func TestSymlinkedFileExcludes(t *testing.T) {
	s, dir := newStore(t)
	for _, d := range []string{"links", "real"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	raceOneFile(t, func(r int) (a, b path) {
		key := fmt.Sprintf("lease-%d", r)
		if err := os.Symlink("../real/"+key, filepath.Join(dir, "links", key)); err != nil {
			t.Fatal(err)
		}
		return path{s, "links/" + key}, path{s, "real/" + key}
	})
	if b, err := os.ReadFile(filepath.Join(dir, "links", "lease-0")); err != nil || len(b) == 0 {
		t.Errorf("read through the link after the writes: %q, %v", b, err)
	}
	if fi, err := os.Lstat(filepath.Join(dir, "links", "lease-0")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced by a write: %v, %v", fi, err)
	}
}

// A symbolic link that takes a key out of the store's directory is
// refused, naming the key and where the link leads, and the file out
// there is left as it was: `objlease break --force` through such a link
// used to overwrite it with a lease record.
func TestSymlinkOutOfTheStoreRefused(t *testing.T) {
	parent := t.TempDir()
	root := filepath.Join(parent, "store")
	decoy := filepath.Join(parent, "decoy.txt")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(decoy, []byte("not the store's"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"rel": "../decoy.txt", "abs": decoy, "dir": parent} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	s, err := file.New(root)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, key := range []string{"rel", "abs", "dir/decoy.txt", "dir/new"} {
		_, err := s.Create(ctx, key, []byte("x"), nil)
		check := func(op string, err error) {
			t.Helper()
			if !errors.Is(err, providers.ErrInvalidKey) || !strings.Contains(err.Error(), "outside the store's directory") {
				t.Errorf("%s %q through a link out of the store: %v, want ErrInvalidKey saying so", op, key, err)
			}
		}
		check("create", err)
		_, err = s.Replace(ctx, key, []byte("x"), nil, "v")
		check("replace", err)
		check("delete", s.Delete(ctx, key, "v"))
		_, err = s.Get(ctx, key, 0)
		check("get", err)
	}
	if b, err := os.ReadFile(decoy); err != nil || string(b) != "not the store's" {
		t.Errorf("the file outside the store: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(parent, "new")); !os.IsNotExist(err) {
		t.Errorf("a file was created outside the store: %v", err)
	}
}
