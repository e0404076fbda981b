package file_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/file"
)

func newStore(t *testing.T) (*file.Store, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := file.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s, dir
}

func TestNew(t *testing.T) {
	dir := t.TempDir()
	if _, err := file.New(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("New(missing dir) = %v, want ErrNotExist", err)
	}
	f := filepath.Join(dir, "plain")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := file.New(f); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("New(file) = %v, want a 'not a directory' error", err)
	}
}

func TestOpenURL(t *testing.T) {
	ctx := t.Context()
	root := filepath.Join(t.TempDir(), "new dir", ".leases")
	st, key, err := providers.Open(ctx, "file://"+filepath.ToSlash(root)+"/nightly")
	if err != nil {
		t.Fatal(err)
	}
	if key != "nightly" {
		t.Errorf("key = %q, want nightly", key)
	}
	var fs *file.Store
	if !st.As(&fs) {
		t.Fatal("As(**file.Store) = false")
	}
	if _, err := st.Create(ctx, key, []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "nightly")); err != nil {
		t.Errorf("object file not where the URL said: %v", err)
	}

	st, key, err = providers.Open(ctx, "file://"+filepath.ToSlash(root)+"/")
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		t.Errorf("key = %q, want empty for a trailing slash", key)
	}
	page, err := st.List(ctx, key, "", 10)
	if err != nil || len(page.Objects) != 1 || page.Objects[0].Key != "nightly" {
		t.Errorf("list through directory URL: %+v, %v", page, err)
	}

	for _, bad := range []string{"file://relative/dir/key", "file:relative/key", "file:///abs/key?x=1", "file://"} {
		if _, _, err := providers.Open(ctx, bad); !errors.Is(err, providers.ErrBadURL) {
			t.Errorf("Open(%q) = %v, want ErrBadURL", bad, err)
		}
	}
}

func TestInvalidKeys(t *testing.T) {
	s, _ := newStore(t)
	ctx := t.Context()
	for _, key := range []string{
		"", "/abs", "a//b", "a/", "..", "a/../b", "./a", "a\x00b",
		".objlease-locks/x", "d/.objlease-tmp-x", strings.Repeat("x", 256),
	} {
		_, err := s.Create(ctx, key, []byte("x"), nil)
		if !errors.Is(err, providers.ErrInvalidKey) {
			t.Errorf("create %q: %v, want ErrInvalidKey", key, err)
		}
		if _, err := s.Get(ctx, key, 0); !errors.Is(err, providers.ErrInvalidKey) {
			t.Errorf("get %q: %v, want ErrInvalidKey", key, err)
		}
	}
	if _, err := s.List(ctx, "a/../", "", 10); !errors.Is(err, providers.ErrInvalidKey) {
		t.Errorf("list a/../: %v, want ErrInvalidKey", err)
	}
}

// A key cannot be an object and a directory at once; deleting the last key
// below a directory frees the name again.
func TestObjectDirectoryClash(t *testing.T) {
	s, _ := newStore(t)
	ctx := t.Context()
	ab, err := s.Create(ctx, "a/b/c", []byte("x"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, "a/b", []byte("x"), nil); !errors.Is(err, providers.ErrInvalidKey) {
		t.Errorf("create a/b over directory: %v, want ErrInvalidKey", err)
	}
	if _, err := s.Get(ctx, "a/b", 0); !errors.Is(err, providers.ErrNotFound) {
		t.Errorf("get of a directory: %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, "a/b/c", ab.Version); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, "a", []byte("x"), nil); err != nil {
		t.Fatalf("create a after its directory emptied: %v", err)
	}
	if _, err := s.Create(ctx, "a/b", []byte("x"), nil); !errors.Is(err, providers.ErrInvalidKey) {
		t.Errorf("create a/b below object a: %v, want ErrInvalidKey", err)
	}
	if _, err := s.Stat(ctx, "a/b"); !errors.Is(err, providers.ErrNotFound) {
		t.Errorf("stat below an object: %v, want ErrNotFound", err)
	}
}

func TestCorruptFiles(t *testing.T) {
	s, dir := newStore(t)
	ctx := t.Context()
	res, err := s.Create(ctx, "good", []byte("0123456789"), nil)
	if err != nil {
		t.Fatal(err)
	}
	whole, err := os.ReadFile(filepath.Join(dir, "good"))
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{
		"not-ours":   "hello world\n",
		"empty":      "",
		"bad-json":   "objlease-object v1\n{not json\n",
		"no-newline": "objlease-object v1\n{\"version\":\"v\"",
		"truncated":  string(whole[:len(whole)-3]),
		"too-long":   string(whole) + "extra",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := s.Get(ctx, name, 0)
		checkCorrupt(t, err, "get", name)
		_, err = s.Stat(ctx, name)
		checkCorrupt(t, err, "stat", name)
		_, err = s.Replace(ctx, name, []byte("x"), nil, res.Version)
		checkCorrupt(t, err, "replace", name)
		_, err = s.List(ctx, name, "", 10)
		checkCorrupt(t, err, "list", name)
		os.Remove(filepath.Join(dir, name))
	}
}

func checkCorrupt(t *testing.T, err error, op, key string) {
	t.Helper()
	var pe *providers.Error
	if !errors.Is(err, file.ErrCorrupt) || !errors.As(err, &pe) || pe.Key != key || pe.Op != op {
		t.Errorf("%s %q: %v, want ErrCorrupt naming the key", op, key, err)
	}
}

// Temporary files of a crashed writer, and the lock files, are never objects.
func TestHiddenFiles(t *testing.T) {
	s, dir := newStore(t)
	ctx := t.Context()
	if _, err := s.Create(ctx, "d/obj", []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "d", ".objlease-tmp-crashed"), []byte("half"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".objlease-locks")); err != nil {
		t.Fatalf("lock directory: %v", err)
	}
	page, err := s.List(ctx, "", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Objects) != 1 || page.Objects[0].Key != "d/obj" {
		t.Errorf("list: %+v, want only d/obj", page.Objects)
	}
}
