package file

import (
	"os"
	"testing"

	"github.com/objlease/objlease/providers"
)

func storeOf(b *providers.Bucket) *store {
	var s *store
	if !b.As(&s) {
		panic("not a file store")
	}
	return s
}

// LockFile is the file whose flock guards writes to key.
func LockFile(b *providers.Bucket, key string) string {
	f, err := storeOf(b).files("lock", key)
	if err != nil {
		panic(err)
	}
	if !pathLock() {
		return f.legacyLock
	}
	return f.lock
}

// SetCrashHook makes s call hook at each stage of a write.
func SetCrashHook(b *providers.Bucket, hook func(stage string)) { storeOf(b).crash = hook }

// SetOpenFile makes the package open files with open until the test ends.
func SetOpenFile(t testing.TB, open func(name string, flag int, perm os.FileMode) (*os.File, error)) {
	old := openFile
	openFile = open
	t.Cleanup(func() { openFile = old })
}
