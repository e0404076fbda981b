package fence_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"

	"github.com/objlease/objlease/objlease/fence"
	"github.com/objlease/objlease/objlease/fence/fencetest"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/mem"
)

// md5Store models S3's versions: a version is the MD5 of the object's bytes,
// metadata left out, so writing identical bytes again gives an earlier
// version again. Conditions are checked against that version; the mem store
// underneath keeps each check and write atomic.
type md5Store struct{ m *providers.Bucket }

func newMD5Store() md5Store { return md5Store{mem.New()} }

func md5Version(b []byte) string { s := md5.Sum(b); return hex.EncodeToString(s[:]) }

func (s md5Store) Get(ctx context.Context, key string, max int64) (*providers.Object, error) {
	o, err := s.m.Get(ctx, key, max)
	if err != nil {
		return nil, err
	}
	o.Version = md5Version(o.Data)
	return o, nil
}

func (s md5Store) Stat(ctx context.Context, key string) (*providers.Attrs, error) {
	o, err := s.Get(ctx, key, 0)
	if err != nil {
		return nil, err
	}
	return &o.Attrs, nil
}

func (s md5Store) Create(ctx context.Context, key string, data []byte, md map[string]string) (providers.WriteResult, error) {
	res, err := s.m.Create(ctx, key, data, md)
	res.Version = md5Version(data)
	return res, err
}

// current returns the mem version of key if its MD5 version is ifVersion.
func (s md5Store) current(ctx context.Context, op, key, ifVersion string) (string, error) {
	o, err := s.m.Get(ctx, key, 0)
	switch {
	case errors.Is(err, providers.ErrNotFound):
		return "", providers.Wrap(op, key, providers.ErrPrecondition, err)
	case err != nil:
		return "", err
	case md5Version(o.Data) != ifVersion:
		return "", providers.Wrap(op, key, providers.ErrPrecondition, fmt.Errorf("version is %s", md5Version(o.Data)))
	}
	return o.Version, nil
}

func (s md5Store) Replace(ctx context.Context, key string, data []byte, md map[string]string, ifVersion string) (providers.WriteResult, error) {
	v, err := s.current(ctx, "replace", key, ifVersion)
	if err != nil {
		return providers.WriteResult{}, err
	}
	res, err := s.m.Replace(ctx, key, data, md, v)
	res.Version = md5Version(data)
	return res, err
}

func (s md5Store) Delete(ctx context.Context, key, ifVersion string) error {
	v, err := s.current(ctx, "delete", key, ifVersion)
	if err != nil {
		return err
	}
	return s.m.Delete(ctx, key, v)
}

func (s md5Store) List(ctx context.Context, prefix, token string, n int) (providers.ListPage, error) {
	page, err := s.m.List(ctx, prefix, token, n)
	for i, a := range page.Objects {
		if o, gerr := s.m.Get(ctx, a.Key, 0); gerr == nil {
			page.Objects[i].Version = md5Version(o.Data)
		}
	}
	return page, err
}

func (s md5Store) Properties() providers.Properties {
	return providers.Properties{Name: "md5", VersionsRepeat: true}
}
func (s md5Store) As(target any) bool { return false }
func (s md5Store) Close() error       { return nil }

// TestContentHashVersions runs the scenarios on the model, where the
// tombstone race would repeat a version.
func TestContentHashVersions(t *testing.T) {
	fencetest.Run(t, fencetest.Config{Store: newMD5Store(), Prefix: "t/"})
}

// TestTombstonesUnique: every tombstone differs from every other, and reads
// as not found.
func TestTombstonesUnique(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	seen := map[string]bool{}
	for tok := uint64(1); tok <= 3; tok++ {
		for range 2 {
			if err := fence.Delete(ctx, s, "k", tok, fence.Options{}); err != nil {
				t.Fatal(err)
			}
			o, err := s.Get(ctx, "k", 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(o.Data) == 0 || seen[string(o.Data)] {
				t.Fatalf("tombstone %q is empty or repeats", o.Data)
			}
			seen[string(o.Data)] = true
			if _, _, err := fence.Get(ctx, s, "k", 0); !errors.Is(err, providers.ErrNotFound) {
				t.Fatalf("get of a tombstone: %v, want ErrNotFound", err)
			}
		}
	}
}
