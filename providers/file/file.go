// Package file is a store in a local directory: the directory is the bucket
// and a key such as "jobs/nightly" is the file jobs/nightly below it.
//
// # On disk
//
// The file at an object's path holds exactly the bytes written, so other
// tools can read it. Its attributes live beside it, in the same directory:
//
//	jobs/nightly                       the data, as written
//	jobs/.objlease-attrs.nightly       sidecar: version, metadata, last
//	                                   modified, size and SHA-256 of the data
//	jobs/.objlease-lock.nightly        lock file (flock; LockFileEx on Windows)
//	jobs/.objlease-pending.nightly     new data while a write is under way
//	jobs/.objlease-attrs-new.nightly   new sidecar while a write is under way
//
// (Where the name would exceed 255 bytes, the part after the store's prefix
// is a hash of the object's name instead.) Names whose path segments start
// with ".objlease" are the store's own: they never appear in List, and keys
// naming them are refused with providers.ErrInvalidKey.
//
// A file with no valid sidecar, put there by another tool, is an object too:
// its version is derived from its content and modification time, its
// metadata is empty, and Create at its path is refused (reading or listing
// such a file hashes it whole). A sidecar that no longer matches its data,
// because another tool changed the data, is dropped: the file is then such
// a plain object. Files the store cannot read are left out of listings.
// Objects written by earlier releases, whose files began with an
// "objlease-object v1" header, are read as the objects they were (version
// and metadata from the header); their next write stores them in the
// layout above. Processes of earlier releases lock differently and must
// not share a directory with this one.
//
// # Locking
//
// Every write holds an exclusive lock on the object's lock file (flock on
// Linux, macOS and the BSDs; LockFileEx on Windows), which sits
// beside the object in its directory. Every path that reaches the file
// (through another store root, a symbolic link to a directory, a bind
// mount) therefore reaches the same lock; a symbolic link at the object's
// own name is resolved first, so a write through it takes the lock beside
// the file it points at and replaces that file, not the link. A key that
// links lead out of the store's directory is refused with
// providers.ErrInvalidKey: the store never writes outside it. Hard links
// are not recognised: a second name for the same file is another object,
// and the first write through either name separates them.
//
// On Unix, paths, the store's directory's as much as those below it, are
// resolved as open(2) resolves them, never cleaned as text: a ".." after a symbolic
// link is the parent of the link's target. With /srv/link pointing at
// data/sub, file:///srv/link/../k is the file /srv/data/k, the very object
// file:///srv/data/k names, with the same lock. On Windows, where Win32
// removes "." and ".." as text, they are removed first and the links and
// junctions of what remains followed; file:///C:/dir/key names C:\dir\key.
// There directories are not synced (NTFS journals their entries), files
// are opened so that they can be renamed over or removed while open, and
// keys whose segments Win32 cannot hold as written (a backslash, a colon,
// a device name such as NUL) are refused with providers.ErrInvalidKey.
//
// Taking the lock honours the
// context: it is tried without blocking and retried with a short backoff
// until the context ends. Delete removes the lock file while holding it; a
// writer that then gets the lock on the removed file notices and starts
// over. Reads take no lock unless they find a write interrupted half-way.
//
// # Crash safety
//
// A write puts the new data in the pending file and syncs it, writes and
// syncs the new sidecar, renames it over the old one and syncs the
// directory (the commit point), then renames the pending file over the
// data. A crash at any point leaves the old object or the new one whole,
// never the data of one with the attributes of the other: a reader that
// finds data not matching the sidecar (by size and SHA-256) takes the lock
// and rolls the pending file forward if it matches (before the commit
// point, the old sidecar and data still match each other). Delete removes
// the pending file, then the data, syncs, and only then the sidecar.
//
// # Clocks
//
// The store has no clock of its own: LastModified is the writing process's
// wall clock, kept for people reading it, and StoreTime is never reported
// (zero), so a lease client's store-clock rule does not apply and the
// observed-time rule decides alone. A stepped wall clock or two machines
// sharing a directory therefore cannot shorten a lease.
//
// # Shared and network directories
//
// Writes are atomic and exclusive across processes on one machine, on any
// local file system with flock and atomic rename. On NFS, Linux emulates
// flock with byte-range locks that the server arbitrates (since 2.6.12) and
// rename is atomic on the server, so writers on different machines exclude
// each other too; reads without the lock rely on close-to-open consistency,
// NFS's default (not with "nocto"). The store promises nothing where locks
// are not shared between machines (NFS with "nolock" or "local_lock", some
// SMB and FUSE mounts, synced folders such as Dropbox). Machines sharing a
// directory never compare their clocks (see Clocks).
//
// # Errors
//
// Besides the portable errors of every store (ErrNotFound, ErrPrecondition,
// ErrInvalidKey for keys the file system cannot hold), refusals of the file
// system that last until someone changes it are providers.ErrPermission,
// naming the file, so that callers stop at once instead of waiting:
//
//	EACCES, EPERM (owner, mode, attributes)   ErrPermission: "permission denied: open /d/.objlease-lock.k"
//	EROFS (mounted read-only)                 ErrPermission: "...: read-only file system"
//
// The OS error stays reachable with errors.As. A write that fails after its
// commit point is ErrUnknownOutcome whatever the cause.
//
// As in any file system, a key cannot be both an object and a directory:
// while "a/b" exists, creating "a" fails with providers.ErrInvalidKey, and
// the other way round.
//
// Importing the package registers the URL scheme "file": file:///abs/dir/name
// opens the directory /abs/dir and points at key "name"; file:///abs/dir/
// points at the whole directory (key ""). Opening and reading write
// nothing: a directory that does not exist reads as empty (no object, an
// empty listing; as the conformance suite has it for stores that create
// their buckets), and the first write creates it and its missing parents.
package file

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/driver"
)

