package integration

// Tests of the gcs store against fake-gcs-server. With
// OBJLEASE_TEST_GCS=gs://BUCKET/PREFIX/ they run against that real bucket
// instead, under that prefix, with Application Default Credentials.

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"
	htransport "google.golang.org/api/transport/http"

	"github.com/objlease/objlease/integration/emulator"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/gcsstore"
	"github.com/objlease/objlease/providers/providertest"
)

// gcsTarget is the bucket a test runs against.
type gcsTarget struct {
	bucket string
	prefix string // unique to the test
	// endpoint and host address the emulator; both empty on real GCS.
	endpoint, host string
}

// newGCSTarget returns the shared fake-gcs-server bucket or, if
// OBJLEASE_TEST_GCS is set (gs://BUCKET/PREFIX/), that real bucket, reached
// with Application Default Credentials; either way with a fresh key prefix.
func newGCSTarget(t *testing.T) gcsTarget {
	t.Helper()
	if raw := os.Getenv("OBJLEASE_TEST_GCS"); raw != "" {
		u, err := url.Parse(raw)
		if err != nil || u.Scheme != "gs" || u.Host == "" {
			t.Fatalf("OBJLEASE_TEST_GCS=%q: want gs://BUCKET/PREFIX/", raw)
		}
		return gcsTarget{bucket: u.Host, prefix: strings.TrimPrefix(u.Path, "/") + emulator.Prefix(t)}
	}
	g := emulator.FakeGCS(t)
	return gcsTarget{bucket: g.Bucket, prefix: emulator.Prefix(t), endpoint: g.Endpoint, host: g.Host}
}

func (g gcsTarget) real() bool { return g.endpoint == "" }

// url names key in the target's bucket for providers.Open.
func (g gcsTarget) url(key string) string {
	u := (&url.URL{Scheme: "gs", Host: g.bucket, Path: "/" + key}).String()
	if !g.real() {
		u += "?endpoint=" + url.QueryEscape(g.endpoint)
	}
	return u
}

// open opens key's store through the "gs" URL opener.
func (g gcsTarget) open(t *testing.T, key string) (*providers.Bucket, string) {
	t.Helper()
	s, k, err := providers.Open(t.Context(), g.url(key))
	if err != nil {
		t.Fatalf("open %s: %v", g.url(key), err)
	}
	t.Cleanup(func() { s.Close() })
	return s, k
}

