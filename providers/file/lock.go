package file

// This file holds the per-object lock every write takes: taking it with
// back-off until the context ends, and releasing it with the lock file and
// the directories it leaves empty.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	mrand "math/rand/v2"
	"os"
	"syscall"
	"time"

	"github.com/objlease/objlease/providers/driver"
)

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
