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
	mrand "math/rand/v2"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
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

// sidecar is the content of an object's attributes file.
type sidecar struct {
	Version  string            `json:"version"`
	Size     int64             `json:"size"`
	SHA256   string            `json:"sha256"`
	Modified time.Time         `json:"modified"`
	Metadata map[string]string `json:"metadata,omitempty"`
	// Inode and MtimeNs identify the data file the write renamed into
	// place, so that a reader can recognise it without hashing it.
	Inode uint64 `json:"inode,omitempty"`
	// Pending names the file in the object's directory that holds this
	// version's data until it is renamed into place.
	Pending string `json:"pending,omitempty"`
	MtimeNs int64  `json:"mtime_ns,omitempty"`
}

func init() {
	if err := providers.Register("file", open); err != nil {
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

// CheckKey implements driver.KeyChecker: keys are paths below the
// root, so they must not climb out of it or name the store's own files.
// (Bucket has refused empty keys, a leading '/' and control characters.)
func (s *store) CheckKey(key string) error {
	if why := checkKey(key); why != "" {
		return errors.New(why)
	}
	return nil
}

// checkKey says what is wrong with key, or "" if nothing is.
func checkKey(key string) string {
	switch {
	case key == "":
		return "empty key"
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
		case len(seg) > maxName:
			return "key has a path segment longer than 255 bytes"
		}
		if why := platformSegment(seg); why != "" {
			return why
		}
	}
	return ""
}

// paths are the files that make up one object.
type paths struct {
	key, dir   string
	data       string // the object's bytes
	attrs      string // its sidecar
	lock       string
	pending    string // new data, before it is renamed over data
	attrsNew   string // new sidecar, before it is renamed over attrs
	legacyLock string // the per-root lock of earlier releases
}

// aux names the store's file of the given kind beside the object file name.
func aux(kind, name string) string {
	n := reserved + "-" + kind + "." + name
	if len(n) > maxName {
		sum := sha256.Sum256([]byte(name))
		n = reserved + "-" + kind + "#" + hex.EncodeToString(sum[:])
	}
	return n
}

// files returns the files that hold key.
func (s *store) files(op, key string) (paths, error) {
	if why := checkKey(key); why != "" {
		return paths{}, driver.Wrap(op, key, fmt.Errorf("%w: %s", driver.ErrInvalidKey, why), nil)
	}
	var p string
	if pathLock() {
		p = resolve(join(s.root, key))
		// A symbolic link may take a key anywhere inside the store's
		// directory, never out of it: a write there would replace a file
		// that is no object of the store's.
		if root := s.dir(); !below(root, p) {
			return paths{}, driver.Wrap(op, key, fmt.Errorf("%w: a symbolic link takes it to %s, outside the store's directory %s", driver.ErrInvalidKey, p, root), nil)
		}
	} else {
		p = join(s.dir(), key)
	}
	dir, name := split(p)
	sum := sha256.Sum256([]byte(key))
	return paths{
		key:        key,
		dir:        dir,
		data:       p,
		attrs:      join(dir, aux("attrs", name)),
		lock:       join(dir, aux("lock", name)),
		pending:    join(dir, aux("pending", name)),
		attrsNew:   join(dir, aux("attrs-new", name)),
		legacyLock: join(join(s.dir(), lockDir), hex.EncodeToString(sum[:])),
	}, nil
}

// Paths are only ever resolved by resolve, the way the kernel resolves
// them, never cleaned as text: where "l" is a symbolic link to "a/b",
// "l/.." is "a", while filepath.Clean would make it ".". join and split
// therefore leave the text of a path alone.

// join is dir/name, without cleaning.
func join(dir, name string) string {
	switch {
	case name == "":
		return dir
	case strings.HasSuffix(dir, "/"):
		return dir + name
	}
	return dir + "/" + name
}

// split divides p at its last '/' into directory and name, without
// cleaning.
func split(p string) (dir, name string) {
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return "/", p // paths here are absolute
	}
	dir, name = p[:i], p[i+1:]
	if dir == "" {
		dir = "/"
	}
	return dir, name
}

// parent is p's directory, without cleaning.
func parent(p string) string {
	dir, _ := split(strings.TrimRight(p, "/"))
	return dir
}

// prune removes dir and its parents while they are empty, never the root
// or anything outside it.
func (s *store) prune(dir string) {
	root := s.dir()
	for d := resolve(dir); below(root, d) && os.Remove(d) == nil; d = parent(d) {
	}
}