// client builds an SDK client, as a user would, whose requests pass through
// rt (nil: the default transport).
func (g gcsTarget) client(t *testing.T, rt http.RoundTripper) *storage.Client {
	t.Helper()
	if rt == nil {
		rt = http.DefaultTransport
	}
	var opts []option.ClientOption
	if g.real() {
		var err error
		if rt, err = htransport.NewTransport(t.Context(), rt, option.WithScopes(storage.ScopeFullControl)); err != nil {
			t.Fatalf("credentials for gs://%s: %v", g.bucket, err)
		}
	} else {
		opts = append(opts, option.WithEndpoint(g.endpoint), option.WithoutAuthentication())
	}
	c, err := storage.NewClient(t.Context(), append(opts, option.WithHTTPClient(&http.Client{Transport: rt}))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func gcsConformanceConfig(t *testing.T, g gcsTarget, s *providers.Bucket, sub string) providertest.Config {
	cfg := providertest.Config{Bucket: s, Prefix: g.prefix + sub,
		MissingBucket: gcsstore.New(g.client(t, nil), randomName()),
		As: &providertest.AsCheck{
			Store: func(s providers.Store) error {
				var c *storage.Client
				if !s.As(&c) || c == nil {
					return errors.New("As(**storage.Client) did not reach the client")
				}
				return nil
			},
			Error: func(err error) error {
				if !errors.Is(err, storage.ErrObjectNotExist) {
					return errors.New("the SDK's storage.ErrObjectNotExist is not in the chain")
				}
				return nil
			},
		}}
	if g.real() {
		// GCS throttles writes to one object above about one a second.
		cfg.Racers, cfg.Rounds = 5, 3
	}
	return cfg
}

func TestGCSConformance(t *testing.T) {
	g := newGCSTarget(t)
	t.Run("Open", func(t *testing.T) {
		s, _ := g.open(t, "")
		providertest.Run(t, gcsConformanceConfig(t, g, s, "open/"))
	})
	// A client built by the user reads through the XML API, the SDK's default.
	t.Run("New", func(t *testing.T) {
		providertest.Run(t, gcsConformanceConfig(t, g, gcsstore.New(g.client(t, nil), g.bucket), "new/"))
	})
}

// mustCreate writes key and deletes it when the test ends.
func mustCreate(t *testing.T, s providers.Store, key string, data []byte) providers.WriteResult {
	t.Helper()
	res, err := s.Create(t.Context(), key, data, nil)
	if err != nil {
		t.Fatalf("create %q: %v", key, err)
	}
	t.Cleanup(func() {
		if a, err := s.Stat(context.Background(), key); err == nil {
			s.Delete(context.Background(), key, a.Version)
		}
	})
	return res
}

func wantGCSErr(t *testing.T, err error, op, key string, sentinel error) {
	t.Helper()
	var pe *providers.Error
	switch {
	case !errors.Is(err, sentinel):
		t.Errorf("%s %q: got %v, want %v", op, key, err, sentinel)
	case !errors.As(err, &pe) || pe.Op != op || pe.Key != key:
		t.Errorf("%s %q: error does not name op and key: %v", op, key, err)
	}
}

// GCS answers a refused precondition with 412 conditionNotMet; the native
// error stays reachable.
func TestGCSPreconditionFailed(t *testing.T) {
	g := newGCSTarget(t)
	s := gcsstore.New(g.client(t, nil), g.bucket)
	ctx := t.Context()
	key := g.prefix + "obj"
	v1 := mustCreate(t, s, key, []byte("one")).Version
	if _, err := s.Replace(ctx, key, []byte("two"), nil, v1); err != nil {
		t.Fatalf("replace %q: %v", key, err)
	}
	_, errCreate := s.Create(ctx, key, []byte("again"), nil)
	_, errReplace := s.Replace(ctx, key, []byte("stale"), nil, v1)
	_, errMissing := s.Replace(ctx, g.prefix+"missing", []byte("x"), nil, v1)
	for _, c := range []struct {
		op, key string
		err     error
	}{{"create", key, errCreate}, {"replace", key, errReplace}, {"replace", g.prefix + "missing", errMissing}} {
		wantGCSErr(t, c.err, c.op, c.key, providers.ErrPrecondition)
		var ge *googleapi.Error
		if !errors.As(c.err, &ge) || ge.Code != http.StatusPreconditionFailed {
			t.Errorf("%s %q: native error not a 412 *googleapi.Error: %v", c.op, c.key, c.err)
		}
	}
}

// fake-gcs-server ignores the precondition of a DELETE that names no
// generation. The store's delete names it, so a stale delete is refused on
// the emulator too; the plain form is checked only where GCS itself answers.
func TestGCSStaleDeleteRefused(t *testing.T) {
	g := newGCSTarget(t)
	c := g.client(t, nil)
	s := gcsstore.New(c, g.bucket)
	ctx := t.Context()
	key := g.prefix + "obj"
	stale := mustCreate(t, s, key, []byte("one")).Version
	res, err := s.Replace(ctx, key, []byte("two"), nil, stale)
	if err != nil {
		t.Fatalf("replace %q: %v", key, err)
	}
	wantGCSErr(t, s.Delete(ctx, key, stale), "delete", key, providers.ErrPrecondition)
	a, err := s.Stat(ctx, key)
	if err != nil || a.Version != res.Version {
		t.Fatalf("stat %q after a refused delete: %+v, %v; want version %q", key, a, err, res.Version)
	}

	plain := g.prefix + "plain"
	gen, _ := strconv.ParseInt(mustCreate(t, s, plain, []byte("one")).Version, 10, 64)
	if _, err := s.Replace(ctx, plain, []byte("two"), nil, strconv.FormatInt(gen, 10)); err != nil {
		t.Fatalf("replace %q: %v", plain, err)
	}
	err = c.Bucket(g.bucket).Object(plain).If(storage.Conditions{GenerationMatch: gen}).Delete(ctx)
	switch {
	case g.real() && err == nil:
		t.Errorf("GCS deleted %q although its generation is no longer %d", plain, gen)
	case !g.real() && err == nil:
		t.Logf("fake-gcs-server ignored the precondition of a plain delete, as known")
	}
}

// Generations are versions: new on every write, even of identical bytes or
// after a delete, and increasing. They are not a counter, so not fencing
// tokens.
func TestGCSGenerationsAreVersions(t *testing.T) {
	g := newGCSTarget(t)
	s, _ := g.open(t, "")
	ctx := t.Context()
	key := g.prefix + "obj"
	var gens []int64
	add := func(what string, res providers.WriteResult, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s %q: %v", what, key, err)
		}
		gen, err := strconv.ParseInt(res.Version, 10, 64)
		if err != nil || gen <= 0 {
			t.Fatalf("%s %q: version %q is not a generation", what, key, res.Version)
		}
		if n := len(gens); n > 0 && gen <= gens[n-1] {
			t.Errorf("%s %q: generation %d after %d", what, key, gen, gens[n-1])
		}
		gens = append(gens, gen)
	}
	res, err := s.Create(ctx, key, []byte("same"), nil)
	add("create", res, err)
	res, err = s.Replace(ctx, key, []byte("same"), nil, res.Version)
	add("replace with identical bytes", res, err)
	if err := s.Delete(ctx, key, res.Version); err != nil {
		t.Fatalf("delete %q: %v", key, err)
	}
	res, err = s.Create(ctx, key, []byte("same"), nil)
	add("re-create", res, err)
	s.Delete(ctx, key, res.Version)
	t.Logf("generations %v: steps of %d and %d", gens, gens[1]-gens[0], gens[2]-gens[1])
}

// dropReply lets requests reach the store and, while armed, throws away the
// reply to the next request that matches and fails it as a lost response.
type dropReply struct {
	base  http.RoundTripper
	match func(*http.Request) bool

	mu      sync.Mutex
	armed   bool
	dropped int // replies thrown away
	sent    int // matching requests that reached the store
}

func (d *dropReply) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := d.base.RoundTrip(req)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil || !d.match(req) {
		return resp, err
	}
	d.sent++
	if !d.armed {
		return resp, nil
	}
	d.armed = false
	d.dropped++
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return nil, errors.New("connection reset by peer (reply dropped by the test)")
}

