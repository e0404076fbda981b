package providertest

// This file holds the tests of one object's life: create, read, replace
// and delete under their preconditions, metadata, size limits, streamed
// bodies, versions and timestamps.

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"github.com/objlease/objlease/providers"
)

func (s *suite) testNotFound(t *testing.T) {
	key := s.key("notfound/missing")
	_, err := s.Bucket.Get(t.Context(), key, 0)
	wantErr(t, err, "get", key, providers.ErrNotFound)
	_, err = s.Bucket.Stat(t.Context(), key)
	wantErr(t, err, "stat", key, providers.ErrNotFound)
}

func (s *suite) testCreateGet(t *testing.T) {
	key := s.key("createget/obj")
	data := []byte("hello, object")
	md := map[string]string{"owner": "alice"}
	res := s.create(t, key, data, md)
	if res.Version == "" {
		t.Fatalf("create %q: empty version", key)
	}
	// The store must keep its own copies: callers reuse their buffers.
	data[0], md["owner"] = 'J', "mallory"

	want, wantMD := []byte("hello, object"), map[string]string{"owner": "alice"}
	o := s.get(t, key)
	checkObject(t, o, key, want, wantMD, res.Version)
	o.Data[0], o.Metadata["owner"] = 'X', "eve"
	checkObject(t, s.get(t, key), key, want, wantMD, res.Version)

	a, err := s.Bucket.Stat(t.Context(), key)
	if err != nil {
		t.Fatalf("stat %q: %v", key, err)
	}
	if a.Key != key || a.Version != res.Version || a.Size != int64(len(want)) {
		t.Errorf("stat %q: key %q version %q size %d, want %q %q %d", key, a.Key, a.Version, a.Size, key, res.Version, len(want))
	}
	checkMetadata(t, "stat", key, a.Metadata, wantMD)

	// An empty object is an object.
	empty := s.key("createget/empty")
	res = s.create(t, empty, nil, nil)
	checkObject(t, s.get(t, empty), empty, nil, nil, res.Version)
}

func (s *suite) testPreconditions(t *testing.T) {
	ctx := t.Context()
	missing := s.key("preconditions/missing")
	_, err := s.Bucket.Replace(ctx, missing, []byte("x"), nil, "some-version")
	wantErr(t, err, "replace", missing, providers.ErrPrecondition)
	err = s.Bucket.Delete(ctx, missing, "some-version")
	wantErr(t, err, "delete", missing, providers.ErrPrecondition)
	if _, err := s.Bucket.Stat(ctx, missing); !errors.Is(err, providers.ErrNotFound) {
		t.Errorf("stat %q after refused writes: %v, want ErrNotFound", missing, err)
	}

	key := s.key("preconditions/obj")
	stale := s.create(t, key, []byte("first"), nil).Version
	data, md := []byte("second"), map[string]string{"gen": "2"}
	res, err := s.Bucket.Replace(ctx, key, data, md, stale)
	if err != nil {
		t.Fatalf("replace %q: %v", key, err)
	}
	_, err = s.Bucket.Create(ctx, key, []byte("again"), nil)
	wantErr(t, err, "create", key, providers.ErrPrecondition)
	// A stale, an empty and a made-up version must all be refused: a store
	// that drops an empty condition would overwrite unconditionally.
	for _, v := range []string{stale, "", "no-such-version"} {
		_, err = s.Bucket.Replace(ctx, key, []byte("third"), nil, v)
		wantErr(t, err, "replace", key, providers.ErrPrecondition)
		if v != "" && s.DeleteUnconditional {
			continue
		}
		err = s.Bucket.Delete(ctx, key, v)
		wantErr(t, err, "delete", key, providers.ErrPrecondition)
	}
	checkObject(t, s.get(t, key), key, data, md, res.Version)
}

