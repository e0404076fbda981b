package integration

// Tests of the s3 store against versitygw. With
// OBJLEASE_TEST_S3=s3://BUCKET/PREFIX/ they run against that real bucket
// instead, under that prefix, with the SDK's default credentials and
// configuration (AWS_REGION, AWS_PROFILE, AWS_ENDPOINT_URL_S3, ...).

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	s3sdk "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/objlease/objlease/integration/emulator"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/providertest"
	"github.com/objlease/objlease/providers/s3store"
)

// s3Target is the bucket a test runs against.
type s3Target struct {
	bucket string
	prefix string       // unique to the test
	emu    *emulator.S3 // nil on a real bucket
	rawURL string       // OBJLEASE_TEST_S3 on a real bucket
}

// newS3Target returns the shared versitygw bucket or, if OBJLEASE_TEST_S3 is
// set, that real bucket; either way with a fresh key prefix.
func newS3Target(t *testing.T) s3Target {
	t.Helper()
	if raw := os.Getenv("OBJLEASE_TEST_S3"); raw != "" {
		u, err := url.Parse(raw)
		if err != nil || u.Scheme != "s3" || u.Host == "" {
			t.Fatalf("OBJLEASE_TEST_S3=%q: want s3://BUCKET/PREFIX/", raw)
		}
		return s3Target{bucket: u.Host, prefix: strings.TrimPrefix(u.Path, "/") + emulator.Prefix(t), rawURL: raw}
	}
	e := emulator.VersityGW(t)
	return s3Target{bucket: e.Bucket, prefix: emulator.Prefix(t), emu: e}
}

func (s s3Target) real() bool { return s.emu == nil }