func (d *dropReply) arm() (sentBefore int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.armed, d.dropped = true, 0
	return d.sent
}

func (d *dropReply) counts() (sent, dropped int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.sent, d.dropped
}

// A write whose reply is lost is reported as ErrUnknownOutcome, not as the
// 412 an SDK retry would earn, and a read afterwards shows it landed.
func TestGCSLostResponse(t *testing.T) {
	g := newGCSTarget(t)
	writes := func(r *http.Request) bool { return r.Method == http.MethodPost || r.Method == http.MethodDelete }
	drop := &dropReply{base: http.DefaultTransport, match: writes}
	s := gcsstore.New(g.client(t, drop), g.bucket)
	ctx := t.Context()
	key := g.prefix + "obj"

	lost := func(op string, write func() error) {
		t.Helper()
		before := drop.arm()
		wantGCSErr(t, write(), op, key, providers.ErrUnknownOutcome)
		if sent, dropped := drop.counts(); sent != before+1 || dropped != 1 {
			t.Fatalf("%s %q: %d requests reached the store, %d replies dropped; want 1 and 1", op, key, sent-before, dropped)
		}
	}

	lost("create", func() error { _, err := s.Create(ctx, key, []byte("first"), nil); return err })
	t.Cleanup(func() {
		if a, err := s.Stat(context.Background(), key); err == nil {
			s.Delete(context.Background(), key, a.Version)
		}
	})
	o, err := s.Get(ctx, key, 0)
	if err != nil || !bytes.Equal(o.Data, []byte("first")) {
		t.Fatalf("get %q after the lost create: %v, %v; want it landed", key, o, err)
	}
	// What a retry by the SDK would have answered.
	_, err = s.Create(ctx, key, []byte("first"), nil)
	wantGCSErr(t, err, "create", key, providers.ErrPrecondition)

	first := o.Version
	lost("replace", func() error { _, err := s.Replace(ctx, key, []byte("second"), nil, first); return err })
	o, err = s.Get(ctx, key, 0)
	if err != nil || !bytes.Equal(o.Data, []byte("second")) || o.Version == first {
		t.Fatalf("get %q after the lost replace: %v, %v; want it landed", key, o, err)
	}

	second := o.Version
	lost("delete", func() error { return s.Delete(ctx, key, second) })
	_, err = s.Stat(ctx, key)
	wantGCSErr(t, err, "stat", key, providers.ErrNotFound)
}

