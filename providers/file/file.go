// Package file is a store in a local directory: the directory is the bucket
// and a key such as "jobs/nightly" is the file jobs/nightly below it.
//
// Conditional writes are atomic across processes on one machine: a writer
// holds an exclusive flock on a per-key lock file, writes a temporary file,
// syncs it and renames it over the object, so readers only ever see whole
// objects. Each object file carries its version and metadata in a header
// before the bytes, so all three are read together.
//
// As in any file system, a key cannot be both an object and a directory:
// while "a/b" exists, creating "a" fails with providers.ErrInvalidKey, and
// the other way round. Path segments starting with ".objlease" are reserved
// for the store's lock and temporary files.
//
// Importing the package registers the URL scheme "file": file:///abs/dir/name
// opens the directory /abs/dir (creating it if missing) and points at key
// "name"; file:///abs/dir/ points at the whole directory (key "").
package file

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/objlease/objlease/providers"
)

// ErrCorrupt reports an object file that cannot be decoded. The store never
// writes one (objects appear only by rename once complete), so it means the
// file was changed by something else.
var ErrCorrupt = errors.New("corrupt object file")

const (
	reserved  = ".objlease" // prefix of every name the store keeps for itself
	lockDir   = reserved + "-locks"
	tmpPrefix = reserved + "-tmp-"
	magic     = "objlease-object v1\n"
	maxHeader = 1 << 20 // bounds what a damaged file can make a reader allocate
)

