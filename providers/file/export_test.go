package file

import "github.com/objlease/objlease/internal/safeguards"

// LockFile is the file whose flock guards writes to key.
func LockFile(s *Store, key string) string {
	f, err := s.files("lock", key)
	if err != nil {
		panic(err)
	}
	if !safeguards.PathLock.Load() {
		return f.legacyLock
	}
	return f.lock
}

// SetCrashHook makes s call hook at each stage of a write.
func SetCrashHook(s *Store, hook func(stage string)) { s.crash = hook }