// Keys with spaces, non-ASCII letters and characters that URLs treat
// specially work through the URL opener and the store alike.
func TestGCSUnicodeKeys(t *testing.T) {
	g := newGCSTarget(t)
	ctx := t.Context()
	for _, name := range []string{"a b/ключ 🔒", "q?x=1&y=2#frag", "100% + plus", "trailing space "} {
		s, key := g.open(t, g.prefix+name)
		if key != g.prefix+name {
			t.Fatalf("open %s: key %q, want %q", g.url(g.prefix+name), key, g.prefix+name)
		}
		res := mustCreate(t, s, key, []byte(name))
		o, err := s.Get(ctx, key, 0)
		if err != nil || o.Key != key || string(o.Data) != name || o.Version != res.Version {
			t.Errorf("get %q: %+v, %v", key, o, err)
		}
		page, err := s.List(ctx, key, "", 10)
		if err != nil || len(page.Objects) != 1 || page.Objects[0].Key != key {
			t.Errorf("list %q: %+v, %v; want only the key itself", key, page, err)
		}
		if err := s.Delete(ctx, key, res.Version); err != nil {
			t.Errorf("delete %q: %v", key, err)
		}
	}
}

// The store reports GCS's "updated" time, and the HTTP Date as StoreTime
// when the client's transport records it.
func TestGCSTimes(t *testing.T) {
	g := newGCSTarget(t)
	ctx := t.Context()
	opened, _ := g.open(t, "")
	plain := gcsstore.New(g.client(t, nil), g.bucket)
	dated := gcsstore.New(g.client(t, gcsstore.DateTransport(http.DefaultTransport)), g.bucket)
	for _, c := range []struct {
		name      string
		s         providers.Store
		storeTime bool
	}{{"Open", opened, true}, {"New", plain, false}, {"New with DateTransport", dated, true}} {
		key := g.prefix + c.name
		res := mustCreate(t, c.s, key, []byte("tick"))
		a, err := c.s.Stat(ctx, key)
		if err != nil {
			t.Fatalf("%s: stat %q: %v", c.name, key, err)
		}
		o, err := c.s.Get(ctx, key, 0)
		if err != nil {
			t.Fatalf("%s: get %q: %v", c.name, key, err)
		}
		// Get's time is the Last-Modified header, to the second.
		if res.LastModified.IsZero() || !a.LastModified.Equal(res.LastModified) || !o.LastModified.Equal(res.LastModified.Truncate(time.Second)) {
			t.Errorf("%s: LastModified create %v, stat %v, get %v; want one non-zero time (get's to the second)", c.name, res.LastModified, a.LastModified, o.LastModified)
		}
		for what, st := range map[string]bool{"create": !res.StoreTime.IsZero(), "stat": !a.StoreTime.IsZero(), "get": !o.StoreTime.IsZero()} {
			if st != c.storeTime {
				t.Errorf("%s: %s reports StoreTime: %v, want %v", c.name, what, st, c.storeTime)
			}
		}
	}
}

// A bucket that does not exist is named in the error. fake-gcs-server says
// only "Not Found", for bucket and object alike, so the store looks the
// bucket up once; GCS names the bucket in its answer.
func TestGCSMissingBucket(t *testing.T) {
	g := newGCSTarget(t)
	p := strings.TrimSuffix(emulator.Prefix(t), "/")
	g.bucket = "objlease-no-such-bucket-" + p[strings.LastIndex(p, "-")+1:]
	s := gcsstore.New(g.client(t, nil), g.bucket)
	ctx := t.Context()
	key := "obj"
	named := func(op string, err error) {
		t.Helper()
		wantGCSErr(t, err, op, key, providers.ErrNoBucket)
		if err != nil && !strings.Contains(err.Error(), g.bucket) {
			t.Errorf("%s: error does not name bucket %q: %v", op, g.bucket, err)
		}
	}
	_, err := s.Create(ctx, key, []byte("x"), nil)
	named("create", err)
	_, err = s.List(ctx, key, "", 10)
	named("list", err)
	_, err = s.Stat(ctx, key)
	named("stat", err)
	_, err = s.Get(ctx, key, 0)
	named("get", err)
}