const (
	reserved   = ".objlease" // prefix of every name the store keeps for itself
	lockDir    = reserved + "-locks"
	oldMagic   = "objlease-object v1\n" // header of objects written by earlier releases
	maxSidecar = 1 << 20                // bounds what a damaged file can make a reader allocate
	maxName    = 255
	// maxKeyBytes is S3's and GCS's limit: a key that works here works
	// there, and its files stay well within PATH_MAX (4096 on Linux).
	maxKeyBytes = 1024
)

// openFile is the platform's openFileShared; the package's tests replace it
// to make the file system refuse what the user running them (root) would
// be allowed.
var openFile = openFileShared

func init() {
	if err := providers.Register("file", open); err != nil {
		panic(err)
	}
	if err := providers.RegisterHints("file", providers.Hints{Container: "directory"}); err != nil {
		panic(err)
	}
}

// store keeps objects in a directory. It is safe for concurrent use by
// goroutines and by processes sharing the directory.
type store struct {
	// root is the directory's absolute path as given, never cleaned:
	// resolve gives the directory the kernel takes it to be.
	root  string
	now   func() time.Time // the writer's clock, for LastModified
	crash func(stage string)
}

// An Option configures a file store.
type Option func(*store)

// WithClock makes the store stamp LastModified from now instead of
// time.Now.
func WithClock(now func() time.Time) Option { return func(s *store) { s.now = now } }

// New returns a store rooted at the existing directory root.
func New(root string, opts ...Option) (*providers.Bucket, error) {
	s, err := newStore(root, opts...)
	if err != nil {
		return nil, err
	}
	return providers.NewBucket(s), nil
}

