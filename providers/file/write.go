package file

// This file holds the write path: Create, Replace and Delete with their
// conditions, the commit that syncs the data and sidecar before renaming
// them into place, and the directories a write makes.

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/objlease/objlease/providers/driver"
)

// Create implements driver.Driver.
func (s *store) Create(ctx context.Context, key string, data []byte, metadata map[string]string) (driver.WriteResult, error) {
	return s.CreateFrom(ctx, key, bodyOf(data), metadata)
}

// bodyOf is data as a body to write.
func bodyOf(data []byte) *io.SectionReader {
	return io.NewSectionReader(bytes.NewReader(data), 0, int64(len(data)))
}

// CreateFrom implements driver.StreamWriter: the bytes are copied from
// body into the pending file.
func (s *store) CreateFrom(ctx context.Context, key string, body *io.SectionReader, metadata map[string]string) (driver.WriteResult, error) {
	return s.write(ctx, "create", key, body, metadata, func(f paths, cur *object) error {
		if cur.exists() {
			return driver.Wrap("create", key, fmt.Errorf("%w: object exists", driver.ErrPrecondition), nil)
		}
		fi, err := os.Lstat(f.data)
		switch {
		case absent(err):
			return nil
		case err != nil:
			return &driver.Error{Op: "create", Key: key, Err: err}
		case !fi.IsDir():
			return driver.Wrap("create", key, fmt.Errorf("%w: %s is not a regular file", driver.ErrInvalidKey, f.data), nil)
		case s.below(f.data) && os.Remove(f.data) == nil: // an empty directory left behind is no object
			return nil
		default:
			return driver.Wrap("create", key, fmt.Errorf("%w: a directory holds keys under %q", driver.ErrInvalidKey, key+"/"), nil)
		}
	})
}

// Replace implements driver.Driver.
func (s *store) Replace(ctx context.Context, key string, data []byte, metadata map[string]string, ifVersion string) (driver.WriteResult, error) {
	return s.ReplaceFrom(ctx, key, bodyOf(data), metadata, ifVersion)
}

// ReplaceFrom implements driver.StreamWriter.
func (s *store) ReplaceFrom(ctx context.Context, key string, body *io.SectionReader, metadata map[string]string, ifVersion string) (driver.WriteResult, error) {
	return s.write(ctx, "replace", key, body, metadata, func(_ paths, cur *object) error {
		return match("replace", cur, ifVersion)
	})
}

// match reports ErrPrecondition unless cur exists with version ifVersion.
func match(op string, cur *object, ifVersion string) error {
	switch {
	case !cur.exists():
		return driver.Wrap(op, cur.attrs.Key, fmt.Errorf("%w: no such object", driver.ErrPrecondition), nil)
	case cur.attrs.Version != ifVersion:
		return driver.Wrap(op, cur.attrs.Key, fmt.Errorf("%w: version is %s, not %q", driver.ErrPrecondition, cur.attrs.Version, ifVersion), nil)
	}
	return nil
}

// write stores a new version of key if check, run under the key's lock
// on what is there, allows it.
func (s *store) write(ctx context.Context, op, key string, body *io.SectionReader, metadata map[string]string, check func(paths, *object) error) (_ driver.WriteResult, err error) {
	defer refused(&err)
	f, err := s.files(op, key)
	if err != nil {
		return driver.WriteResult{}, err
	}
	unlock, err := s.lock(ctx, op, f, true)
	if err != nil {
		return driver.WriteResult{}, err
	}
	defer unlock()
	cur, err := settle(f)
	if err != nil {
		return driver.WriteResult{}, &driver.Error{Op: op, Key: key, Err: err}
	}
	cur.close()
	if err := check(f, cur); err != nil {
		return driver.WriteResult{}, err
	}
	sc := sidecar{Version: rand.Text(), Size: body.Size(), Modified: s.now(), Metadata: metadata}
	if err := s.commit(f, body, &sc); err != nil {
		if errors.Is(err, errCommitted) {
			// The new object may be the one readers settle on.
			return driver.WriteResult{}, driver.Wrap(op, key, driver.ErrUnknownOutcome, err)
		}
		return driver.WriteResult{}, &driver.Error{Op: op, Key: key, Err: err}
	}
	return driver.WriteResult{Version: sc.Version, LastModified: sc.Modified}, nil
}