// STORAGE_EMULATOR_HOST, the SDK's own convention, points the opener at an
// emulator without an endpoint parameter.
func TestGCSEmulatorHostVariable(t *testing.T) {
	g := newGCSTarget(t)
	if g.real() {
		t.Skip("OBJLEASE_TEST_GCS names a real bucket; STORAGE_EMULATOR_HOST is for emulators")
	}
	t.Setenv("STORAGE_EMULATOR_HOST", g.host)
	s, key, err := providers.Open(t.Context(), "gs://"+g.bucket+"/"+g.prefix+"obj")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res := mustCreate(t, s, key, []byte("via env"))
	o, err := s.Get(t.Context(), key, 0)
	if err != nil || string(o.Data) != "via env" || o.Version != res.Version {
		t.Fatalf("get %q: %+v, %v", key, o, err)
	}
}

// GCS keeps the case of metadata keys; the store hands them back lower-cased.
func TestGCSMetadataCase(t *testing.T) {
	g := newGCSTarget(t)
	c := g.client(t, nil)
	s := gcsstore.New(c, g.bucket)
	key := g.prefix + "obj"
	w := c.Bucket(g.bucket).Object(key).NewWriter(t.Context())
	w.Metadata = map[string]string{"Owner": "Alice", "X-Mixed-Case": "Value"}
	w.Write([]byte("x"))
	if err := w.Close(); err != nil {
		t.Fatalf("write %q: %v", key, err)
	}
	t.Cleanup(func() { c.Bucket(g.bucket).Object(key).Delete(context.Background()) })
	a, err := s.Stat(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Metadata) != 2 || a.Metadata["owner"] != "Alice" || a.Metadata["x-mixed-case"] != "Value" {
		t.Errorf("stat %q: metadata %q, want keys lower-cased, values kept", key, a.Metadata)
	}
}

// hookRoundTripper calls before ahead of each request it is sent.
type hookRoundTripper struct {
	base   http.RoundTripper
	before func(*http.Request)
}

func (h hookRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	h.before(req)
	return h.base.RoundTrip(req)
}

// Get takes the bytes and the generation from one reply: an object
// replaced just before the read is read whole at its new version, never
// reported missing and never mixed with the old version.
func TestGCSGetWhileReplaced(t *testing.T) {
	g := newGCSTarget(t)
	ctx := t.Context()
	key := g.prefix + "obj"
	other := gcsstore.New(g.client(t, nil), g.bucket)
	first := mustCreate(t, other, key, []byte("first")).Version
	var replaced providers.WriteResult
	var once sync.Once
	hook := func(r *http.Request) {
		// The bytes, not the attributes: XML reads, or JSON with alt=media.
		media := !strings.Contains(r.URL.Path, "/storage/v1/") || r.URL.Query().Get("alt") == "media"
		if r.Method == http.MethodGet && media {
			once.Do(func() {
				var err error
				if replaced, err = other.Replace(ctx, key, []byte("second"), nil, first); err != nil {
					t.Errorf("replace %q: %v", key, err)
				}
			})
		}
	}
	s := gcsstore.New(g.client(t, hookRoundTripper{http.DefaultTransport, hook}), g.bucket)
	o, err := s.Get(ctx, key, 0)
	if err != nil {
		t.Fatalf("get %q: %v", key, err)
	}
	if replaced.Version == "" {
		t.Fatal("the object was not replaced during the read")
	}
	if string(o.Data) != "second" || o.Version != replaced.Version {
		t.Errorf("get %q: %q at version %s, want %q at %s", key, o.Data, o.Version, "second", replaced.Version)
	}
}
