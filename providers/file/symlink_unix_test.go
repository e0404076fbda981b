//go:build unix

package file_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
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