// open opens the target's bucket through the "s3" URL opener. For the
// emulator it passes the endpoint in the URL and the credentials in the
// environment, as a user would.
func (s s3Target) open(t *testing.T) *providers.Bucket {
	t.Helper()
	raw := s.rawURL
	if !s.real() {
		dir := t.TempDir()
		t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
		t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
		t.Setenv("AWS_PROFILE", "")
		t.Setenv("AWS_ACCESS_KEY_ID", s.emu.AccessKey)
		t.Setenv("AWS_SECRET_ACCESS_KEY", s.emu.SecretKey)
		t.Setenv("AWS_SESSION_TOKEN", "")
		raw = "s3://" + s.bucket + "/?endpoint=" + url.QueryEscape(s.emu.Endpoint) + "&region=" + s.emu.Region
	}
	st, _, err := providers.Open(t.Context(), raw)
	if err != nil {
		t.Fatalf("open %s: %v", raw, err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// client builds an SDK client as a user would, then applies mod (may be nil).
func (s s3Target) client(t *testing.T, mod func(*s3sdk.Options)) *s3sdk.Client {
	t.Helper()
	var opts s3sdk.Options
	if s.real() {
		// The opener's client carries the default chain's configuration.
		var c *s3sdk.Client
		if !s.open(t).As(&c) {
			t.Fatal("s3 store does not reach its client")
		}
		opts = c.Options()
	} else {
		opts = s3sdk.Options{
			Region:       s.emu.Region,
			BaseEndpoint: aws.String(s.emu.Endpoint),
			UsePathStyle: true,
			Credentials:  credentials.NewStaticCredentialsProvider(s.emu.AccessKey, s.emu.SecretKey, ""),
		}
	}
	if mod == nil {
		return s3sdk.New(opts)
	}
	return s3sdk.New(opts, mod)
}

// store returns an s3 store (a *providers.Bucket) on the target's bucket whose requests pass
// through rt (nil: the default transport).
func (s s3Target) store(t *testing.T, rt http.RoundTripper) *providers.Bucket {
	t.Helper()
	return s3store.New(s.client(t, func(o *s3sdk.Options) {
		if rt != nil {
			o.HTTPClient = &http.Client{Transport: rt}
		}
	}), s.bucket)
}

// cleanup deletes whatever the test left under its prefix.
func (s s3Target) cleanup(t *testing.T, st providers.Store) {
	t.Cleanup(func() {
		ctx := context.Background() // t.Context is done when cleanups run
		token := ""
		for {
			page, err := st.List(ctx, s.prefix, token, 1000)
			if err != nil {
				t.Logf("cleanup of %q: %v", s.prefix, err)
				return
			}
			for _, a := range page.Objects {
				if err := st.Delete(ctx, a.Key, a.Version); err != nil {
					t.Logf("cleanup: %v", err)
				}
			}
			if token = page.NextToken; token == "" {
				return
			}
		}
	})
}

// wantS3Err fails t unless err matches sentinel, names op and key and keeps
// the SDK's error; it returns the store's error code ("" for none).
func wantS3Err(t *testing.T, err error, op, key string, sentinel error) (status int, code string) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("%s %q: got %v, want %v", op, key, err, sentinel)
	}
	var pe *providers.Error
	if !errors.As(err, &pe) || pe.Op != op || pe.Key != key {
		t.Errorf("%s %q: error does not name op and key: %v", op, key, err)
	}
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	return status, code
}

func mustCreateS3(t *testing.T, st providers.Store, key string, data []byte) string {
	t.Helper()
	res, err := st.Create(t.Context(), key, data, nil)
	if err != nil {
		t.Fatalf("create %q: %v", key, err)
	}
	return res.Version
}

func mustReplaceS3(t *testing.T, st providers.Store, key string, data []byte, ifVersion string) string {
	t.Helper()
	res, err := st.Replace(t.Context(), key, data, nil, ifVersion)
	if err != nil {
		t.Fatalf("replace %q: %v", key, err)
	}
	return res.Version
}

func TestS3Conformance(t *testing.T) {
	target := newS3Target(t)
	config := func(st *providers.Bucket, prefix string) providertest.Config {
		return providertest.Config{
			Bucket:        st,
			Prefix:        target.prefix + prefix,
			MissingBucket: s3store.New(target.client(t, nil), randomName()),
			As: &providertest.AsCheck{
				Store: func(s providers.Store) error {
					var c *s3sdk.Client
					if !s.As(&c) || c == nil {
						return errors.New("As(**s3sdk.Client) did not reach the client")
					}
					return nil
				},
				Error: func(err error) error {
					var re *smithyhttp.ResponseError
					if !errors.As(err, &re) || re.HTTPStatusCode() != 404 {
						return errors.New("errors.As did not reach a 404 *smithyhttp.ResponseError")
					}
					return nil
				},
			},
		}
	}
	t.Run("Open", func(t *testing.T) { providertest.Run(t, config(target.open(t), "open/")) })
	t.Run("New", func(t *testing.T) { providertest.Run(t, config(target.store(t, nil), "new/")) })
}

// PUT with If-Match on a missing key answers 404 NoSuchKey (AWS and
// versitygw): the store reports ErrPrecondition. A conditional DELETE of a
// missing key answers 404 on AWS but 204 on versitygw; Delete's HEAD first
// makes both ErrPrecondition.
func TestS3IfMatchOnMissingKey(t *testing.T) {
	target := newS3Target(t)
	st := target.store(t, nil)
	ctx := t.Context()
	key := target.prefix + "missing"
	const someETag = "9b2cf535f27731c974343645a3985328"

	_, err := st.Replace(ctx, key, []byte("x"), nil, someETag)
	if status, code := wantS3Err(t, err, "replace", key, providers.ErrPrecondition); status != 404 || code != "NoSuchKey" {
		t.Errorf("replace %q: store answered %d %s, want 404 NoSuchKey", key, status, code)
	}
	wantS3Err(t, st.Delete(ctx, key, someETag), "delete", key, providers.ErrPrecondition)

	// Why Delete looks first: the store's own answer to the bare request.
	_, err = target.client(t, nil).DeleteObject(ctx, &s3sdk.DeleteObjectInput{Bucket: &target.bucket, Key: &key, IfMatch: aws.String(`"` + someETag + `"`)})
	switch {
	case target.real():
		t.Logf("conditional DELETE of a missing key: %v", err)
	case err != nil:
		t.Errorf("versitygw refused a conditional DELETE of a missing key (%v); it used to answer 204. Delete's HEAD may no longer be needed", err)
	}
	if _, err := st.Stat(ctx, key); !errors.Is(err, providers.ErrNotFound) {
		t.Errorf("stat %q after refused writes: %v, want ErrNotFound", key, err)
	}
}

// s3Tap sits between the SDK client and the store. It can run a hook just
// before a request goes out, and can drop a reply: let the request reach the
// store, read the store's real reply, then fail as if the connection broke.
type s3Tap struct {
	mu     sync.Mutex
	before map[string]func() // by method: run once before the next such request
	drop   map[string]bool   // by method: drop the reply to the next such request
	sent   map[string]int    // requests that reached the store, by method
}

func newS3Tap() *s3Tap {
	return &s3Tap{before: map[string]func(){}, drop: map[string]bool{}, sent: map[string]int{}}
}

func (p *s3Tap) RoundTrip(req *http.Request) (*http.Response, error) {
	p.mu.Lock()
	hook := p.before[req.Method]
	delete(p.before, req.Method)
	p.mu.Unlock()
	if hook != nil {
		hook()
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		return resp, err
	}
	p.sent[req.Method]++
	if !p.drop[req.Method] {
		return resp, nil
	}
	delete(p.drop, req.Method)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return nil, errors.New("connection reset by peer (reply dropped by the test)")
}

func (p *s3Tap) dropNext(method string) (sentBefore int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drop[method] = true
	return p.sent[method]
}

func (p *s3Tap) beforeNext(method string, hook func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.before[method] = hook
}

func (p *s3Tap) sentCount(method string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sent[method]
}

// A stale ETag is refused with 412 on PUT and on DELETE.
func TestS3StaleETag(t *testing.T) {
	target := newS3Target(t)
	tap := newS3Tap()
	st := target.store(t, tap)
	target.cleanup(t, st)
	ctx := t.Context()
	key := target.prefix + "obj"
	v1 := mustCreateS3(t, st, key, []byte("one"))
	v2 := mustReplaceS3(t, st, key, []byte("two"), v1)

	_, err := st.Replace(ctx, key, []byte("three"), nil, v1)
	if status, _ := wantS3Err(t, err, "replace", key, providers.ErrPrecondition); status != 412 {
		t.Errorf("replace %q at a stale ETag: store answered %d, want 412", key, status)
	}
	// A stale delete is sent and refused by the store itself (the HEAD
	// only looks for a missing key), so a store ignoring If-Match on
	// DELETE cannot pass for one that enforces it.
	if status, _ := wantS3Err(t, st.Delete(ctx, key, v1), "delete", key, providers.ErrPrecondition); status != 412 {
		t.Errorf("delete %q at a stale ETag: store answered %d, want 412", key, status)
	}
	if n := tap.sentCount(http.MethodDelete); n != 1 {
		t.Errorf("%d DELETE requests for a stale version, want 1", n)
	}
	// A replace landing between the HEAD and the DELETE: the store refuses
	// the DELETE itself.
	other := target.store(t, nil)
	tap.beforeNext(http.MethodDelete, func() { mustReplaceS3(t, other, key, []byte("three"), v2) })
	if status, _ := wantS3Err(t, st.Delete(ctx, key, v2), "delete", key, providers.ErrPrecondition); status != 412 {
		t.Errorf("delete %q at a version replaced after the HEAD: store answered %d, want 412", key, status)
	}
	if o, err := st.Get(ctx, key, 0); err != nil || string(o.Data) != "three" {
		t.Errorf("get %q: %v, %v; want the object written after the HEAD", key, o, err)
	}
}

// Identical bytes get the same ETag again (it is their MD5), so a version
// can come back: ABA is real, which is why lease records carry a nonce.
func TestS3VersionsRepeat(t *testing.T) {
	target := newS3Target(t)
	st := target.store(t, nil)
	target.cleanup(t, st)
	if !st.Properties().VersionsRepeat {
		t.Fatal("s3 store does not declare VersionsRepeat")
	}
	key := target.prefix + "aba"
	v1 := mustCreateS3(t, st, key, []byte("same bytes"))
	v2 := mustReplaceS3(t, st, key, []byte("other bytes"), v1)
	v3 := mustReplaceS3(t, st, key, []byte("same bytes"), v2)
	if v3 != v1 {
		if target.real() {
			t.Skipf("this bucket's ETags are not the MD5 of the body (SSE-KMS?): %q then %q", v1, v3)
		}
		t.Fatalf("versitygw gave identical bytes a new ETag: %q then %q", v1, v3)
	}
	// A writer holding v1 from before the two replaces still wins.
	if _, err := st.Replace(t.Context(), key, []byte("late writer"), nil, v1); err != nil {
		t.Errorf("replace %q at the repeated version %q: %v", key, v1, err)
	}
}

// Unknown access keys and wrong secrets are credentials errors. For an
// unknown key AWS answers 403 InvalidAccessKeyId, versitygw 404
// XAdminUserNotFound.
func TestS3BadCredentials(t *testing.T) {
	target := newS3Target(t)
	good := target.store(t, nil)
	target.cleanup(t, good)
	key := target.prefix + "obj"
	mustCreateS3(t, good, key, []byte("x"))

	// The right access key with the wrong secret.
	creds, err := target.client(t, nil).Options().Credentials.Retrieve(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, accessKey, secret string
		emulatorCode            string
	}{
		{"unknown access key", "AKIANOSUCHKEY0000000", "secret", "XAdminUserNotFound"},
		{"wrong secret", creds.AccessKeyID, "not-the-secret", "SignatureDoesNotMatch"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := s3store.New(target.client(t, func(o *s3sdk.Options) {
				o.Credentials = credentials.NewStaticCredentialsProvider(c.accessKey, c.secret, "")
			}), target.bucket)
			ctx := t.Context()
			_, err := st.Get(ctx, key, 0)
			status, code := wantS3Err(t, err, "get", key, s3store.ErrCredentials)
			if target.real() {
				t.Logf("get: store answered %d %s", status, code)
			} else if code != c.emulatorCode {
				t.Errorf("get: versitygw answered %d %s, want %s", status, code, c.emulatorCode)
			}
			_, err = st.Create(ctx, key+"-new", []byte("x"), nil)
			wantS3Err(t, err, "create", key+"-new", s3store.ErrCredentials)
			_, err = st.List(ctx, target.prefix, "", 10)
			wantS3Err(t, err, "list", target.prefix, s3store.ErrCredentials)
			if !strings.Contains(err.Error(), target.bucket) {
				t.Errorf("error does not name the bucket: %v", err)
			}
		})
	}
}

