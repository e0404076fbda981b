// Package providertest is the conformance suite every store driver runs
// from its own tests. It runs on the driver through the portable
// *providers.Bucket (as the provider's New or Open returns it, or
// providers.NewBucket over the driver) and uses only the providers.Store
// contract, so a driver that passes it behaves the way the lease protocol
// expects. It takes a Bucket, not any Store, so that what it tests is a
// driver and not a layer that could stand in for the Bucket's checks.
package providertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/objlease/objlease/providers"
)

// Config describes the driver under test.
type Config struct {
	// Bucket is the portable Bucket over the driver under test.
	Bucket *providers.Bucket
	// Prefix starts every key the suite writes (unique per run, so shared
	// buckets are safe); may be "".
	Prefix string
	// Racers and Rounds size the race tests (defaults 20 and 20).
	Racers, Rounds int

	// MissingBucket is a Bucket like Bucket on a bucket that does not exist.
	// It is required: a store without buckets of its own (mem, file) gives
	// one on a namespace nobody has made, and sets CreatesBuckets.
	MissingBucket *providers.Bucket
	// CreatesBuckets: the store has no buckets to be missing; a namespace
	// nobody made (MissingBucket) reads as empty and can be written to.
	CreatesBuckets bool
	// Unordered: the store lists keys out of lexical order (S3 Express One
	// Zone directory buckets); List must still return each key once.
	Unordered bool
	// DeleteUnconditional: the store is known to ignore the version of a
	// conditional DELETE (MinIO removes the object whatever If-Match
	// says; probe.Run reports it as probe.Report.DeleteUnconditional).
	// Preconditions then sends no DELETE with a stale or made-up version,
	// which would remove the object; every other check stays.
	DeleteUnconditional bool
	// As checks what Bucket reaches with As and errors.As; nil for a driver
	// that reaches nothing native (As must refuse a target of no known
	// type either way).
	As *AsCheck
}

// AsCheck is how a provider's native types are reached.
type AsCheck struct {
	// Store fails unless s.As reaches the native client.
	Store func(s providers.Store) error
	// Error fails unless errors.As reaches the native error in err, the
	// error of a Get of a missing key.
	Error func(err error) error
}

// Run runs every conformance test as subtests of t.
func Run(t *testing.T, cfg Config) {
	if cfg.Bucket == nil || cfg.MissingBucket == nil {
		t.Fatal("providertest: Config.Bucket and Config.MissingBucket are required (MissingBucket: on a bucket that does not exist, with CreatesBuckets for a store without buckets)")
	}
	if cfg.Racers <= 0 {
		cfg.Racers = 20
	}
	if cfg.Rounds <= 0 {
		cfg.Rounds = 20
	}
	s := &suite{Config: cfg}
	t.Run("NotFound", s.testNotFound)
	t.Run("CreateGet", s.testCreateGet)
	t.Run("CreateRace", s.testCreateRace)
	t.Run("ReplaceRace", s.testReplaceRace)
	t.Run("Preconditions", s.testPreconditions)
	t.Run("Delete", s.testDelete)
	t.Run("Metadata", s.testMetadata)
	t.Run("MaxBytes", s.testMaxBytes)
	t.Run("List", s.testList)
	t.Run("UnicodeKeys", s.testUnicodeKeys)
	t.Run("KeysAsGiven", s.testKeysAsGiven)
	t.Run("StreamedWrites", s.testStreamedWrites)
	t.Run("Versions", s.testVersions)
	t.Run("Timestamps", s.testTimestamps)
	t.Run("CancelledBeforeSending", s.testCancelledBeforeSending)
	t.Run("MissingBucket", s.testMissingBucket)
	t.Run("As", s.testAs)
}

type suite struct{ Config }

func (s *suite) key(name string) string { return s.Prefix + name }