// below reports whether p lies under the store's root.
func (s *store) below(p string) bool { return below(s.dir(), resolve(p)) }

// below reports whether the resolved path p lies under the resolved
// directory root.
func below(root, p string) bool {
	return strings.HasPrefix(p, strings.TrimSuffix(root, "/")+"/")
}

// refused replaces *err with permanent(*err).
func refused(err *error) { *err = permanent(*err) }

// permanent returns err, or, if the file system refused the operation in
// a way that lasts until someone changes it, an error that says so with
// providers.ErrPermission and names the file: EACCES and EPERM (the owner,
// mode or attributes of a directory or file; the user running the
// process), EROFS (a file system mounted read-only), ENOSPC and EDQUOT (a
// full disk or quota). Waiting does not cure them (someone must), and
// callers stop at once. A write whose outcome is unknown
// stays ErrUnknownOutcome.
func permanent(err error) error {
	switch {
	case err == nil || errors.Is(err, driver.ErrPermission) || errors.Is(err, driver.ErrUnknownOutcome):
		return err
	}
	why, ok := refusal(err)
	if !ok {
		return err
	}
	var (
		pathErr *fs.PathError
		linkErr *os.LinkError
		where   string
	)
	switch {
	case errors.As(err, &pathErr):
		where = ": " + pathErr.Op + " " + pathErr.Path
	case errors.As(err, &linkErr):
		where = ": " + linkErr.Op + " " + linkErr.Old + " " + linkErr.New
	}
	sentinel := fmt.Errorf("%w%s%s", driver.ErrPermission, where, why)
	if pe, ok := err.(*driver.Error); ok {
		return driver.Wrap(pe.Op, pe.Key, sentinel, pe.Err)
	}
	return fmt.Errorf("%w: %w", sentinel, err)
}

// absent reports whether err from opening an object's file means there is
// no object (a directory or a file standing where a directory should be
// is not an object either).
func absent(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR)
}

// readSidecar returns the sidecar at p, or nil if there is none or it
// cannot be decoded.
func readSidecar(p string) (*sidecar, error) {
	f, err := openFile(p, os.O_RDONLY, 0)
	if absent(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSidecar+1))
	if err != nil {
		if absent(err) {
			return nil, nil
		}
		return nil, err
	}
	var sc sidecar
	if len(b) > maxSidecar || json.Unmarshal(b, &sc) != nil || sc.Version == "" || sc.Size < 0 || len(sc.SHA256) != 2*sha256.Size {
		// Damaged by something else (the store only renames whole sidecars
		// into place): the data file stands alone, as a plain file.
		return nil, nil
	}
	return &sc, nil
}

// dataFile is an open file that may hold an object's bytes.
type dataFile struct {
	f  *os.File
	fi os.FileInfo
}

