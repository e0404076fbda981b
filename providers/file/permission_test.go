//go:build unix

package file_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/file"
)

// refuse makes the file system refuse with errno every open that matches
// (as a directory's mode, a read-only mount or an immutable file would; the
// tests run as root, whom modes do not stop).
func refuse(t *testing.T, errno syscall.Errno, match func(flag int) bool) {
	file.SetOpenFile(t, func(name string, flag int, perm os.FileMode) (*os.File, error) {
		if match(flag) {
			return nil, &fs.PathError{Op: "open", Path: name, Err: errno}
		}
		return os.OpenFile(name, flag, perm)
	})
}

func writing(flag int) bool { return flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE) != 0 }
func always(int) bool       { return true }

var refusals = []struct {
	errno syscall.Errno
	says  string
}{
	{syscall.EACCES, "permission denied: open "},
	{syscall.EPERM, "operation not permitted"},
	{syscall.EROFS, "read-only file system"},
}

// A file system that refuses access, or is mounted read-only, refuses
// until someone changes it: every operation says so with ErrPermission,
// naming the file, so that no caller waits for it to pass.
func TestRefusedAccessIsErrPermission(t *testing.T) {
	for _, r := range refusals {
		t.Run(r.errno.Error(), func(t *testing.T) {
			ctx := t.Context()
			s, _ := newStore(t)
			v, err := s.Create(ctx, "jobs/k", []byte("x"), nil)
			if err != nil {
				t.Fatal(err)
			}
			check := func(op string, err error) {
				t.Helper()
				var pe *providers.Error
				switch {
				case !errors.Is(err, providers.ErrPermission) || !errors.Is(err, r.errno):
					t.Errorf("%s: %v, want ErrPermission wrapping %v", op, err, r.errno)
				case !errors.As(err, &pe) || pe.Op != op:
					t.Errorf("%s: %v does not name the operation", op, err)
				case !strings.Contains(err.Error(), r.says) || !strings.Contains(err.Error(), ".objlease-"):
					t.Errorf("%s: %q, want it to say %q and name the file", op, err, r.says)
				}
				for _, other := range []error{providers.ErrNotFound, providers.ErrPrecondition, providers.ErrUnknownOutcome, providers.ErrInvalidKey, providers.ErrNoBucket} {
					if errors.Is(err, other) {
						t.Errorf("%s: %v also matches %v", op, err, other)
					}
				}
			}
			refuse(t, r.errno, writing)
			_, err = s.Create(ctx, "jobs/new", []byte("x"), nil)
			check("create", err)
			_, err = s.Replace(ctx, "jobs/k", []byte("y"), nil, v.Version)
			check("replace", err)
			check("delete", s.Delete(ctx, "jobs/k", v.Version))

			refuse(t, r.errno, always)
			_, err = s.Get(ctx, "jobs/k", 0)
			check("get", err)
			_, err = s.Stat(ctx, "jobs/k")
			check("stat", err)
			_, err = s.List(ctx, "jobs/", "", 10)
			if !errors.Is(err, providers.ErrPermission) {
				t.Errorf("list: %v, want ErrPermission", err)
			}
		})
	}
}

// A lease on a directory the process may not write ends Acquire, which
// otherwise waits for a held lease or a failing store, at once.
func TestAcquireEndsAtOnceWhenTheDirectoryRefuses(t *testing.T) {
	for _, r := range refusals {
		t.Run(r.errno.Error(), func(t *testing.T) {
			s, _ := newStore(t)
			refuse(t, r.errno, writing)
			c, err := objlease.New(s, "jobs/nightly", objlease.Options{TTL: 30 * time.Second, Holder: "a"})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			start := time.Now()
			_, err = c.Acquire(ctx)
			if !errors.Is(err, providers.ErrPermission) || !objlease.IsPermanent(err) {
				t.Fatalf("acquire after %v: %v, want ErrPermission at once", time.Since(start).Round(time.Millisecond), err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("acquire took %v, want an answer at once", d)
			}
		})
	}
}
