package fence_test

import (
	"testing"

	"github.com/objlease/objlease/objlease/fence/fencetest"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/mem"
)

func TestMem(t *testing.T) { fencetest.Run(t, mem.New(), "t/") }

// repeatingStore declares S3's property: the scenarios must adapt to it.
type repeatingStore struct{ *mem.Store }

func (repeatingStore) Properties() providers.Properties {
	return providers.Properties{Name: "repeating", VersionsRepeat: true}
}

func TestVersionsRepeat(t *testing.T) { fencetest.Run(t, repeatingStore{mem.New()}, "t/") }
