//go:build windows

package file

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/windows"
)

// The parts of the store that differ between platforms. On Windows "." and
// ".." are removed from a path as text (as Win32 does) before symbolic links
// and junctions are followed; the lock is LockFileEx on the lock file's
// first byte; a file's identity is its file index on its volume; files are
// opened with FILE_SHARE_DELETE, so that, as on Unix, they can be renamed
// over and removed while another reader has them open; and directories
// are not synced (NTFS journals their entries, and Windows cannot flush a
// directory).

// localPath is the file system path a file URL's path names:
// file:///C:/dir/k has the path "/C:/dir/k", which names C:/dir/k.
func localPath(p string) string {
	if len(p) >= 3 && p[0] == '/' && p[2] == ':' {
		return p[1:]
	}
	return p
}

// platformSegment refuses the key segments Win32 cannot hold as written.
func platformSegment(seg string) string { return windowsSegment(seg) }

// openFileShared is os.OpenFile, but opens files with FILE_SHARE_DELETE.
// Directories are opened by os.OpenFile.
func openFileShared(name string, flag int, perm os.FileMode) (*os.File, error) {
	if flag == os.O_RDONLY {
		if fi, err := os.Stat(name); err == nil && fi.IsDir() {
			return os.OpenFile(name, flag, perm)
		}
	}
	p, err := windows.UTF16PtrFromString(name)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	var access uint32
	switch flag & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR) {
	case os.O_RDONLY:
		access = windows.GENERIC_READ
	case os.O_WRONLY:
		access = windows.GENERIC_WRITE
	default:
		access = windows.GENERIC_READ | windows.GENERIC_WRITE
	}
	var mode uint32
	switch {
	case flag&(os.O_CREATE|os.O_EXCL) == os.O_CREATE|os.O_EXCL:
		mode = windows.CREATE_NEW
	case flag&(os.O_CREATE|os.O_TRUNC) == os.O_CREATE|os.O_TRUNC:
		mode = windows.CREATE_ALWAYS
	case flag&os.O_CREATE != 0:
		mode = windows.OPEN_ALWAYS
	case flag&os.O_TRUNC != 0:
		mode = windows.TRUNCATE_EXISTING
	default:
		mode = windows.OPEN_EXISTING
	}
	attrs := uint32(windows.FILE_ATTRIBUTE_NORMAL)
	if flag&os.O_CREATE != 0 && perm&0o200 == 0 {
		attrs = windows.FILE_ATTRIBUTE_READONLY
	}
	share := uint32(windows.FILE_SHARE_READ | windows.FILE_SHARE_WRITE | windows.FILE_SHARE_DELETE)
	h, err := windows.CreateFile(p, access, share, nil, mode, attrs, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return os.NewFile(uintptr(h), name), nil
}

// resolve returns the absolute path p with its dot segments removed and,
// as far as it exists, its symbolic links and junctions followed, in
// forward-slash form; the rest of p is kept as written.
func resolve(p string) string {
	p = filepath.Clean(p)
	rest := ""
	for q := p; ; {
		if r, err := filepath.EvalSymlinks(q); err == nil {
			return filepath.ToSlash(filepath.Join(r, rest))
		}
		up := filepath.Dir(q)
		if up == q {
			return filepath.ToSlash(p)
		}
		rest = filepath.Join(filepath.Base(q), rest)
		q = up
	}
}

// tryLock takes the exclusive lock on lf's first byte without waiting;
// false if another open file holds it.
func tryLock(lf *os.File) (bool, error) {
	ol := new(windows.Overlapped)
	err := windows.LockFileEx(windows.Handle(lf.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, ol)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, windows.ERROR_LOCK_VIOLATION), errors.Is(err, windows.ERROR_IO_PENDING):
		return false, nil
	default:
		return false, err
	}
}

// unlockFile releases tryLock's lock: Windows releases it at close only
// when the system gets to it.
func unlockFile(lf *os.File) {
	windows.UnlockFileEx(windows.Handle(lf.Fd()), 0, 1, 0, new(windows.Overlapped))
}

// identity is the open file f's file index and modification time.
func identity(f *os.File, fi os.FileInfo) (ino uint64, mtimeNs int64) {
	var d windows.ByHandleFileInformation
	if windows.GetFileInformationByHandle(windows.Handle(f.Fd()), &d) == nil {
		ino = uint64(d.FileIndexHigh)<<32 | uint64(d.FileIndexLow)
	}
	return ino, fi.ModTime().UnixNano()
}

// syncDir does nothing: NTFS journals directory entries, and Windows has no
// call that flushes a directory.
func syncDir(string) error { return nil }

// refusal reports whether err is a refusal of the file system that lasts
// until someone changes it, and what to add to "permission denied":
// ERROR_ACCESS_DENIED (the file's or directory's security or read-only
// attribute) and ERROR_WRITE_PROTECT (write-protected media).
func refusal(err error) (why string, ok bool) {
	switch {
	case errors.Is(err, windows.ERROR_WRITE_PROTECT):
		return ": read-only file system", true
	case errors.Is(err, windows.ERROR_ACCESS_DENIED):
		return "", true // the sentinel says "permission denied"
	case errors.Is(err, windows.ERROR_DISK_FULL), errors.Is(err, windows.ERROR_HANDLE_DISK_FULL):
		return ": disk full", true
	}
	return "", false
}