// wantErr fails t unless err matches sentinel and is a *providers.Error for
// op on key.
func wantErr(t *testing.T, err error, op, key string, sentinel error) {
	t.Helper()
	if err == nil {
		t.Errorf("%s %q: got success, want %v", op, key, sentinel)
		return
	}
	if !errors.Is(err, sentinel) {
		t.Errorf("%s %q: got %v, want %v", op, key, err, sentinel)
	}
	checkError(t, err, op, key)
}

// checkError fails t unless err is a *providers.Error naming op and key.
func checkError(t *testing.T, err error, op, key string) {
	t.Helper()
	var pe *providers.Error
	if !errors.As(err, &pe) {
		t.Errorf("%s %q: error %v (%T) is not a *providers.Error", op, key, err, err)
		return
	}
	if pe.Op != op || pe.Key != key {
		t.Errorf("%s %q: error names op %q key %q: %v", op, key, pe.Op, pe.Key, err)
	}
}

// create writes a new object and removes it when the test ends.
func (s *suite) create(t *testing.T, key string, data []byte, md map[string]string) providers.WriteResult {
	t.Helper()
	res, err := s.Bucket.Create(t.Context(), key, data, md)
	if err != nil {
		t.Fatalf("create %q: %v", key, err)
	}
	s.cleanup(t, key)
	return res
}

// cleanup deletes key, at whatever version it then has, when the test ends.
func (s *suite) cleanup(t *testing.T, key string) {
	t.Cleanup(func() {
		// t.Context is already cancelled when cleanups run.
		ctx := context.Background()
		a, err := s.Bucket.Stat(ctx, key)
		if errors.Is(err, providers.ErrNotFound) {
			return
		}
		if err == nil {
			err = s.Bucket.Delete(ctx, key, a.Version)
		}
		if err != nil {
			t.Logf("cleanup of %q: %v", key, err)
		}
	})
}

func (s *suite) get(t *testing.T, key string) *providers.Object {
	t.Helper()
	o, err := s.Bucket.Get(t.Context(), key, 0)
	if err != nil {
		t.Fatalf("get %q: %v", key, err)
	}
	return o
}

// checkObject fails t unless o holds data and md at version.
func checkObject(t *testing.T, o *providers.Object, key string, data []byte, md map[string]string, version string) {
	t.Helper()
	if o.Key != key {
		t.Errorf("get %q: Attrs.Key = %q", key, o.Key)
	}
	if !bytes.Equal(o.Data, data) {
		t.Errorf("get %q: data = %q, want %q", key, o.Data, data)
	}
	if o.Size != int64(len(data)) {
		t.Errorf("get %q: Size = %d, want %d", key, o.Size, len(data))
	}
	checkMetadata(t, "get", key, o.Metadata, md)
	if o.Version != version {
		t.Errorf("get %q: version = %q, want %q", key, o.Version, version)
	}
}

func checkMetadata(t *testing.T, op, key string, got, want map[string]string) {
	t.Helper()
	// nil and empty are the same: stores need not tell them apart.
	if len(got) != 0 || len(want) != 0 {
		if !maps.Equal(got, want) {
			t.Errorf("%s %q: metadata = %q, want %q", op, key, got, want)
		}
	}
}

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