// NewDriver returns the driver New wraps, for a caller that puts its own
// layer (such as package faulty) between it and providers.NewBucket.
func NewDriver(root string, opts ...Option) (driver.Driver, error) {
	s, err := newStore(root, opts...)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func newStore(root string, opts ...Option) (*store, error) {
	s, err := openRoot(root, true)
	if err != nil {
		return nil, err
	}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// openRoot returns a store on the directory root, which must exist if
// mustExist is set. A relative root is taken from the working directory;
// root is not cleaned, since "l/.." is not "." where l is a symbolic link.
func openRoot(root string, mustExist bool) (*store, error) {
	abs := root
	if !filepath.IsAbs(root) {
		wd, err := os.Getwd()
		if err != nil {
			return nil, fmt.Errorf("file store root %q: %w", root, err)
		}
		abs = join(wd, root)
	}
	s := &store{root: abs, now: time.Now}
	fi, err := os.Stat(s.dir())
	switch {
	case err == nil && !fi.IsDir():
		return nil, fmt.Errorf("file store root %q is not a directory", root)
	case errors.Is(err, syscall.ENAMETOOLONG):
		return nil, fmt.Errorf("%w: the directory's path is %d bytes, longer than the file system takes", providers.ErrBadURL, len(abs))
	case err != nil && (mustExist || !errors.Is(err, fs.ErrNotExist)):
		// (A file where a directory of the path should be is an error:
		// no write could create the directory.)
		return nil, fmt.Errorf("file store root: %w", err)
	}
	return s, nil
}

// dir is the store's directory as the kernel resolves its path now.
func (s *store) dir() string { return resolve(s.root) }

func open(_ context.Context, u *url.URL, _ providers.OpenOptions) (*providers.Bucket, string, error) {
	const want = "want file:///absolute/dir/key or file:///absolute/dir/"
	switch {
	case u.Opaque != "":
		return nil, "", fmt.Errorf("%w %q: relative paths are not accepted; %s", providers.ErrBadURL, u.Redacted(), want)
	case u.Host != "" && u.Host != "localhost":
		// file://data/k reads "data" as a host: name the slash it lacks.
		return nil, "", fmt.Errorf("%w %q: %q is read as a host name, and file URLs name no host (a missing slash? file:///%s%s); %s", providers.ErrBadURL, u.Redacted(), u.Host, u.Host, u.EscapedPath(), want)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return nil, "", fmt.Errorf("%w %q: file URLs take no user, query or fragment; %s", providers.ErrBadURL, u.Redacted(), want)
	case !strings.HasPrefix(u.Path, "/"):
		return nil, "", fmt.Errorf("%w %q: no path; %s", providers.ErrBadURL, u.Redacted(), want)
	case strings.Contains(strings.ToLower(u.EscapedPath()), "%2f"):
		// Decoded, it would be a directory the URL does not show.
		return nil, "", fmt.Errorf("%w %q: %%2F in the path: a file store has no name with a slash in it; write directories with /", providers.ErrBadURL, u.Redacted())
	}
	// A URL names the directory as it is: one with "..", "." or "//" in
	// it would be resolved (and created) as another.
	dirs := strings.Split(u.Path, "/")
	for _, seg := range dirs[1 : len(dirs)-1] {
		switch seg {
		case "..":
			// Not cleaned as text: after a symbolic link, the kernel's
			// ".." is the parent of the link's target.
			return nil, "", fmt.Errorf(`%w %q: the path has a ".." segment: name the directory without it`, providers.ErrBadURL, u.Redacted())
		case "", ".":
			what := `a "." segment`
			if seg == "" {
				what = `"//"`
			}
			return nil, "", fmt.Errorf("%w %q: the path has %s; give the directory as it is, %s", providers.ErrBadURL, u.Redacted(), what, "file://"+path.Clean(u.Path))
		}
		if len(seg) > maxName {
			// Named by its start: the whole would be the line.
			return nil, "", fmt.Errorf("%w: the directory's path has a name of %d bytes, starting %q; a file system takes at most %d bytes a name", providers.ErrBadURL, len(seg), strings.ToValidUTF8(seg[:32], ""), maxName)
		}
	}
	root, key := path.Split(localPath(u.Path))
	// A missing directory is no error: it reads as empty, and the first
	// write creates it, so that file://$PWD/.leases/nightly works the
	// first time. Opening writes nothing.
	s, err := openRoot(root, false)
	if err != nil {
		return nil, "", permanent(err)
	}
	return providers.NewBucket(s), key, nil
}

// Properties implements driver.Driver.
func (s *store) Properties() driver.Properties {
	return driver.Properties{Name: "file", TimestampGranularity: time.Nanosecond, MaxKeyBytes: maxKeyBytes}
}

// As reaches no client (a file store has none); it sets a **store target
// to s, which only this package's tests can name.
func (s *store) As(target any) bool {
	p, ok := target.(**store)
	if ok {
		*p = s
	}
	return ok
}

var _ driver.BucketInspector = (*store)(nil)

// BucketSettings implements driver.BucketInspector: a directory keeps
// nothing of a file it replaces.
func (s *store) BucketSettings(context.Context, string) (driver.BucketSettings, error) {
	return driver.BucketSettings{Versioning: driver.SettingOff, SoftDelete: driver.SettingOff,
		ObjectLock: driver.SettingOff, Lifecycle: driver.SettingOff}, nil
}

// NoncurrentRule implements driver.BucketInspector: there is nothing to
// expire.
func (s *store) NoncurrentRule(string, int) driver.LifecycleRule { return driver.LifecycleRule{} }

// Close implements driver.Driver; a file store holds nothing open.
func (s *store) Close() error { return nil }