func (s *suite) testDelete(t *testing.T) {
	ctx := t.Context()
	key := s.key("delete/obj")
	res := s.create(t, key, []byte("short-lived"), nil)
	if err := s.Bucket.Delete(ctx, key, res.Version); err != nil {
		t.Fatalf("delete %q: %v", key, err)
	}
	_, err := s.Bucket.Get(ctx, key, 0)
	wantErr(t, err, "get", key, providers.ErrNotFound)
	_, err = s.Bucket.Stat(ctx, key)
	wantErr(t, err, "stat", key, providers.ErrNotFound)
	err = s.Bucket.Delete(ctx, key, res.Version)
	wantErr(t, err, "delete", key, providers.ErrPrecondition)
	// The key is free again.
	res = s.create(t, key, []byte("reborn"), nil)
	checkObject(t, s.get(t, key), key, []byte("reborn"), nil, res.Version)
}

func (s *suite) testMetadata(t *testing.T) {
	ctx := t.Context()
	key := s.key("metadata/obj")
	md := map[string]string{
		"owner":      "alice smith",
		"purpose":    "nightly build of the main branch",
		"retry-2":    "3",
		"lower-case": "Mixed Case Value",
	}
	res := s.create(t, key, []byte("x"), md)
	checkObject(t, s.get(t, key), key, []byte("x"), md, res.Version)
	a, err := s.Bucket.Stat(ctx, key)
	if err != nil {
		t.Fatalf("stat %q: %v", key, err)
	}
	checkMetadata(t, "stat", key, a.Metadata, md)

	// Replace sets the metadata wholesale: keys not given are gone.
	md2 := map[string]string{"owner": "bob jones"}
	res, err = s.Bucket.Replace(ctx, key, []byte("y"), md2, res.Version)
	if err != nil {
		t.Fatalf("replace %q: %v", key, err)
	}
	checkObject(t, s.get(t, key), key, []byte("y"), md2, res.Version)
	res, err = s.Bucket.Replace(ctx, key, []byte("z"), nil, res.Version)
	if err != nil {
		t.Fatalf("replace %q: %v", key, err)
	}
	checkObject(t, s.get(t, key), key, []byte("z"), nil, res.Version)
}

func (s *suite) testMaxBytes(t *testing.T) {
	key := s.key("maxbytes/obj")
	data := bytes.Repeat([]byte("0123456789"), 10)
	res := s.create(t, key, data, nil)
	_, err := s.Bucket.Get(t.Context(), key, int64(len(data))-1)
	wantErr(t, err, "get", key, providers.ErrTooLarge)
	for _, limit := range []int64{int64(len(data)), int64(len(data)) + 1, 0, -1} {
		o, err := s.Bucket.Get(t.Context(), key, limit)
		if err != nil {
			t.Errorf("get %q with maxBytes %d: %v", key, limit, err)
			continue
		}
		checkObject(t, o, key, data, nil, res.Version)
	}
}

// testStreamedWrites: CreateFrom and ReplaceFrom write exactly the body's
// bytes, read from a file as they are sent, under the same preconditions
// as Create and Replace.
func (s *suite) testStreamedWrites(t *testing.T) {
	ctx := t.Context()
	key := s.key("streamed/obj")
	f, err := os.CreateTemp(t.TempDir(), "body")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := make([]byte, 3<<20+17)
	for i := range want {
		want[i] = byte(i*7 + i>>12)
	}
	if _, err := f.Write(want); err != nil {
		t.Fatal(err)
	}
	// A section that starts inside the file, as standard input may.
	body := io.NewSectionReader(f, 17, int64(len(want)-17))
	res, err := s.Bucket.CreateFrom(ctx, key, body, map[string]string{"note": "streamed"})
	if err != nil {
		t.Fatalf("create from %q: %v", key, err)
	}
	checkObject(t, s.get(t, key), key, want[17:], map[string]string{"note": "streamed"}, res.Version)
	// A refusal of a large body: S3 servers (MinIO, versitygw) answer a
	// conditional PUT they refuse by its headers and close the connection
	// before reading the 3 MB body, which the client cannot tell from a
	// lost reply. Either answer is safe; success is not, and the object
	// must stay as it was.
	refused := func(op string, err error) {
		t.Helper()
		if !errors.Is(err, providers.ErrPrecondition) && !errors.Is(err, providers.ErrUnknownOutcome) {
			t.Errorf("%s %q over a refusing precondition: %v, want ErrPrecondition (or ErrUnknownOutcome)", op, key, err)
		}
	}
	_, err = s.Bucket.CreateFrom(ctx, key, body, nil)
	refused("create", err)
	checkObject(t, s.get(t, key), key, want[17:], map[string]string{"note": "streamed"}, res.Version)
	res2, err := s.Bucket.ReplaceFrom(ctx, key, io.NewSectionReader(f, 0, 1<<20), nil, res.Version)
	if err != nil {
		t.Fatalf("replace from %q: %v", key, err)
	}
	checkObject(t, s.get(t, key), key, want[:1<<20], nil, res2.Version)
	if res2.Version == res.Version {
		t.Errorf("replace from kept version %q", res.Version)
	}
	_, err = s.Bucket.ReplaceFrom(ctx, key, body, nil, res.Version)
	refused("replace", err)
	checkObject(t, s.get(t, key), key, want[:1<<20], nil, res2.Version)
}

