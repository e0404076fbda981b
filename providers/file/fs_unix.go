//go:build unix

package file

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// The parts of the store that differ between platforms: on Unix (Linux,
// macOS, the BSDs) paths resolve as open(2) resolves them, the lock is
// flock, a file's identity is its inode, and directories are synced.

// localPath is the file system path a file URL's path names.
func localPath(p string) string { return p }

// platformSegment allows every key segment checkKey allows.
func platformSegment(string) string { return "" }

// openFileShared is os.OpenFile: Unix lets a file be renamed or removed
// while it is open.
func openFileShared(name string, flag int, perm os.FileMode) (*os.File, error) {
	return os.OpenFile(name, flag, perm)
}

// maxLinks is how many symbolic links Linux follows in one path.
const maxLinks = 40

// resolve returns the absolute path p as open(2) resolves it: a symbolic
// link is replaced by its target where it stands, and ".." is the parent
// of the directory reached so far, after the links before it are followed
// (for a link "l" to "a/b", "l/.." is "a", not the directory holding "l").
// As far as p exists, the result names the same file without links or dot
// segments. From the first name that does not exist, that is not a
// directory while more follows, or that is one link too many, the rest of
// p is kept as written, so that the kernel makes of it what it makes of p
// (and, once the directories are created, the same file). A last name
// that is a link to a file not yet created yields that file: every path
// to a file yields the same directory and name, and with them the same
// lock.
func resolve(p string) string {
	done, todo, links := "/", p, 0
	for todo != "" {
		var c string
		c, todo, _ = strings.Cut(todo, "/")
		switch c {
		case "", ".":
			continue
		case "..":
			// done is a directory with no link in its path: its parent
			// is the one the kernel finds.
			done = filepath.Dir(done)
			continue
		}
		next := join(done, c)
		fi, err := os.Lstat(next)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 && !fi.IsDir() && strings.Trim(todo, "/") != "" {
			return strings.TrimRight(join(next, todo), "/")
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			done = next
			continue
		}
		target, err := os.Readlink(next)
		if links++; err != nil || links > maxLinks {
			return strings.TrimRight(join(next, todo), "/")
		}
		if filepath.IsAbs(target) {
			done = "/"
		}
		todo = join(target, todo)
	}
	return done
}

// tryLock takes the exclusive flock on lf without waiting; false if
// another open file holds it.
func tryLock(lf *os.File) (bool, error) {
	switch err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err {
	case nil:
		return true, nil
	case syscall.EWOULDBLOCK, syscall.EINTR:
		return false, nil
	default:
		return false, err
	}
}

// unlockFile does nothing: closing the file releases its flock.
func unlockFile(*os.File) {}

// identity is the open file f's inode and modification time.
func identity(_ *os.File, fi os.FileInfo) (ino uint64, mtimeNs int64) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		ino = uint64(st.Ino)
	}
	return ino, fi.ModTime().UnixNano()
}

// syncDir makes dir's entries durable.
func syncDir(dir string) error {
	d, err := openFile(dir, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// refusal reports whether err is a refusal of the file system that lasts
// until someone changes it, and what to add to "permission denied":
// EACCES and EPERM (the owner, mode or attributes of a directory or file;
// the user running the process), and EROFS (mounted read-only).
func refusal(err error) (why string, ok bool) {
	switch {
	case errors.Is(err, syscall.EROFS):
		return ": read-only file system", true
	case errors.Is(err, syscall.EPERM):
		return ": operation not permitted", true
	case errors.Is(err, syscall.EACCES):
		return "", true // the sentinel says "permission denied"
	case errors.Is(err, syscall.ENOSPC):
		return ": no space left on device", true
	case errors.Is(err, syscall.EDQUOT):
		return ": disk quota exceeded", true
	}
	return "", false
}
