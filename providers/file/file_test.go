package file_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/file"
)

func newStore(t *testing.T) (*providers.Bucket, string) {
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
		".objlease-attrs.obj", "d/.objlease-lock.obj", "d/.objlease-pending.obj", "d/.objlease-attrs-new.obj",
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

// Files put in the tree by other tools are objects: plain files with a
// version derived from their content and modification time, and no
// metadata. Create refuses them, Replace with their version overwrites
// them, and none of them makes a listing fail.
func TestForeignFiles(t *testing.T) {
	s, dir := newStore(t)
	ctx := t.Context()
	files := map[string]string{
		"not-ours":      "hello world\n",
		"empty":         "",
		"bad-json":      "objlease-object v1\n{not json\n",
		"no-newline":    "objlease-object v1\n{\"version\":\"v\"",
		"short-header":  "objlease-object v1\n{\"version\":\"v\",\"size\":9}\nabc",
		"sub/binary":    "\x00\xff\xfe",
		"sub/deep/note": "note",
	}
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Create(ctx, "ours", []byte("mine"), map[string]string{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	page, err := s.List(ctx, "", "", 100)
	if err != nil {
		t.Fatalf("list over foreign files: %v", err)
	}
	if len(page.Objects) != len(files)+1 {
		t.Errorf("list: %d objects, want %d: %+v", len(page.Objects), len(files)+1, page.Objects)
	}
	for name, content := range files {
		o, err := s.Get(ctx, name, 0)
		if err != nil {
			t.Errorf("get %q: %v", name, err)
			continue
		}
		if string(o.Data) != content || o.Version == "" || len(o.Metadata) != 0 || o.Size != int64(len(content)) {
			t.Errorf("get %q: %q version %q metadata %v size %d, want the file's bytes, a version, no metadata", name, o.Data, o.Version, o.Metadata, o.Size)
		}
		if _, err := s.Create(ctx, name, []byte("x"), nil); !errors.Is(err, providers.ErrPrecondition) {
			t.Errorf("create over foreign %q: %v, want ErrPrecondition", name, err)
		}
		if _, err := s.Replace(ctx, name, []byte("x"), nil, "wrong"); !errors.Is(err, providers.ErrPrecondition) {
			t.Errorf("replace of foreign %q with a wrong version: %v, want ErrPrecondition", name, err)
		}
	}

	// The version follows the content and the modification time.
	p := filepath.Join(dir, "not-ours")
	v1 := stat(t, s, "not-ours").Version
	if v := stat(t, s, "not-ours").Version; v != v1 {
		t.Errorf("version of an unchanged file changed: %s, then %s", v1, v)
	}
	if err := os.Chtimes(p, time.Time{}, time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	v2 := stat(t, s, "not-ours").Version
	if v2 == v1 {
		t.Errorf("version unchanged after the file's mtime changed")
	}
	mt := time.Now().Add(-time.Hour)
	for i, content := range []string{"hello world!", "hello worle\n"} {
		os.WriteFile(p, []byte(content), 0o644)
		os.Chtimes(p, time.Time{}, mt)
		if v := stat(t, s, "not-ours").Version; v == v2 {
			t.Errorf("rewrite %d with the same mtime: version unchanged", i)
		}
	}
	v3 := stat(t, s, "not-ours").Version
	if _, err := s.Replace(ctx, "not-ours", []byte("now ours"), map[string]string{"a": "b"}, v3); err != nil {
		t.Fatalf("replace of a foreign file with its version: %v", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "now ours" {
		t.Errorf("file after replace holds %q", b)
	}
	if a := stat(t, s, "not-ours"); a.Metadata["a"] != "b" {
		t.Errorf("metadata after replace: %v", a.Metadata)
	}
}

func stat(t *testing.T, s *providers.Bucket, key string) *providers.Attrs {
	t.Helper()
	a, err := s.Stat(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// The file at an object's path holds exactly the bytes written; version and
// metadata live in a sidecar beside it.
func TestPlainFiles(t *testing.T) {
	s, dir := newStore(t)
	ctx := t.Context()
	data := []byte("objlease-object v1\nlooks like a header but is data\n")
	res, err := s.Create(ctx, "out/part-0", data, map[string]string{"token": "7"})
	if err != nil {
		t.Fatal(err)
	}
	check := func(want []byte) {
		t.Helper()
		if b, err := os.ReadFile(filepath.Join(dir, "out", "part-0")); err != nil || !bytes.Equal(b, want) {
			t.Errorf("file holds %q, %v; want exactly %q", b, err, want)
		}
	}
	check(data)
	side, err := os.ReadFile(filepath.Join(dir, "out", ".objlease-attrs.part-0"))
	if err != nil || !bytes.Contains(side, []byte(res.Version)) {
		t.Errorf("sidecar %q, %v; want it to name version %s", side, err, res.Version)
	}
	o, err := s.Get(ctx, "out/part-0", 0)
	if err != nil || !bytes.Equal(o.Data, data) || o.Version != res.Version || o.Metadata["token"] != "7" {
		t.Fatalf("get: %+v, %v", o, err)
	}
	res2, err := s.Replace(ctx, "out/part-0", []byte("second"), nil, res.Version)
	if err != nil {
		t.Fatal(err)
	}
	check([]byte("second"))
	if err := s.Delete(ctx, "out/part-0", res2.Version); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "out")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("directory after deleting its only object: %v, want it gone with the sidecar and lock", err)
	}

	// A name so long that the store's own names beside it are hashed.
	long := "d/" + strings.Repeat("n", 255)
	res, err = s.Create(ctx, long, []byte("long"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if o, err := s.Get(ctx, long, 0); err != nil || string(o.Data) != "long" || o.Version != res.Version {
		t.Errorf("get of a 255-byte name: %+v, %v", o, err)
	}
	if err := s.Delete(ctx, long, res.Version); err != nil {
		t.Fatal(err)
	}
}

// Objects written by earlier releases, with a header before the bytes, are
// read as the objects they were; their next write stores them plainly.
func TestOldFormat(t *testing.T) {
	s, dir := newStore(t)
	ctx := t.Context()
	content := "objlease-object v1\n" + `{"version":"OLDVERSION","size":5,"modified":"2026-01-02T03:04:05Z","metadata":{"k":"v"}}` + "\nhello"
	p := filepath.Join(dir, "jobs", "nightly")
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	o, err := s.Get(ctx, "jobs/nightly", 0)
	if err != nil {
		t.Fatal(err)
	}
	if string(o.Data) != "hello" || o.Version != "OLDVERSION" || o.Metadata["k"] != "v" || o.LastModified.Year() != 2026 {
		t.Fatalf("old-format object read as %+v", o)
	}
	if _, err := s.Replace(ctx, "jobs/nightly", []byte("new"), nil, "OLDVERSION"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "new" {
		t.Errorf("after its next write the file holds %q, want the plain bytes", b)
	}
}

// Sidecars, lock files, pending files of a crashed writer are never
// objects, and a damaged sidecar leaves its data file a plain file.
func TestHiddenFiles(t *testing.T) {
	s, dir := newStore(t)
	ctx := t.Context()
	if _, err := s.Create(ctx, "d/obj", []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{".objlease-attrs.obj", ".objlease-lock.obj"} {
		if _, err := os.Stat(filepath.Join(dir, "d", name)); err != nil {
			t.Errorf("%s beside the object: %v", name, err)
		}
	}
	for _, name := range []string{".objlease-tmp-crashed", ".objlease-pending.obj", ".objlease-attrs-new.obj", ".objlease-pending.other"} {
		if err := os.WriteFile(filepath.Join(dir, "d", name), []byte("half"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	page, err := s.List(ctx, "", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Objects) != 1 || page.Objects[0].Key != "d/obj" {
		t.Errorf("list: %+v, want only d/obj", page.Objects)
	}
	if o, err := s.Get(ctx, "d/obj", 0); err != nil || string(o.Data) != "x" {
		t.Errorf("get beside stale pending files: %+v, %v", o, err)
	}

	if err := os.WriteFile(filepath.Join(dir, "d", ".objlease-attrs.obj"), []byte("{damaged"), 0o644); err != nil {
		t.Fatal(err)
	}
	o, err := s.Get(ctx, "d/obj", 0)
	if err != nil || string(o.Data) != "x" || len(o.Metadata) != 0 {
		t.Errorf("get with a damaged sidecar: %+v, %v; want the data as a plain file", o, err)
	}
	if page, err := s.List(ctx, "", "", 100); err != nil || len(page.Objects) != 1 {
		t.Errorf("list with a damaged sidecar: %+v, %v", page, err)
	}
}

// One conditional write: three syncs (pending data, sidecar, directory).
func BenchmarkReplace(b *testing.B) {
	s, err := file.New(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	res, err := s.Create(b.Context(), "k", []byte("x"), nil)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if res, err = s.Replace(b.Context(), "k", []byte("y"), nil, res.Version); err != nil {
			b.Fatal(err)
		}
	}
}

// One lock-free read of an object the store wrote.
func BenchmarkGet(b *testing.B) {
	s, err := file.New(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Create(b.Context(), "k", []byte("x"), nil); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := s.Get(b.Context(), "k", 0); err != nil {
			b.Fatal(err)
		}
	}
}

// Opening a URL and reading through it write nothing: a directory that
// does not exist reads as empty (as it would be once a write created it)
// and is still missing afterwards. The first write creates it.
func TestReadsOfAMissingDirectoryCreateNothing(t *testing.T) {
	ctx := t.Context()
	top := filepath.Join(t.TempDir(), "typo")
	root := filepath.Join(top, "leases")
	st, key, err := providers.Open(ctx, "file://"+root+"/nightly")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Get(ctx, key, 0); !errors.Is(err, providers.ErrNotFound) {
		t.Errorf("get: %v, want ErrNotFound", err)
	}
	if _, err := st.Stat(ctx, key); !errors.Is(err, providers.ErrNotFound) {
		t.Errorf("stat: %v, want ErrNotFound", err)
	}
	if page, err := st.List(ctx, "", "", 10); err != nil || len(page.Objects) != 0 {
		t.Errorf("list: %+v, %v, want nothing", page, err)
	}
	if err := st.Delete(ctx, key, "v1"); !errors.Is(err, providers.ErrPrecondition) {
		t.Errorf("delete: %v, want ErrPrecondition", err)
	}
	if _, err := os.Lstat(top); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("after opening and reading %s: %v, want it still missing", root, err)
	}
	if _, err := st.Create(ctx, key, []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "nightly")); err != nil || string(b) != "x" {
		t.Errorf("after the first write: %q, %v", b, err)
	}
}
