package fence_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/objlease/objlease/objlease/fence"

	"github.com/objlease/objlease/objlease/fence/fencetest"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/mem"
)

func TestMem(t *testing.T) { fencetest.Run(t, fencetest.Config{Store: mem.New(), Prefix: "t/"}) }

// repeatingStore declares S3's property: the scenarios must adapt to it.
type repeatingStore struct{ *providers.Bucket }

func (repeatingStore) Properties() providers.Properties {
	return providers.Properties{Name: "repeating", VersionsRepeat: true}
}

func TestVersionsRepeat(t *testing.T) {
	fencetest.Run(t, fencetest.Config{Store: repeatingStore{mem.New()}, Prefix: "t/"})
}

func TestCommitWritten(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	for i := range 3 {
		if err := fence.NewBatch(s, "out/", 9).Put(ctx, fmt.Sprint("f", i), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	fence.NewBatch(s, "out/", 8).Put(ctx, "stale", []byte("x"))
	m, err := fence.CommitWritten(ctx, s, "out/", 9, false)
	if err != nil || fmt.Sprint(m.Names()) != "[f0 f1 f2]" {
		t.Fatalf("%v %v", m, err)
	}
	if _, err := fence.CommitWritten(ctx, s, "out/", 8, false); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("stale: %v", err)
	}
}