// openData opens the regular file at p, or returns nil if there is none.
func openData(p string) (*dataFile, error) {
	f, err := openFile(p, os.O_RDONLY, 0)
	if absent(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return &dataFile{f: f, fi: fi}, nil
}

func (d *dataFile) close() {
	if d != nil {
		d.f.Close()
	}
}

func (d *dataFile) hash() (string, error) {
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(d.f, 0, d.fi.Size())); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// matches reports whether d holds the data sc describes: the very file
// the write renamed into place, or a copy with the same bytes.
func (d *dataFile) matches(sc *sidecar) (bool, error) {
	if d == nil || d.fi.Size() != sc.Size {
		return false, nil
	}
	if ino, mt := identity(d.f, d.fi); sc.Inode != 0 && ino == sc.Inode && mt == sc.MtimeNs {
		return true, nil
	}
	sum, err := d.hash()
	return sum == sc.SHA256, err
}

// object is what the store found at a key.
type object struct {
	attrs driver.Attrs
	file  *dataFile // nil if the object does not exist
	off   int64     // where the bytes start in file (old format)
}

func (o *object) exists() bool { return o.file != nil }

func (o *object) close() { o.file.close() }

// data reads the object's bytes.
func (o *object) data() ([]byte, error) {
	b := make([]byte, o.attrs.Size)
	_, err := o.file.f.ReadAt(b, o.off)
	return b, err
}

func fromSidecar(key string, sc *sidecar, d *dataFile) *object {
	return &object{file: d, attrs: driver.Attrs{
		Key: key, Version: sc.Version, Size: sc.Size, Metadata: sc.Metadata, LastModified: sc.Modified,
	}}
}

// foreign describes a file with no sidecar that matches it.
func foreign(key string, d *dataFile) (*object, error) {
	if o := oldFormat(key, d); o != nil {
		return o, nil
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(d.f, 0, d.fi.Size())); err != nil {
		return nil, err
	}
	fmt.Fprintf(h, "\x00%d", d.fi.ModTime().UnixNano())
	return &object{file: d, attrs: driver.Attrs{
		Key: key, Version: "f" + hex.EncodeToString(h.Sum(nil))[:32], Size: d.fi.Size(), LastModified: d.fi.ModTime(),
	}}, nil
}

// oldHeader is the JSON line after oldMagic in objects of earlier releases.
type oldHeader struct {
	Version  string            `json:"version"`
	Size     int64             `json:"size"`
	Modified time.Time         `json:"modified"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// oldFormat decodes an object written by an earlier release, or returns nil
// if d is not one.
func oldFormat(key string, d *dataFile) *object {
	head := make([]byte, min(d.fi.Size(), int64(len(oldMagic))+maxSidecar))
	n, _ := d.f.ReadAt(head, 0)
	rest, ok := bytes.CutPrefix(head[:n], []byte(oldMagic))
	if !ok {
		return nil
	}
	line, _, ok := bytes.Cut(rest, []byte("\n"))
	var h oldHeader
	if !ok || json.Unmarshal(line, &h) != nil || h.Version == "" {
		return nil
	}
	off := int64(len(oldMagic) + len(line) + 1)
	if d.fi.Size()-off != h.Size {
		return nil
	}
	return &object{file: d, off: off, attrs: driver.Attrs{
		Key: key, Version: h.Version, Size: h.Size, Metadata: h.Metadata, LastModified: h.Modified,
	}}
}

// look reads the object at f without the lock. settled is false when what
// it saw may be a write in progress, or one interrupted by a crash: then
// the caller must look again under the lock.
func look(f paths) (o *object, settled bool, err error) {
	sc, err := readSidecar(f.attrs)
	if err != nil {
		return nil, false, err
	}
	d, err := openData(f.data)
	if err != nil {
		return nil, false, err
	}
	switch {
	case sc != nil:
		ok, err := d.matches(sc)
		if err != nil || !ok {
			d.close()
			return nil, false, err
		}
		return fromSidecar(f.key, sc, d), true, nil
	case d == nil:
		return &object{attrs: driver.Attrs{Key: f.key}}, true, nil
	}
	// Data without a sidecar. Writers commit the sidecar before the data
	// appears and remove it only after the data is gone, so if there is
	// still none the file is not one of ours in the middle of a write.
	if sc2, err := readSidecar(f.attrs); err != nil || sc2 != nil {
		d.close()
		return nil, false, err
	}
	o, err = foreign(f.key, d)
	if err != nil {
		d.close()
		return nil, false, err
	}
	return o, true, nil
}

// settle reads the object at f while holding its lock, finishing a write
// that a crash interrupted after its commit point.
func settle(f paths) (*object, error) {
	sc, err := readSidecar(f.attrs)
	if err != nil {
		return nil, err
	}
	d, err := openData(f.data)
	if err != nil {
		return nil, err
	}
	if sc != nil {
		ok, err := d.matches(sc)
		if err != nil {
			d.close()
			return nil, err
		}
		if ok {
			return fromSidecar(f.key, sc, d), nil
		}
		pending := f.pending
		if p := sc.Pending; strings.HasPrefix(p, reserved+"-pending") && !strings.ContainsRune(p, filepath.Separator) {
			pending = join(f.dir, p)
		}
		pd, err := openData(pending)
		if err != nil {
			d.close()
			return nil, err
		}
		ok, err = pd.matches(sc)
		if err != nil || !ok {
			pd.close()
		}
		if err != nil {
			d.close()
			return nil, err
		}
		if ok {
			// Committed but not yet in place: roll forward.
			d.close()
			if err := os.Rename(pending, f.data); err != nil {
				pd.close()
				return nil, err
			}
			if err := syncDir(f.dir); err != nil {
				pd.close()
				return nil, err
			}
			return fromSidecar(f.key, sc, pd), nil
		}
		// Neither file is the one the sidecar describes: the data was
		// changed or removed by something else. Drop the stale sidecar so
		// that later reads need no lock.
		if err := os.Remove(f.attrs); err != nil && !absent(err) {
			d.close()
			return nil, err
		}
	}
	if d == nil {
		return &object{attrs: driver.Attrs{Key: f.key}}, nil
	}
	// Written by something else since (or never ours): a plain file.
	o, err := foreign(f.key, d)
	if err != nil {
		d.close()
	}
	return o, err
}

// read returns the object at key, settling an interrupted write under the
// lock if it finds one. The caller closes the object.
func (s *store) read(ctx context.Context, op string, f paths) (*object, error) {
	o, settled, err := look(f)
	if err == nil && !settled {
		var unlock func()
		unlock, err = s.lock(ctx, op, f, false)
		if errors.Is(err, errNoDir) {
			return &object{attrs: driver.Attrs{Key: f.key}}, nil
		}
		if err != nil {
			return nil, err
		}
		defer unlock()
		o, err = settle(f)
	}
	if err != nil {
		if _, ok := err.(*driver.Error); ok {
			return nil, err
		}
		return nil, &driver.Error{Op: op, Key: f.key, Err: err}
	}
	return o, nil
}

// Read implements driver.Driver. Reads take no lock unless they find a
// write in progress: object files are never changed in place, only
// replaced by rename.
func (s *store) Read(ctx context.Context, key string, maxBytes int64) (_ *driver.Reader, err error) {
	defer refused(&err)
	f, err := s.files("get", key)
	if err != nil {
		return nil, err
	}
	o, err := s.read(ctx, "get", f)
	if err != nil {
		return nil, err
	}
	defer o.close()
	if !o.exists() {
		return nil, driver.Wrap("get", key, driver.ErrNotFound, nil)
	}
	if maxBytes > 0 && o.attrs.Size > maxBytes {
		// Bucket would refuse it; do not read it first.
		return &driver.Reader{Attrs: o.attrs, Body: io.NopCloser(strings.NewReader(""))}, nil
	}
	data, err := o.data()
	if err != nil {
		return nil, &driver.Error{Op: "get", Key: key, Err: err}
	}
	return driver.NewBytesReader(o.attrs, data), nil
}

// Stat implements driver.Driver.
func (s *store) Stat(ctx context.Context, key string) (_ *driver.Attrs, err error) {
	defer refused(&err)
	f, err := s.files("stat", key)
	if err != nil {
		return nil, err
	}
	o, err := s.read(ctx, "stat", f)
	if err != nil {
		return nil, err
	}
	defer o.close()
	if !o.exists() {
		return nil, driver.Wrap("stat", key, driver.ErrNotFound, nil)
	}
	return &o.attrs, nil
}

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

// errNoDir: the object's directory does not exist, so neither does it.
var errNoDir = errors.New("no such directory")

// Lock retry backoff: short, since a write holds the lock for a few syncs.
const (
	lockPollMin = 100 * time.Microsecond
	lockPollMax = 5 * time.Millisecond
)

// lock takes the exclusive lock on f's object. With mkdir it first creates
// the object's directory; without, it returns errNoDir if that is missing.
// It gives up when ctx ends, with an error wrapping ctx's cause.
func (s *store) lock(ctx context.Context, op string, f paths, mkdir bool) (unlock func(), err error) {
	wrap := func(err error) error {
		if errors.Is(err, syscall.ENOTDIR) {
			return driver.Wrap(op, f.key, fmt.Errorf("%w: a prefix of the key is an object", driver.ErrInvalidKey), err)
		}
		return &driver.Error{Op: op, Key: f.key, Err: fmt.Errorf("lock: %w", err)}
	}
	if ctx.Err() != nil {
		return nil, wrap(context.Cause(ctx))
	}
	name := f.lock
	legacy := !pathLock()
	if legacy {
		name = f.legacyLock
	}
	wait, vanished := lockPollMin, 0
	for {
		if ctx.Err() != nil {
			return nil, wrap(context.Cause(ctx))
		}
		if mkdir {
			if err := mkdirs(s.dir(), f.dir); err != nil {
				return nil, wrap(err)
			}
		}
		if legacy {
			if err := os.MkdirAll(parent(name), 0o755); err != nil {
				return nil, wrap(err)
			}
		}
		lf, err := openFile(name, os.O_RDONLY|os.O_CREATE, 0o644)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			if !mkdir && !legacy {
				return nil, errNoDir
			}
			// A concurrent Delete removed the directory mkdirs just saw.
			if vanished++; vanished < 100 {
				continue
			}
		}
		if err != nil {
			return nil, wrap(err)
		}
		locked, err := tryLock(lf)
		if locked {
			if same, err := stillLinked(lf, name); err != nil || !same {
				// Delete removed this lock file while we waited for it.
				lf.Close()
				if err != nil {
					return nil, wrap(err)
				}
				continue
			}
			return func() { s.unlock(f, lf, legacy) }, nil
		}
		lf.Close()
		if err != nil {
			return nil, wrap(err)
		}
		// Jittered, so that waiters do not poll in step.
		t := time.NewTimer(wait/2 + mrand.N(wait/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, wrap(context.Cause(ctx))
		case <-t.C:
		}
		wait = min(2*wait, lockPollMax)
	}
}

// unlock releases the lock lf on f's object. If there is no object, it
// first removes the lock file, and directories left empty, so that a key
// that was never written or was deleted leaves nothing behind. Removing it
// is safe while holding it: whoever waits for it sees it gone and starts
// over.
func (s *store) unlock(f paths, lf *os.File, legacy bool) {
	defer func() {
		unlockFile(lf)
		lf.Close()
	}()
	if legacy {
		return
	}
	if fi, err := os.Lstat(f.data); err == nil && !fi.IsDir() || err != nil && !absent(err) {
		return
	}
	if _, err := os.Lstat(f.attrs); !absent(err) {
		return
	}
	if os.Remove(f.lock) == nil {
		s.prune(f.dir)
	}
}

// stillLinked reports whether name still names the open file lf.
func stillLinked(lf *os.File, name string) (bool, error) {
	a, err := lf.Stat()
	if err != nil {
		return false, err
	}
	b, err := os.Stat(name)
	if absent(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return os.SameFile(a, b), nil
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

// List implements driver.Driver. The page token is the last key returned.
func (s *store) List(ctx context.Context, prefix, pageToken string, pageSize int) (_ driver.ListPage, err error) {
	defer refused(&err)
	if pageSize <= 0 {
		pageSize = 1000
	}
	// Start in the directory named by prefix's complete segments.
	dirKey := prefix[:strings.LastIndex(prefix, "/")+1]
	if dirKey != "" {
		if why := checkKey(strings.TrimSuffix(dirKey, "/")); why != "" {
			return driver.ListPage{}, driver.Wrap("list", prefix, fmt.Errorf("%w: %s", driver.ErrInvalidKey, why), nil)
		}
	}
	l := lister{ctx: ctx, s: s, prefix: prefix, token: pageToken, size: pageSize}
	if err := l.walk(dirKey); err != nil && err != errPageFull {
		return driver.ListPage{}, err
	}
	return l.page, nil
}

var errPageFull = errors.New("page full")

// readDir is os.ReadDir, unsorted.
func readDir(dir string) ([]fs.DirEntry, error) {
	d, err := openFile(dir, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.ReadDir(-1)
}

type lister struct {
	ctx           context.Context
	s             *store
	prefix, token string
	size          int
	page          driver.ListPage
}

// walk adds the objects under dirKey (a key prefix ending in '/', or "") to
// the page in lexical key order.
func (l *lister) walk(dirKey string) error {
	if err := l.ctx.Err(); err != nil {
		return &driver.Error{Op: "list", Key: l.prefix, Err: context.Cause(l.ctx)}
	}
	entries, err := readDir(join(l.s.dir(), dirKey))
	if absent(err) {
		return nil // removed while we walked, or never there
	}
	if err != nil {
		return &driver.Error{Op: "list", Key: l.prefix, Err: err}
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
			continue // sidecars, locks and pending files, never objects
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
	f, err := l.s.files("list", key)
	if err != nil {
		return nil // a name no key can have (a NUL byte cannot occur)
	}
	o, err := l.s.read(l.ctx, "list", f)
	if err != nil {
		if l.ctx.Err() != nil {
			return err
		}
		// One unreadable file does not hide the rest of the tree.
		return nil
	}
	o.close()
	if o.exists() {
		l.page.Objects = append(l.page.Objects, o.attrs)
	}
	return nil
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

// Close implements driver.Driver; a file store holds nothing open.
func (s *store) Close() error { return nil }
