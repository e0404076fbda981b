package file_test

import (
	"testing"

	"github.com/objlease/objlease/providers/file"
	"github.com/objlease/objlease/providers/providertest"
)

func TestConformance(t *testing.T) {
	s, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	providertest.Run(t, providertest.Config{Store: s})
}
