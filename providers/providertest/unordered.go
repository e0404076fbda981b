package providertest

import (
	"context"
	"slices"
	"strings"

	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/driver"
)

// Unordered returns a store that holds what s holds and lists it out of
// lexical order, two objects a page, as S3 Express One Zone directory
// buckets do: the listing runs in reverse key order, so that code which
// takes the first key listed for the smallest, or prints keys as listed,
// shows it. Every other operation goes to s.
func Unordered(s providers.Store) *providers.Bucket {
	return providers.NewBucket(&unordered{s})
}

type unordered struct{ s providers.Store }

func (u *unordered) Read(ctx context.Context, key string, maxBytes int64) (*driver.Reader, error) {
	o, err := u.s.Get(ctx, key, maxBytes)
	if err != nil {
		return nil, err
	}
	return driver.NewBytesReader(o.Attrs, o.Data), nil
}

func (u *unordered) Stat(ctx context.Context, key string) (*providers.Attrs, error) {
	return u.s.Stat(ctx, key)
}

func (u *unordered) Create(ctx context.Context, key string, data []byte, md map[string]string) (providers.WriteResult, error) {
	return u.s.Create(ctx, key, data, md)
}

func (u *unordered) Replace(ctx context.Context, key string, data []byte, md map[string]string, ifVersion string) (providers.WriteResult, error) {
	return u.s.Replace(ctx, key, data, md, ifVersion)
}

func (u *unordered) Delete(ctx context.Context, key, ifVersion string) error {
	return u.s.Delete(ctx, key, ifVersion)
}

// List lists everything under prefix in reverse key order and returns the
// page after the token: the last key of the page before, so that writes
// between two pages neither repeat nor skip a key that stays.
func (u *unordered) List(ctx context.Context, prefix, pageToken string, pageSize int) (providers.ListPage, error) {
	var all []providers.Attrs
	if err := providers.Walk(ctx, u.s, prefix, func(a providers.Attrs) error {
		if pageToken == "" || a.Key < pageToken {
			all = append(all, a)
		}
		return nil
	}); err != nil {
		return providers.ListPage{}, err
	}
	slices.SortFunc(all, func(a, b providers.Attrs) int { return strings.Compare(b.Key, a.Key) })
	n := 2
	if pageSize > 0 {
		n = min(n, pageSize)
	}
	page := providers.ListPage{Objects: all[:min(n, len(all))]}
	if len(all) > n {
		page.NextToken = all[n-1].Key
	}
	return page, nil
}

func (u *unordered) Properties() providers.Properties { return u.s.Properties() }
func (u *unordered) As(target any) bool               { return u.s.As(target) }
func (u *unordered) Close() error                     { return u.s.Close() }