// A missing bucket is reported as such, naming it, and never as a missing
// key or a refused precondition.
func TestS3MissingBucket(t *testing.T) {
	target := newS3Target(t)
	var b [6]byte
	rand.Read(b[:])
	bucket := "objlease-missing-" + hex.EncodeToString(b[:])
	st := s3store.New(target.client(t, nil), bucket)
	ctx := t.Context()
	key := target.prefix + "obj"

	check := func(op, key string, err error) {
		t.Helper()
		wantS3Err(t, err, op, key, s3store.ErrNoBucket)
		if !strings.Contains(err.Error(), bucket) {
			t.Errorf("%s: error does not name bucket %s: %v", op, bucket, err)
		}
	}
	_, err := st.Get(ctx, key, 0)
	check("get", key, err)
	_, err = st.Create(ctx, key, []byte("x"), nil)
	check("create", key, err)
	_, err = st.Replace(ctx, key, []byte("x"), nil, "9b2cf535f27731c974343645a3985328")
	check("replace", key, err)
	_, err = st.List(ctx, target.prefix, "", 10)
	check("list", target.prefix, err)
	// A HEAD reply has no body to say which of the two is missing; a
	// one-key listing does.
	_, err = st.Stat(ctx, key)
	check("stat", key, err)
}

// A write whose reply is lost is reported as ErrUnknownOutcome, not as the
// 412 an SDK retry would earn, and a read afterwards shows it landed.
func TestS3LostResponse(t *testing.T) {
	target := newS3Target(t)
	tap := newS3Tap()
	st := target.store(t, tap)
	target.cleanup(t, st)
	ctx := t.Context()
	key := target.prefix + "obj"

	lost := func(op, method string, write func() error) {
		t.Helper()
		before := tap.dropNext(method)
		wantS3Err(t, write(), op, key, providers.ErrUnknownOutcome)
		if n := tap.sentCount(method) - before; n != 1 {
			t.Fatalf("%s %q: %d %s requests reached the store, want 1 (no SDK retry)", op, key, n, method)
		}
	}

	lost("create", http.MethodPut, func() error { _, err := st.Create(ctx, key, []byte("first"), nil); return err })
	o, err := st.Get(ctx, key, 0)
	if err != nil || !bytes.Equal(o.Data, []byte("first")) {
		t.Fatalf("get %q after the lost create: %v, %v; want it landed", key, o, err)
	}
	// What a retry by the SDK would have answered.
	_, err = st.Create(ctx, key, []byte("first"), nil)
	wantS3Err(t, err, "create", key, providers.ErrPrecondition)

	first := o.Version
	lost("replace", http.MethodPut, func() error { _, err := st.Replace(ctx, key, []byte("second"), nil, first); return err })
	o, err = st.Get(ctx, key, 0)
	if err != nil || !bytes.Equal(o.Data, []byte("second")) || o.Version == first {
		t.Fatalf("get %q after the lost replace: %v, %v; want it landed", key, o, err)
	}
	_, err = st.Replace(ctx, key, []byte("second"), nil, first)
	wantS3Err(t, err, "replace", key, providers.ErrPrecondition)

	second := o.Version
	lost("delete", http.MethodDelete, func() error { return st.Delete(ctx, key, second) })
	_, err = st.Stat(ctx, key)
	wantS3Err(t, err, "stat", key, providers.ErrNotFound)
}

