package leasetest_test

import (
	"testing"

	"github.com/objlease/objlease/objlease/leasetest"
	"github.com/objlease/objlease/providers/file"
)

func TestFile(t *testing.T) {
	s, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	leasetest.Run(t, leasetest.Config{Store: s, Prefix: "leases/"})
}
