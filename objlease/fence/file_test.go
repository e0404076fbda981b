package fence_test

import (
	"testing"

	"github.com/objlease/objlease/objlease/fence/fencetest"
	"github.com/objlease/objlease/providers/file"
)

func TestFile(t *testing.T) {
	s, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fencetest.Run(t, fencetest.Config{Store: s, Prefix: "t/"})
}