// race runs fn once per racer, all released together, and returns the
// results in racer order.
func race[R any](racers int, fn func(i int) R) []R {
	out := make([]R, racers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range racers {
		wg.Go(func() {
			<-start
			out[i] = fn(i)
		})
	}
	close(start)
	wg.Wait()
	return out
}

type writeOutcome struct {
	res  providers.WriteResult
	err  error
	data []byte
}

// judgeRace fails t unless exactly one outcome succeeded and every other lost
// with ErrPrecondition or ErrConflict; it returns the winner.
func judgeRace(t *testing.T, op, key string, round int, outs []writeOutcome) (winner writeOutcome, precondition, conflict int) {
	t.Helper()
	wins := 0
	for _, o := range outs {
		switch {
		case o.err == nil:
			wins++
			winner = o
		case errors.Is(o.err, providers.ErrPrecondition):
			precondition++
		case errors.Is(o.err, providers.ErrConflict):
			conflict++
		default:
			t.Errorf("round %d: %s %q: unexpected error: %v", round, op, key, o.err)
		}
		if o.err != nil {
			checkError(t, o.err, op, key)
		}
	}
	if wins != 1 {
		t.Fatalf("round %d: %s %q: %d winners among %d racers, want exactly 1", round, op, key, wins, len(outs))
	}
	return winner, precondition, conflict
}

func (s *suite) testCreateRace(t *testing.T) {
	var precondition, conflict int
	for round := range s.Rounds {
		key := s.key(fmt.Sprintf("createrace/%d", round))
		s.cleanup(t, key)
		outs := race(s.Racers, func(i int) writeOutcome {
			data := fmt.Appendf(nil, "round %d racer %d", round, i)
			res, err := s.Bucket.Create(t.Context(), key, data, nil)
			return writeOutcome{res, err, data}
		})
		w, p, c := judgeRace(t, "create", key, round, outs)
		precondition, conflict = precondition+p, conflict+c
		checkObject(t, s.get(t, key), key, w.data, nil, w.res.Version)
	}
	t.Logf("%d rounds of %d racers: losers got %d ErrPrecondition, %d ErrConflict", s.Rounds, s.Racers, precondition, conflict)
}

func (s *suite) testReplaceRace(t *testing.T) {
	key := s.key("replacerace/obj")
	version := s.create(t, key, []byte("start"), nil).Version
	var precondition, conflict int
	for round := range s.Rounds {
		outs := race(s.Racers, func(i int) writeOutcome {
			data := fmt.Appendf(nil, "round %d racer %d", round, i)
			res, err := s.Bucket.Replace(t.Context(), key, data, nil, version)
			return writeOutcome{res, err, data}
		})
		w, p, c := judgeRace(t, "replace", key, round, outs)
		precondition, conflict = precondition+p, conflict+c
		checkObject(t, s.get(t, key), key, w.data, nil, w.res.Version)
		version = w.res.Version
	}
	t.Logf("%d rounds of %d racers: losers got %d ErrPrecondition, %d ErrConflict", s.Rounds, s.Racers, precondition, conflict)
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

// A write whose context is done before it is sent is never sent: it fails
// with the context's error, its outcome known (not ErrUnknownOutcome), and
// nothing changes.
func (s *suite) testCancelledBeforeSending(t *testing.T) {
	key := s.key("cancelled/obj")
	res := s.create(t, key, []byte("kept"), nil)
	fresh := s.key("cancelled/fresh")
	s.cleanup(t, fresh)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	check := func(op, key string, err error) {
		t.Helper()
		if !errors.Is(err, context.Canceled) || errors.Is(err, providers.ErrUnknownOutcome) {
			t.Errorf("%s %q with a cancelled context: %v, want context.Canceled and no ErrUnknownOutcome", op, key, err)
		}
		if err != nil {
			checkError(t, err, op, key)
		}
	}
	_, err := s.Bucket.Create(ctx, fresh, []byte("new"), nil)
	check("create", fresh, err)
	_, err = s.Bucket.Replace(ctx, key, []byte("changed"), nil, res.Version)
	check("replace", key, err)
	check("delete", key, s.Bucket.Delete(ctx, key, res.Version))

	checkObject(t, s.get(t, key), key, []byte("kept"), nil, res.Version)
	if _, err := s.Bucket.Stat(t.Context(), fresh); !errors.Is(err, providers.ErrNotFound) {
		t.Errorf("stat %q after a cancelled create: %v, want ErrNotFound", fresh, err)
	}

	// Every call reports why its context ended (a lost lease, a signal),
	// not only that it did, whether it was cancelled or its deadline
	// passed.
	why := errors.New("the lease was lost")
	cancelled, cancelCause := context.WithCancelCause(t.Context())
	cancelCause(why)
	expired, stop := context.WithDeadlineCause(t.Context(), time.Now().Add(-time.Second), why)
	defer stop()
	for name, ctx := range map[string]context.Context{"cancelled": cancelled, "past its deadline": expired} {
		cause := func(op string, err error) {
			t.Helper()
			if !errors.Is(err, why) {
				t.Errorf("%s with a context %s: %v, want the context's cause %q", op, name, err, why)
			}
		}
		_, err := s.Bucket.Create(ctx, fresh, []byte("new"), nil)
		cause("create", err)
		_, err = s.Bucket.Replace(ctx, key, []byte("changed"), nil, res.Version)
		cause("replace", err)
		cause("delete", s.Bucket.Delete(ctx, key, res.Version))
		_, err = s.Bucket.Get(ctx, key, 0)
		cause("get", err)
		_, err = s.Bucket.Stat(ctx, key)
		cause("stat", err)
		_, err = s.Bucket.List(ctx, s.key("cancelled/"), "", 10)
		cause("list", err)
	}
}

// A bucket that does not exist is ErrNoBucket, not a missing object: a
// lease in a bucket nobody created must not read as "free".
func (s *suite) testMissingBucket(t *testing.T) {
	st := s.MissingBucket
	ctx := t.Context()
	key := s.key("nobucket/obj")
	if s.CreatesBuckets {
		if _, err := st.Get(ctx, key, 0); !errors.Is(err, providers.ErrNotFound) {
			t.Fatalf("get %q in a namespace nobody made: %v, want ErrNotFound", key, err)
		}
		if _, err := st.Create(ctx, key, []byte("x"), nil); err != nil {
			t.Fatalf("create %q in a namespace nobody made: %v", key, err)
		}
		page, err := st.List(ctx, s.key("nobucket/"), "", 10)
		if err != nil || len(page.Objects) != 1 || page.Objects[0].Key != key {
			t.Fatalf("list after the create: %+v, %v, want %q alone", page, err, key)
		}
		return
	}
	_, err := st.Get(ctx, key, 0)
	wantErr(t, err, "get", key, providers.ErrNoBucket)
	_, err = st.Stat(ctx, key)
	wantErr(t, err, "stat", key, providers.ErrNoBucket)
	_, err = st.Create(ctx, key, []byte("x"), nil)
	wantErr(t, err, "create", key, providers.ErrNoBucket)
	// A version of the store's own form, so that none is refused unsent.
	version := s.create(t, s.key("nobucket/real"), []byte("x"), nil).Version
	_, err = st.Replace(ctx, key, []byte("x"), nil, version)
	wantErr(t, err, "replace", key, providers.ErrNoBucket)
	// S3's Delete asks HEAD first, whose bare 404 cannot name the bucket.
	err = st.Delete(ctx, key, version)
	if !errors.Is(err, providers.ErrNoBucket) && !errors.Is(err, providers.ErrPrecondition) {
		t.Errorf("delete %q: %v, want ErrNoBucket (or ErrPrecondition where the store cannot tell)", key, err)
	}
	_, err = st.List(ctx, s.key("nobucket/"), "", 10)
	wantErr(t, err, "list", s.key("nobucket/"), providers.ErrNoBucket)
}

func (s *suite) testAs(t *testing.T) {
	var nothing *struct{ unknown int }
	if s.Bucket.As(&nothing) {
		t.Error("As accepted a target of no type the store knows")
	}
	if s.As == nil {
		return
	}
	if s.As.Store != nil {
		if err := s.As.Store(s.Bucket); err != nil {
			t.Errorf("As: %v", err)
		}
	}
	if s.As.Error != nil {
		key := s.key("as/missing")
		_, err := s.Bucket.Get(t.Context(), key, 0)
		if err == nil {
			t.Fatalf("get %q: success, want ErrNotFound", key)
		}
		if err := s.As.Error(err); err != nil {
			t.Errorf("errors.As on %v: %v", key, err)
		}
	}
}