func (s *suite) testVersions(t *testing.T) {
	ctx := t.Context()
	key := s.key("versions/obj")
	repeats := s.Bucket.Properties().VersionsRepeat
	seen := map[string]string{} // version -> the write that produced it
	record := func(what string, res providers.WriteResult, err error, identical bool) string {
		t.Helper()
		if err != nil {
			t.Fatalf("%s %q: %v", what, key, err)
		}
		a, err := s.Bucket.Stat(ctx, key)
		if err != nil {
			t.Fatalf("stat %q: %v", key, err)
		}
		if a.Version != res.Version {
			t.Errorf("%s %q: reported version %q, stat says %q", what, key, res.Version, a.Version)
		}
		if earlier, dup := seen[res.Version]; dup {
			switch {
			case !identical:
				t.Errorf("%s %q: version %q repeats %s although the bytes differ", what, key, res.Version, earlier)
			case repeats:
				t.Logf("%s %q: version %q repeats %s (the store declares VersionsRepeat)", what, key, res.Version, earlier)
			default:
				t.Errorf("%s %q: version %q repeats %s, but the store does not declare VersionsRepeat", what, key, res.Version, earlier)
			}
		} else if identical && repeats {
			t.Logf("%s %q: identical bytes got a fresh version (VersionsRepeat is declared, and allowed)", what, key)
		}
		seen[res.Version] = what
		return res.Version
	}
	res, err := s.Bucket.Create(ctx, key, []byte("one"), nil)
	s.cleanup(t, key)
	v := record("create one", res, err, false)
	res, err = s.Bucket.Replace(ctx, key, []byte("two"), nil, v)
	v = record("replace two", res, err, false)
	res, err = s.Bucket.Replace(ctx, key, []byte("two"), nil, v)
	v = record("replace two again", res, err, true)
	res, err = s.Bucket.Replace(ctx, key, []byte("one"), nil, v)
	v = record("replace one again", res, err, true)
	if err := s.Bucket.Delete(ctx, key, v); err != nil {
		t.Fatalf("delete %q: %v", key, err)
	}
	res, err = s.Bucket.Create(ctx, key, []byte("one"), nil)
	record("recreate one", res, err, true)
}

func (s *suite) testTimestamps(t *testing.T) {
	ctx := t.Context()
	key := s.key("timestamps/obj")
	// Clocks of remote stores drift, so only absurd values fail.
	const sane = time.Hour
	check := func(what string, ts time.Time) {
		t.Helper()
		if ts.IsZero() {
			t.Logf("%s: not reported", what)
			return
		}
		skew := time.Until(ts)
		t.Logf("%s: %s (%v from local clock)", what, ts.Format(time.RFC3339Nano), skew.Round(time.Microsecond))
		if skew > sane || skew < -sane {
			t.Errorf("%s of %q: %v is more than %v from the local clock", what, key, ts, sane)
		}
	}
	res := s.create(t, key, []byte("tick"), nil)
	check("create LastModified", res.LastModified)
	check("create StoreTime", res.StoreTime)
	o := s.get(t, key)
	check("get LastModified", o.LastModified)
	check("get StoreTime", o.StoreTime)
	a, err := s.Bucket.Stat(ctx, key)
	if err != nil {
		t.Fatalf("stat %q: %v", key, err)
	}
	check("stat LastModified", a.LastModified)
	check("stat StoreTime", a.StoreTime)
	t.Logf("declared timestamp granularity %v", s.Bucket.Properties().TimestampGranularity)
}