// commit puts data and sc in place so that a crash at any point leaves the
// old object or the new one whole. It runs under the key's lock.
func (s *store) commit(f paths, body *io.SectionReader, sc *sidecar) error {
	if !pathLock() {
		// Writers under different locks must not share these files
		// (earlier releases gave each write its own temporary file).
		u := "." + rand.Text()
		f.pending, f.attrsNew = f.pending+u, f.attrsNew+u
	}
	sc.Pending = filepath.Base(f.pending)
	sum := sha256.New()
	ino, mtime, err := writeSynced(f.pending, io.TeeReader(driver.Exact(body), sum))
	sc.SHA256 = hex.EncodeToString(sum.Sum(nil))
	if err != nil {
		// Before the commit point the pending file is nobody's: left
		// behind, a part written to a full disk would keep it full.
		os.Remove(f.pending)
		return err
	}
	sc.Inode, sc.MtimeNs = ino, mtime
	s.crashPoint("pending written")
	b, err := json.Marshal(sc)
	if err != nil {
		return err
	}
	if _, _, err := writeSynced(f.attrsNew, bytes.NewReader(append(b, '\n'))); err != nil {
		os.Remove(f.attrsNew)
		os.Remove(f.pending)
		return err
	}
	s.crashPoint("sidecar written")
	if err := os.Rename(f.attrsNew, f.attrs); err != nil {
		return err
	}
	s.crashPoint("committed")
	// From here on the new object is the one readers settle on.
	if err := syncDir(f.dir); err != nil {
		return fmt.Errorf("%w: %w", errCommitted, err)
	}
	if err := os.Rename(f.pending, f.data); err != nil {
		return fmt.Errorf("%w: %w", errCommitted, err)
	}
	s.crashPoint("data in place")
	// No sync: the commit is durable, and if a crash loses this rename the
	// pending file is rolled forward.
	return nil
}

// errCommitted marks a failure after a write's commit point.
var errCommitted = errors.New("after commit")

func (s *store) crashPoint(stage string) {
	if s.crash != nil {
		s.crash(stage)
	}
}

// writeSynced writes content to p and syncs it; it returns the written
// file's identity.
func writeSynced(p string, content io.Reader) (ino uint64, mtimeNs int64, err error) {
	f, err := openFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return 0, 0, err
	}
	_, err = io.Copy(f, content)
	if err == nil {
		err = f.Sync()
	}
	var fi os.FileInfo
	if err == nil {
		fi, err = f.Stat()
	}
	if err == nil {
		ino, mtimeNs = identity(f, fi)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return ino, mtimeNs, err
}

// mkdirs creates dir and any missing parents below root, syncing each parent
// so that the new entries survive a crash.
func mkdirs(root, dir string) error {
	if dir == root {
		// The store's directory, with its missing parents: made by the
		// first write, as a URL may name one that does not exist yet.
		return os.MkdirAll(root, 0o755)
	}
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return &fs.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOTDIR}
		}
		return nil
	}
	up := parent(dir)
	if err := mkdirs(root, up); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return syncDir(up)
}

// Delete implements driver.Driver. Directories it leaves empty are
// removed, so that their names are free for objects.
func (s *store) Delete(ctx context.Context, key string, ifVersion string) (err error) {
	defer refused(&err)
	f, err := s.files("delete", key)
	if err != nil {
		return err
	}
	unlock, err := s.lock(ctx, "delete", f, false)
	if errors.Is(err, errNoDir) {
		return driver.Wrap("delete", key, fmt.Errorf("%w: no such object", driver.ErrPrecondition), nil)
	}
	if err != nil {
		return err
	}
	defer unlock()
	cur, err := settle(f)
	if err != nil {
		return &driver.Error{Op: "delete", Key: key, Err: err}
	}
	cur.close()
	if err := match("delete", cur, ifVersion); err != nil {
		return err
	}
	// The pending file first, so that no stale sidecar can ever roll it
	// forward, then the data, and the sidecar only once the data is gone.
	for _, p := range []string{f.pending, f.attrsNew} {
		if err := os.Remove(p); err != nil && !absent(err) {
			return &driver.Error{Op: "delete", Key: key, Err: err}
		}
	}
	if err := os.Remove(f.data); err != nil {
		return &driver.Error{Op: "delete", Key: key, Err: err}
	}
	if err := syncDir(f.dir); err != nil {
		return driver.Wrap("delete", key, driver.ErrUnknownOutcome, err)
	}
	if err := os.Remove(f.attrs); err != nil && !absent(err) {
		return driver.Wrap("delete", key, driver.ErrUnknownOutcome, err)
	}
	if err := syncDir(f.dir); err != nil {
		return driver.Wrap("delete", key, driver.ErrUnknownOutcome, err)
	}
	if !pathLock() {
		s.prune(f.dir)
	}
	return nil // unlock removes the lock file and empty directories
}