// Keys with spaces, non-ASCII letters and characters that URLs and XML treat
// specially work end to end, through the URL opener and the client alike.
func TestS3UnusualKeys(t *testing.T) {
	target := newS3Target(t)
	names := []string{
		"with space/and  two spaces",
		"trailing space ",
		"ünïcödé/日本語/ключ-🔒",
		"plus+percent%20ampersand&equals=",
		"question?hash#semicolon;comma,",
		"quote\"apostrophe'lt<gt>",
		"tilde~star*paren()",
	}
	for name, st := range map[string]providers.Store{"Open": target.open(t), "New": target.store(t, nil)} {
		t.Run(name, func(t *testing.T) {
			target.cleanup(t, st)
			ctx := t.Context()
			dir := target.prefix + name + "/"
			versions := map[string]string{}
			for _, n := range names {
				key := dir + n
				v := mustCreateS3(t, st, key, []byte(n))
				o, err := st.Get(ctx, key, 0)
				if err != nil || string(o.Data) != n || o.Key != key || o.Version != v {
					t.Errorf("get %q: %+v, %v", key, o, err)
				}
				versions[key] = mustReplaceS3(t, st, key, []byte(n+" v2"), v)
			}
			page, err := st.List(ctx, dir, "", 1000)
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Objects) != len(names) {
				t.Errorf("list %q: %d objects, want %d: %+v", dir, len(page.Objects), len(names), page.Objects)
			}
			for _, a := range page.Objects {
				if v, ok := versions[a.Key]; !ok || v != a.Version {
					t.Errorf("list %q: key %q at version %q, want one of the keys written, at its version", dir, a.Key, a.Version)
				}
			}
			for key, v := range versions {
				if err := st.Delete(ctx, key, v); err != nil {
					t.Errorf("delete %q: %v", key, err)
				}
			}
		})
	}
}
