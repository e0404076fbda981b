package shard

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/providers"
)

// Define creates the records of shards ids under prefix that do not exist
// yet, free (released), so that workers with a nil Config.Shards find them.
// Existing records are left as they are. Their first owner's token is 2.
func Define(ctx context.Context, store providers.Store, prefix string, opts objlease.Options, ids ...string) error {
	for _, id := range ids {
		if id == "" {
			return fmt.Errorf("%w: empty shard id", ErrInvalidConfig)
		}
		c, err := objlease.New(store, ShardKey(prefix, id), opts)
		if err != nil {
			return err
		}
		if _, err := store.Stat(ctx, c.Key()); err == nil {
			continue
		} else if !errors.Is(err, providers.ErrNotFound) {
			return err
		}
		l, err := c.TryAcquire(ctx)
		if errors.Is(err, objlease.ErrHeld) {
			continue // created meanwhile, and taken
		}
		if err != nil {
			return err
		}
		if err := l.Release(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Entry is one record of a group as Describe reads it.
type Entry struct {
	// Name is the shard id, or the member's name.
	Name   string
	Key    string
	Record *objlease.Record
	Attrs  providers.Attrs
}

// View is a group's records at one moment.
type View struct {
	Members []Entry
	Shards  []Entry
	// Skipped counts objects under the group's prefixes that are not lease
	// records.
	Skipped int
}

// Describe reads every record of the group under prefix, without changing
// any. It judges nothing about expiry: a reader that has looked once cannot
// tell a dead holder from a live one (Entry.Attrs carries the store's
// clock, when the store reports it).
func Describe(ctx context.Context, store providers.Store, prefix string) (*View, error) {
	v := &View{}
	read := func(sub string, into *[]Entry, name func(string) string) error {
		return providers.Walk(ctx, store, sub, func(a providers.Attrs) error {
			obj, err := store.Get(ctx, a.Key, objlease.MaxRecordSize)
			switch {
			case errors.Is(err, providers.ErrNotFound):
				return nil // gone since it was listed
			case errors.Is(err, providers.ErrTooLarge):
				v.Skipped++
				return nil
			case err != nil:
				return err
			}
			r, err := objlease.DecodeRecord(a.Key, obj.Data)
			if err != nil {
				v.Skipped++
				return nil
			}
			n := name(strings.TrimPrefix(a.Key, sub))
			if sub == MembersPrefix(prefix) && r.Holder != "" {
				n = r.Holder // a long name's key is cut and hashed
			}
			*into = append(*into, Entry{Name: n, Key: a.Key, Record: r, Attrs: obj.Attrs})
			return nil
		})
	}
	unescape := func(s string) string {
		if u, err := url.PathUnescape(s); err == nil {
			return u
		}
		return s
	}
	if err := read(MembersPrefix(prefix), &v.Members, unescape); err != nil {
		return v, err
	}
	err := read(ShardsPrefix(prefix), &v.Shards, func(s string) string { return s })
	// Some stores (S3 Express One Zone) list out of key order.
	byKey := func(a, b Entry) int { return strings.Compare(a.Key, b.Key) }
	slices.SortFunc(v.Members, byKey)
	slices.SortFunc(v.Shards, byKey)
	return v, err
}
