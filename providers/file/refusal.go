package file

// This file holds how the file system's errors become the store's: refusals
// that last until someone acts (ErrPermission), and errors that mean no object.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"github.com/objlease/objlease/providers/driver"
)

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