// header is the JSON line that follows the magic line in an object file.
type header struct {
	Version  string            `json:"version"`
	Size     int64             `json:"size"`
	Modified time.Time         `json:"modified"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

func init() { providers.Register("file", open) }

// Store keeps objects in a directory. It is safe for concurrent use by
// goroutines and by processes sharing the directory.
type Store struct {
	root string // absolute
}

// New returns a store rooted at the existing directory root.
func New(root string) (*Store, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("file store root %q: %w", root, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("file store root: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("file store root %q is not a directory", abs)
	}
	return &Store{root: abs}, nil
}

func open(_ context.Context, u *url.URL) (providers.Store, string, error) {
	const want = "want file:///absolute/dir/key or file:///absolute/dir/"
	switch {
	case u.Opaque != "" || (u.Host != "" && u.Host != "localhost"):
		return nil, "", fmt.Errorf("%w %q: relative paths are not accepted; %s", providers.ErrBadURL, u.Redacted(), want)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return nil, "", fmt.Errorf("%w %q: file URLs take no user, query or fragment; %s", providers.ErrBadURL, u.Redacted(), want)
	case !strings.HasPrefix(u.Path, "/"):
		return nil, "", fmt.Errorf("%w %q: no path; %s", providers.ErrBadURL, u.Redacted(), want)
	}
	root, key := path.Split(u.Path)
	// Created here so that file://$PWD/.leases/nightly works the first time.
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, "", fmt.Errorf("file store root: %w", err)
	}
	s, err := New(root)
	if err != nil {
		return nil, "", err
	}
	return s, key, nil
}

// checkKey says what is wrong with key, or "" if nothing is.
func checkKey(key string) string {
	switch {
	case key == "":
		return "empty key"
	case strings.HasPrefix(key, "/"):
		return "key starts with '/'"
	case strings.ContainsRune(key, 0):
		return "key contains a NUL byte"
	}
	for seg := range strings.SplitSeq(key, "/") {
		switch {
		case seg == "":
			return "key has an empty path segment"
		case seg == "." || seg == "..":
			return fmt.Sprintf("key has a %q path segment", seg)
		case strings.HasPrefix(seg, reserved):
			return fmt.Sprintf("path segments starting with %q are reserved for the store", reserved)
		case len(seg) > 255:
			return "key has a path segment longer than 255 bytes"
		}
	}
	return ""
}

// path returns the file that holds key.
func (s *Store) path(op, key string) (string, error) {
	if why := checkKey(key); why != "" {
		return "", providers.Wrap(op, key, fmt.Errorf("%w: %s", providers.ErrInvalidKey, why), nil)
	}
	return filepath.Join(s.root, filepath.FromSlash(key)), nil
}

// absent reports whether err from opening an object's file means there is
// no object (a directory or a file standing where a directory should be
// is not an object either).
func absent(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR)
}

// readObject opens the object file at p and decodes its header. It returns
// the open file and the offset of the bytes; the caller closes the file.
func readObject(op, key, p string) (*os.File, header, int64, error) {
	var h header
	var fi os.FileInfo
	f, err := os.Open(p)
	if err == nil {
		if fi, err = f.Stat(); err == nil && fi.IsDir() {
			err = syscall.EISDIR
		}
		if err != nil {
			f.Close()
		}
	}
	switch {
	case absent(err):
		return nil, h, 0, providers.Wrap(op, key, providers.ErrNotFound, nil)
	case err != nil:
		return nil, h, 0, &providers.Error{Op: op, Key: key, Err: err}
	}
	corrupt := func(format string, args ...any) (*os.File, header, int64, error) {
		f.Close()
		why := fmt.Sprintf(format, args...)
		return nil, header{}, 0, &providers.Error{Op: op, Key: key, Err: fmt.Errorf("%w %s: %s", ErrCorrupt, p, why)}
	}
	r := bufio.NewReader(io.LimitReader(f, int64(len(magic))+maxHeader))
	m := make([]byte, len(magic))
	if _, err := io.ReadFull(r, m); err != nil || string(m) != magic {
		return corrupt("not an objlease object (bad magic)")
	}
	line, err := r.ReadBytes('\n')
	if err != nil {
		return corrupt("header not terminated within %d bytes", maxHeader)
	}
	if err := json.Unmarshal(line, &h); err != nil {
		return corrupt("bad header: %v", err)
	}
	off := int64(len(magic) + len(line))
	if h.Version == "" || h.Size < 0 || fi.Size()-off != h.Size {
		return corrupt("header says version %q and %d bytes, file holds %d", h.Version, h.Size, fi.Size()-off)
	}
	return f, h, off, nil
}

// stat reads the header of the object at p.
func stat(op, key, p string) (header, error) {
	f, h, _, err := readObject(op, key, p)
	if err != nil {
		return h, err
	}
	f.Close()
	return h, nil
}

func attrs(key string, h header) providers.Attrs {
	return providers.Attrs{
		Key:          key,
		Version:      h.Version,
		Size:         h.Size,
		Metadata:     h.Metadata,
		LastModified: h.Modified,
		StoreTime:    time.Now(),
	}
}

// Get implements providers.Store. Reads take no lock: an object file is
// never changed in place, only replaced by rename.
func (s *Store) Get(ctx context.Context, key string, maxBytes int64) (*providers.Object, error) {
	p, err := s.path("get", key)
	if err != nil {
		return nil, err
	}
	f, h, off, err := readObject("get", key, p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if maxBytes > 0 && h.Size > maxBytes {
		return nil, providers.Wrap("get", key, fmt.Errorf("%w: %d bytes, bound %d", providers.ErrTooLarge, h.Size, maxBytes), nil)
	}
	data := make([]byte, h.Size)
	if _, err := f.ReadAt(data, off); err != nil {
		return nil, &providers.Error{Op: "get", Key: key, Err: err}
	}
	return &providers.Object{Attrs: attrs(key, h), Data: data}, nil
}

// Stat implements providers.Store.
func (s *Store) Stat(ctx context.Context, key string) (*providers.Attrs, error) {
	p, err := s.path("stat", key)
	if err != nil {
		return nil, err
	}
	h, err := stat("stat", key, p)
	if err != nil {
		return nil, err
	}
	a := attrs(key, h)
	return &a, nil
}

// Create implements providers.Store.
func (s *Store) Create(ctx context.Context, key string, data []byte, metadata map[string]string) (providers.WriteResult, error) {
	return s.write(ctx, "create", key, data, metadata, func(p string) error {
		fi, err := os.Lstat(p)
		switch {
		case absent(err):
			return nil
		case err != nil:
			return &providers.Error{Op: "create", Key: key, Err: err}
		case !fi.IsDir():
			return providers.Wrap("create", key, fmt.Errorf("%w: object exists", providers.ErrPrecondition), nil)
		case os.Remove(p) == nil: // an empty directory left behind is no object
			return nil
		default:
			return providers.Wrap("create", key, fmt.Errorf("%w: a directory holds keys under %q", providers.ErrInvalidKey, key+"/"), nil)
		}
	})
}

// Replace implements providers.Store.
func (s *Store) Replace(ctx context.Context, key string, data []byte, metadata map[string]string, ifVersion string) (providers.WriteResult, error) {
	return s.write(ctx, "replace", key, data, metadata, func(p string) error {
		return match("replace", key, p, ifVersion)
	})
}

// match reports ErrPrecondition unless the object at p has version ifVersion.
func match(op, key, p, ifVersion string) error {
	h, err := stat(op, key, p)
	switch {
	case errors.Is(err, providers.ErrNotFound):
		return providers.Wrap(op, key, fmt.Errorf("%w: no such object", providers.ErrPrecondition), nil)
	case err != nil:
		return err
	case h.Version != ifVersion:
		return providers.Wrap(op, key, fmt.Errorf("%w: version is %s, not %q", providers.ErrPrecondition, h.Version, ifVersion), nil)
	}
	return nil
}

// write stores a new version of key if check, run under the key's lock,
// allows it.
func (s *Store) write(ctx context.Context, op, key string, data []byte, metadata map[string]string, check func(p string) error) (providers.WriteResult, error) {
	p, err := s.path(op, key)
	if err != nil {
		return providers.WriteResult{}, err
	}
	unlock, err := s.lock(ctx, op, key)
	if err != nil {
		return providers.WriteResult{}, err
	}
	defer unlock()
	if err := check(p); err != nil {
		return providers.WriteResult{}, err
	}
	h := header{Version: rand.Text(), Size: int64(len(data)), Modified: time.Now(), Metadata: metadata}
	hdr, err := json.Marshal(h)
	if err != nil {
		return providers.WriteResult{}, &providers.Error{Op: op, Key: key, Err: err}
	}
	buf := make([]byte, 0, len(magic)+len(hdr)+1+len(data))
	buf = append(buf, magic...)
	buf = append(buf, hdr...)
	buf = append(buf, '\n')
	buf = append(buf, data...)
	if err := s.replaceFile(op, key, p, buf); err != nil {
		return providers.WriteResult{}, err
	}
	return providers.WriteResult{Version: h.Version, LastModified: h.Modified, StoreTime: h.Modified}, nil
}

// replaceFile atomically puts content at p: readers see the old file or the
// new one, never a part.
func (s *Store) replaceFile(op, key, p string, content []byte) error {
	dir := filepath.Dir(p)
	var f *os.File
	var err error
	// A concurrent Delete may remove a directory that mkdirs just saw.
	for range 10 {
		if err = mkdirs(s.root, dir); err == nil {
			f, err = os.OpenFile(filepath.Join(dir, tmpPrefix+rand.Text()), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		}
		if !errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	if errors.Is(err, syscall.ENOTDIR) {
		return providers.Wrap(op, key, fmt.Errorf("%w: a prefix of the key is an object", providers.ErrInvalidKey), err)
	}
	if err != nil {
		return &providers.Error{Op: op, Key: key, Err: err}
	}
	tmp := f.Name()
	_, err = f.Write(content)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		os.Remove(tmp)
		return &providers.Error{Op: op, Key: key, Err: err}
	}
	if err := syncDir(dir); err != nil {
		// The new object is visible but might not survive a crash.
		return providers.Wrap(op, key, providers.ErrUnknownOutcome, err)
	}
	return nil
}

// mkdirs creates dir and any missing parents below root, syncing each parent
// so that the new entries survive a crash.
func mkdirs(root, dir string) error {
	if dir == root {
		return nil
	}
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return &fs.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOTDIR}
		}
		return nil
	}
	parent := filepath.Dir(dir)
	if err := mkdirs(root, parent); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return syncDir(parent)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// lock takes the exclusive lock on key shared by every process using the
// directory. Lock files are named by a hash of the key so that "a" and
// "a/b" do not collide; they are kept, since removing a lock file another
// process has open would let two writers in.
func (s *Store) lock(ctx context.Context, op, key string) (unlock func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, &providers.Error{Op: op, Key: key, Err: err}
	}
	sum := sha256.Sum256([]byte(key))
	dir := filepath.Join(s.root, lockDir)
	name := filepath.Join(dir, hex.EncodeToString(sum[:]))
	f, err := os.OpenFile(name, os.O_RDONLY|os.O_CREATE, 0o644)
	if errors.Is(err, fs.ErrNotExist) {
		if err = os.MkdirAll(dir, 0o755); err == nil {
			f, err = os.OpenFile(name, os.O_RDONLY|os.O_CREATE, 0o644)
		}
	}
	if err != nil {
		return nil, &providers.Error{Op: op, Key: key, Err: fmt.Errorf("lock: %w", err)}
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err == nil {
		// The wait may have been long: give up before writing if the caller has.
		err = ctx.Err()
	}
	if err != nil {
		f.Close()
		return nil, &providers.Error{Op: op, Key: key, Err: fmt.Errorf("lock: %w", err)}
	}
	return func() { f.Close() }, nil // closing releases the flock
}

// Delete implements providers.Store. Directories it leaves empty are
// removed, so that their names are free for objects.
func (s *Store) Delete(ctx context.Context, key string, ifVersion string) error {
	p, err := s.path("delete", key)
	if err != nil {
		return err
	}
	unlock, err := s.lock(ctx, "delete", key)
	if err != nil {
		return err
	}
	defer unlock()
	if err := match("delete", key, p, ifVersion); err != nil {
		return err
	}
	if err := os.Remove(p); err != nil {
		return &providers.Error{Op: "delete", Key: key, Err: err}
	}
	if err := syncDir(filepath.Dir(p)); err != nil {
		return providers.Wrap("delete", key, providers.ErrUnknownOutcome, err)
	}
	for d := filepath.Dir(p); d != s.root && os.Remove(d) == nil; d = filepath.Dir(d) {
	}
	return nil
}

// List implements providers.Store. The page token is the last key returned.
func (s *Store) List(ctx context.Context, prefix, pageToken string, pageSize int) (providers.ListPage, error) {
	if pageSize <= 0 {
		pageSize = 1000
	}
	// Start in the directory named by prefix's complete segments.
	dirKey := prefix[:strings.LastIndex(prefix, "/")+1]
	if dirKey != "" {
		if why := checkKey(strings.TrimSuffix(dirKey, "/")); why != "" {
			return providers.ListPage{}, providers.Wrap("list", prefix, fmt.Errorf("%w: %s", providers.ErrInvalidKey, why), nil)
		}
	}
	l := lister{ctx: ctx, root: s.root, prefix: prefix, token: pageToken, size: pageSize}
	if err := l.walk(dirKey); err != nil && err != errPageFull {
		return providers.ListPage{}, err
	}
	return l.page, nil
}

var errPageFull = errors.New("page full")

type lister struct {
	ctx                 context.Context
	root, prefix, token string
	size                int
	page                providers.ListPage
}

// walk adds the objects under dirKey (a key prefix ending in '/', or "") to
// the page in lexical key order.
func (l *lister) walk(dirKey string) error {
	if err := l.ctx.Err(); err != nil {
		return &providers.Error{Op: "list", Key: l.prefix, Err: err}
	}
	entries, err := os.ReadDir(filepath.Join(l.root, filepath.FromSlash(dirKey)))
	if absent(err) {
		return nil // removed while we walked, or never there
	}
	if err != nil {
		return &providers.Error{Op: "list", Key: l.prefix, Err: err}
	}
	// Keys under directory "a" start with "a/", and '/' sorts between other
	// bytes, so order directories by name+"/".
	sortName := func(e fs.DirEntry) string {
		if e.IsDir() {
			return e.Name() + "/"
		}
		return e.Name()
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(sortName(a), sortName(b)) })
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), reserved) {
			continue // locks and temporary files, never objects
		}
		key := dirKey + sortName(e)
		switch {
		case !strings.HasPrefix(key, l.prefix):
			continue
		case e.IsDir():
			// Descend unless every key below sorts at or before the token.
			if key > l.token || strings.HasPrefix(l.token, key) {
				if err := l.walk(key); err != nil {
					return err
				}
			}
		case e.Type().IsRegular() && key > l.token:
			if err := l.add(key); err != nil {
				return err
			}
		}
	}
	return nil
}

func (l *lister) add(key string) error {
	if len(l.page.Objects) == l.size {
		l.page.NextToken = l.page.Objects[l.size-1].Key
		return errPageFull
	}
	h, err := stat("list", key, filepath.Join(l.root, filepath.FromSlash(key)))
	if errors.Is(err, providers.ErrNotFound) {
		return nil // deleted since ReadDir
	}
	if err != nil {
		return err
	}
	l.page.Objects = append(l.page.Objects, attrs(key, h))
	return nil
}

// Properties implements providers.Store.
func (s *Store) Properties() providers.Properties {
	return providers.Properties{Name: "file", TimestampGranularity: time.Nanosecond}
}

// As sets a **Store target to s.
func (s *Store) As(target any) bool {
	p, ok := target.(**Store)
	if ok {
		*p = s
	}
	return ok
}

// Close implements providers.Store; a file store holds nothing open.
func (s *Store) Close() error { return nil }
