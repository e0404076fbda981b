package providertest

// This file holds the tests of listing and of keys: pages that agree with
// each other, and keys stored and listed exactly as given.

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/objlease/objlease/providers"
)

// listAll pages through prefix and fails t if the pages are inconsistent.
func (s *suite) listAll(t *testing.T, prefix string, pageSize int) []providers.Attrs {
	t.Helper()
	var all []providers.Attrs
	token := ""
	for page := 0; ; page++ {
		if page > 1000 {
			t.Fatalf("list %q: no end after %d pages", prefix, page)
		}
		p, err := s.Bucket.List(t.Context(), prefix, token, pageSize)
		if err != nil {
			t.Fatalf("list %q page %d: %v", prefix, page, err)
		}
		if len(p.Objects) > pageSize {
			t.Errorf("list %q page %d: %d objects, page size %d", prefix, page, len(p.Objects), pageSize)
		}
		all = append(all, p.Objects...)
		if p.NextToken == "" {
			return all
		}
		if p.NextToken == token && len(p.Objects) == 0 {
			t.Fatalf("list %q page %d: no progress (token %q)", prefix, page, token)
		}
		token = p.NextToken
	}
}

func (s *suite) testList(t *testing.T) {
	dir := s.key("list/")
	want := map[string]providers.WriteResult{} // keys under dir+"in/"
	var names []string
	for i := range 22 {
		names = append(names, fmt.Sprintf("in/obj-%02d", i))
	}
	// '-' < '/' < '0': a store that walks directories must still order these as keys.
	names = append(names, "in/a-b", "in/a/b", "in/a0")
	for _, n := range names {
		key := dir + n
		want[key] = s.create(t, key, []byte(n), nil)
	}
	// Siblings that the prefixes below must (or must not) filter out.
	inx := dir + "inx"
	want2 := maps.Clone(want)
	want2[inx] = s.create(t, inx, []byte("inx"), nil)
	s.create(t, dir+"out/obj", []byte("out"), nil)

	check := func(prefix string, pageSize int, want map[string]providers.WriteResult) {
		t.Helper()
		got := s.listAll(t, prefix, pageSize)
		keys := make([]string, len(got))
		for i, a := range got {
			keys[i] = a.Key
			w, ok := want[a.Key]
			switch {
			case !ok:
				t.Errorf("list %q: unexpected key %q", prefix, a.Key)
			case a.Version != w.Version:
				t.Errorf("list %q: %q version %q, want %q", prefix, a.Key, a.Version, w.Version)
			case a.Size != int64(len(a.Key)-len(dir)):
				t.Errorf("list %q: %q size %d, want %d", prefix, a.Key, a.Size, len(a.Key)-len(dir))
			}
		}
		if !s.Unordered && !slices.IsSorted(keys) {
			t.Errorf("list %q: keys not in lexical order: %q", prefix, keys)
		}
		if len(slices.Compact(slices.Clone(keys))) != len(keys) {
			t.Errorf("list %q: duplicate keys: %q", prefix, keys)
		}
		wantKeys := slices.Sorted(maps.Keys(want))
		if !slices.Equal(slices.Compact(slices.Sorted(slices.Values(keys))), wantKeys) {
			t.Errorf("list %q page size %d:\n got %q\nwant %q", prefix, pageSize, keys, wantKeys)
		}
	}
	check(dir+"in/", 7, want)
	check(dir+"in/", 1000, want)
	check(dir+"in", 7, want2) // a prefix need not end at a '/'
	sub := map[string]providers.WriteResult{}
	for k, w := range want {
		if strings.HasPrefix(k, dir+"in/obj-1") {
			sub[k] = w
		}
	}
	check(dir+"in/obj-1", 3, sub) // obj-10 .. obj-19
	check(dir+"nothing-here/", 7, map[string]providers.WriteResult{})
}

func (s *suite) testUnicodeKeys(t *testing.T) {
	ctx := t.Context()
	dir := s.key("unicode/a b/")
	key := dir + "ключ-🔒"
	md := map[string]string{"note": "a b"}
	res := s.create(t, key, []byte("v1"), md)
	checkObject(t, s.get(t, key), key, []byte("v1"), md, res.Version)
	res, err := s.Bucket.Replace(ctx, key, []byte("v2"), nil, res.Version)
	if err != nil {
		t.Fatalf("replace %q: %v", key, err)
	}
	checkObject(t, s.get(t, key), key, []byte("v2"), nil, res.Version)
	got := s.listAll(t, dir, 10)
	if len(got) != 1 || got[0].Key != key || got[0].Version != res.Version {
		t.Errorf("list %q: got %+v, want only %q at version %q", dir, got, key, res.Version)
	}
	if err := s.Bucket.Delete(ctx, key, res.Version); err != nil {
		t.Fatalf("delete %q: %v", key, err)
	}
	_, err = s.Bucket.Stat(ctx, key)
	wantErr(t, err, "stat", key, providers.ErrNotFound)
}

// testKeysAsGiven: one key rule for every store. A key is stored and listed
// exactly as given, escapes and all; one a store or its SDK would turn into
// another key ("a//b", "a/../b") is refused before anything is sent.
func (s *suite) testKeysAsGiven(t *testing.T) {
	ctx := t.Context()
	dir := s.key("asgiven/")
	for _, name := range []string{"a%2Fb", "a%b", "a+b=c&d", "a b", "a..b", ".a"} {
		key := dir + name
		res := s.create(t, key, []byte(name), nil)
		checkObject(t, s.get(t, key), key, []byte(name), nil, res.Version)
	}
	got := s.listAll(t, dir, 100)
	if len(got) != 6 {
		t.Errorf("list %q: got %+v, want the 6 keys as written", dir, got)
	}
	for _, a := range got {
		if o := s.get(t, a.Key); string(o.Data) != strings.TrimPrefix(a.Key, dir) {
			t.Errorf("listed key %q holds %q: the key was stored under another name", a.Key, o.Data)
		}
	}
	for _, name := range []string{"a//b", "a/../b", "a/./b", "../b", "a/"} {
		key := dir + name
		_, err := s.Bucket.Create(ctx, key, []byte("x"), nil)
		wantErr(t, err, "create", key, providers.ErrInvalidKey)
	}
	if got := s.listAll(t, dir, 100); len(got) != 6 {
		t.Errorf("after refused keys, list %q: got %+v, want the same 6 keys", dir, got)
	}
}
