//go:build unix

package file_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/file"
)

// dotdotLayout makes base/real/sub and a symbolic link base/link ->
// real/sub, so that the kernel reads base/link/.. as base/real while the
// text of the path says base.
func dotdotLayout(t *testing.T) (base string) {
	t.Helper()
	base = t.TempDir()
	if err := os.MkdirAll(filepath.Join(base, "real", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("real", "sub"), filepath.Join(base, "link")); err != nil {
		t.Fatal(err)
	}
	return base
}

// A file URL names its directory as it is: one with ".." (or "." or
// "//") is refused, naming the segment, and nothing is created
// (file:///d/bad/../x left a stray d/bad).
func TestURLWithDotDotIsRefused(t *testing.T) {
	base := t.TempDir()
	for _, u := range []string{"/bad/../x", "/link/../lease", "/./k", "//k", "/a%2Fb/k"} {
		_, _, err := providers.Open(t.Context(), "file://"+base+u)
		if !errors.Is(err, providers.ErrBadURL) {
			t.Errorf("open file://%s%s: %v, want ErrBadURL", base, u, err)
		}
	}
	if entries, _ := os.ReadDir(base); len(entries) != 0 {
		t.Errorf("refused URLs left %v in %s", entries, base)
	}
}

// A ".." after a symbolic link in a root given to New means what it means
// to the kernel: the parent of the link's target, not the link's own
// directory. Both spellings name one object, and two clients through them
// exclude each other.
func TestDotDotAfterSymlinkIsTheKernels(t *testing.T) {
	ctx := t.Context()
	base := dotdotLayout(t)
	viaLink, err := file.New(base + "/link/..")
	if err != nil {
		t.Fatal(err)
	}
	defer viaLink.Close()
	direct, _, err := providers.Open(ctx, "file://"+base+"/real/lease")
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()

	opts := func(holder string) objlease.Options {
		return objlease.Options{TTL: 30 * time.Second, Holder: holder}
	}
	a, err := objlease.New(viaLink, "lease", opts("a"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := objlease.New(direct, "lease", opts("b"))
	if err != nil {
		t.Fatal(err)
	}
	la, err := a.TryAcquire(ctx)
	if err != nil {
		t.Fatalf("acquire through %s/link/../lease: %v", base, err)
	}
	defer la.Release(ctx)
	var held *objlease.Error
	if lb, err := b.TryAcquire(ctx); !errors.Is(err, objlease.ErrHeld) || !errors.As(err, &held) {
		if err == nil {
			lb.Release(ctx)
		}
		t.Fatalf("acquire through %s/real/lease while a holds it through link/..: %v, want held by a (two holders)", base, err)
	} else if held.Record.Holder != "a" {
		t.Errorf("held by %q, want a", held.Record.Holder)
	}
	if _, err := os.Stat(filepath.Join(base, "real", "lease")); err != nil {
		t.Errorf("the record is not where the kernel puts link/../lease: %v", err)
	}
	for _, stray := range []string{"lease", ".objlease-attrs.lease", ".objlease-lock.lease"} {
		if _, err := os.Lstat(filepath.Join(base, stray)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists in the link's own directory (%v): the URL's text was resolved, not the kernel's path", stray, err)
		}
	}
}

// New takes a root the same way: the kernel's meaning of "..".
func TestNewRootWithDotDotAfterSymlink(t *testing.T) {
	ctx := t.Context()
	base := dotdotLayout(t)
	s, err := file.New(base + "/link/..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, "k", []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(base, "real", "k")); err != nil || string(b) != "x" {
		t.Errorf("read %s/real/k: %q, %v", base, b, err)
	}
}

// A symbolic link to a file not yet written, whose target climbs with ".."
// out of another link, is the file the kernel would create through it:
// writes through the link and through that file's own path exclude each
// other.
func TestSymlinkTargetWithDotDotExcludes(t *testing.T) {
	ctx := t.Context()
	s, dir := newStore(t)
	if err := os.MkdirAll(filepath.Join(dir, "real", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "links"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("real", "sub"), filepath.Join(dir, "sublink")); err != nil {
		t.Fatal(err)
	}
	// links/k -> ../sublink/../k: the kernel's dir/real/k, the text's dir/k.
	if err := os.Symlink("../sublink/../k", filepath.Join(dir, "links", "k")); err != nil {
		t.Fatal(err)
	}
	if got, want := file.LockFile(s, "links/k"), file.LockFile(s, "real/k"); got != want {
		t.Errorf("lock for links/k is %s, for real/k %s: one file, two locks", got, want)
	}
	if _, err := s.Create(ctx, "links/k", []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, "real/k", []byte("y"), nil); !errors.Is(err, providers.ErrPrecondition) {
		t.Errorf("create real/k after creating it through links/k: %v, want ErrPrecondition", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "real", "k")); err != nil || string(b) != "x" {
		t.Errorf("read real/k: %q, %v", b, err)
	}
}
