package file_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/objlease/objlease/providers/file"
	"github.com/objlease/objlease/providers/providertest"
)

func TestConformance(t *testing.T) {
	s, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// New wants its root to exist; a root gone since (cleaned up by hand)
	// is made again by the first write.
	gone := filepath.Join(t.TempDir(), "gone")
	if err := os.Mkdir(gone, 0o755); err != nil {
		t.Fatal(err)
	}
	absent, err := file.New(gone)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	providertest.Run(t, providertest.Config{Bucket: s, MissingBucket: absent, CreatesBuckets: true})
}
