package gcsstore

// These tests drive the real SDK client against an httptest server that
// answers what GCS answers, including the answers fake-gcs-server never
// gives (409, 429, the missing-bucket message). The store against the
// emulator is tested in the integration module.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	gax "github.com/googleapis/gax-go/v2"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"

	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/wirecount"
)

const (
	testBucket = "lease-bucket"
	testKey    = "leases/job one"
	// The Date every fake response carries.
	testDate = "Tue, 01 Dec 2026 10:00:00 GMT"
)

// fakeGCS answers every request with answer and records what it was sent.
type fakeGCS struct {
	*httptest.Server
	answer func(w http.ResponseWriter, r *http.Request)

	mu   sync.Mutex
	reqs []*http.Request // without bodies
}

func newFakeGCS(t *testing.T, answer func(w http.ResponseWriter, r *http.Request)) *fakeGCS {
	f := &fakeGCS{answer: answer}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		f.mu.Lock()
		f.reqs = append(f.reqs, r.Clone(context.Background()))
		f.mu.Unlock()
		w.Header().Set("Date", testDate)
		f.answer(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeGCS) requests() []*http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*http.Request(nil), f.reqs...)
}

// client returns an SDK client for f. Reads keep the SDK's retries, with a
// short backoff and three attempts so that the tests neither sleep nor loop.
func (f *fakeGCS) client(t *testing.T, rt http.RoundTripper) *storage.Client {
	t.Helper()
	c, err := storage.NewClient(t.Context(),
		option.WithEndpoint(f.URL+"/storage/v1/"),
		option.WithoutAuthentication(),
		option.WithHTTPClient(&http.Client{Transport: rt}),
		storage.WithJSONReads())
	if err != nil {
		t.Fatal(err)
	}
	c.SetRetry(storage.WithBackoff(gax.Backoff{Initial: time.Millisecond, Max: time.Millisecond}), storage.WithMaxAttempts(3))
	t.Cleanup(func() { c.Close() })
	return c
}

// gcsError answers with the JSON error GCS sends.
func gcsError(status int, reason, message string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		w.Header().Set("Vary", "Origin, X-Origin")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error":{"code":%d,"message":%q,"errors":[{"message":%q,"domain":"global","reason":%q}]}}`,
			status, message, message, reason)
	}
}

// objectJSON answers with an object resource as GCS does for a successful
// upload or metadata read.
func objectJSON(gen int64, metadata string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		fmt.Fprintf(w, `{"kind":"storage#object","name":%q,"bucket":%q,"generation":"%d","metageneration":"1",`+
			`"size":"5","updated":"2026-12-01T09:59:59.123Z","metadata":%s}`, testKey, testBucket, gen, metadata)
	}
}

// ops calls one store operation on testKey.
var ops = map[string]func(ctx context.Context, s *providers.Bucket) error{
	"get": func(ctx context.Context, s *providers.Bucket) error { _, err := s.Get(ctx, testKey, 0); return err },
	"stat": func(ctx context.Context, s *providers.Bucket) error {
		_, err := s.Stat(ctx, testKey)
		return err
	},
	"create": func(ctx context.Context, s *providers.Bucket) error {
		_, err := s.Create(ctx, testKey, []byte("hello"), map[string]string{"owner": "a"})
		return err
	},
	"replace": func(ctx context.Context, s *providers.Bucket) error {
		_, err := s.Replace(ctx, testKey, []byte("hello"), nil, "1700000000000001")
		return err
	},
	"delete": func(ctx context.Context, s *providers.Bucket) error {
		return s.Delete(ctx, testKey, "1700000000000001")
	},
	"list": func(ctx context.Context, s *providers.Bucket) error {
		_, err := s.List(ctx, testKey, "", 10)
		return err
	},
}

func isWrite(op string) bool { return op == "create" || op == "replace" || op == "delete" }

const (
	preconditionMsg = "At least one of the pre-conditions you specified did not hold."
	rateLimitMsg    = "The object " + testBucket + "/" + testKey + " exceeded the rate limit for object mutation operations (create, update, and delete). Please reduce your request rate. See https://cloud.google.com/storage/docs/gcs429."
	noBucketMsg     = "The specified bucket does not exist."
	noObjectMsg     = "No such object: " + testBucket + "/" + testKey
)

// TestErrorMapping covers every row of the mapping table with the answer GCS
// (or, where said, fake-gcs-server) gives.
func TestErrorMapping(t *testing.T) {
	tests := []struct {
		name   string
		op     string
		answer func(w http.ResponseWriter, r *http.Request)
		want   error // nil: no sentinel may match
		status int   // the *googleapi.Error that must stay reachable; 0: none
		bucket bool  // the message must name the bucket, and the bucket is missing
	}{
		{"create exists", "create", gcsError(412, "conditionNotMet", preconditionMsg), providers.ErrPrecondition, 412, false},
		{"replace stale", "replace", gcsError(412, "conditionNotMet", preconditionMsg), providers.ErrPrecondition, 412, false},
		{"delete stale", "delete", gcsError(412, "conditionNotMet", preconditionMsg), providers.ErrPrecondition, 412, false},
		{"replace conflict", "replace", gcsError(409, "conflict", "The object was modified by a concurrent request."), providers.ErrConflict, 409, false},
		{"create rate limit", "create", gcsError(429, "rateLimitExceeded", rateLimitMsg), providers.ErrThrottled, 429, false},
		{"replace rate limit", "replace", gcsError(429, "rateLimitExceeded", rateLimitMsg), providers.ErrThrottled, 429, false},
		{"delete rate limit", "delete", gcsError(429, "rateLimitExceeded", rateLimitMsg), providers.ErrThrottled, 429, false},
		// GCS sometimes answers the one-mutation-a-second limit of an
		// object with 410 Gone instead of 429; nothing was written.
		{"create gone", "create", gcsError(410, "gone", rateLimitMsg), providers.ErrThrottled, 410, false},
		{"replace gone", "replace", gcsError(410, "gone", rateLimitMsg), providers.ErrThrottled, 410, false},
		{"delete gone", "delete", gcsError(410, "gone", rateLimitMsg), providers.ErrThrottled, 410, false},
		{"stat rate limit", "stat", gcsError(429, "rateLimitExceeded", "The project exceeded the rate limit for read operations."), providers.ErrThrottled, 429, false},
		{"create no bucket", "create", gcsError(404, "notFound", noBucketMsg), providers.ErrNoBucket, 404, true},
		{"replace no bucket", "replace", gcsError(404, "notFound", noBucketMsg), providers.ErrNoBucket, 404, true},
		{"delete no bucket", "delete", gcsError(404, "notFound", noBucketMsg), providers.ErrNoBucket, 404, true},
		{"get no bucket", "get", gcsError(404, "notFound", noBucketMsg), providers.ErrNoBucket, 0, true},
		{"stat no bucket", "stat", gcsError(404, "notFound", noBucketMsg), providers.ErrNoBucket, 404, true},
		{"list no bucket", "list", gcsError(404, "notFound", noBucketMsg), providers.ErrNoBucket, 404, true},
		// fake-gcs-server's 404 says only "Not Found", bucket or object.
		{"create emulator 404", "create", gcsError(404, "notFound", "Not Found"), providers.ErrNoBucket, 404, true},
		{"list emulator 404", "list", gcsError(404, "notFound", "Not Found"), providers.ErrNoBucket, 404, true},
		{"get emulator 404", "get", plain404("Not Found"), providers.ErrNoBucket, 0, true},
		{"stat emulator 404", "stat", gcsError(404, "notFound", ""), providers.ErrNoBucket, 404, true},
		{"replace emulator 404", "replace", gcsError(404, "notFound", "Not Found"), providers.ErrNoBucket, 404, true},
		// Not the API: an endpoint without /storage/v1/ reaches Go's 404
		// page on fake-gcs-server, an HTML page on Google's front end.
		{"stat wrong endpoint", "stat", plain404("404 page not found"), providers.ErrWrongEndpoint, 404, false},
		{"get wrong endpoint", "get", plain404("404 page not found"), providers.ErrWrongEndpoint, 0, false},
		{"create wrong endpoint", "create", plain404("404 page not found"), providers.ErrWrongEndpoint, 404, false},
		{"list wrong endpoint", "list", htmlPage404, providers.ErrWrongEndpoint, 404, false},
		// Credentials and IAM.
		{"get no credentials", "get", gcsError(401, "required", "Anonymous caller does not have storage.objects.get access to the Google Cloud Storage object."), providers.ErrPermission, 401, false},
		{"create forbidden", "create", gcsError(403, "forbidden", "svc@p.iam.gserviceaccount.com does not have storage.objects.create access."), providers.ErrPermission, 403, false},
		{"stat forbidden", "stat", gcsError(403, "forbidden", "svc@p.iam.gserviceaccount.com does not have storage.objects.get access."), providers.ErrPermission, 403, false},
		{"replace missing", "replace", gcsError(404, "notFound", noObjectMsg), providers.ErrPrecondition, 404, false},
		{"delete missing generation", "delete", gcsError(404, "notFound", noObjectMsg), providers.ErrPrecondition, 404, false},
		{"get missing", "get", gcsError(404, "notFound", noObjectMsg), providers.ErrNotFound, 404, false},
		{"stat missing", "stat", gcsError(404, "notFound", noObjectMsg), providers.ErrNotFound, 404, false},
		{"create bad name", "create", gcsError(400, "invalid", "The specified object name is not valid."), providers.ErrInvalidKey, 400, false},
		// A bucket name the store refuses: the bucket's fault, not the key's.
		{"create invalid bucket name", "create", gcsError(400, "invalid", "Invalid bucket name: '"+testBucket+"'"), providers.ErrInvalidBucket, 400, true},
		{"stat invalid bucket name", "stat", gcsError(400, "invalid", "Invalid bucket name: '"+testBucket+"'"), providers.ErrInvalidBucket, 400, true},
		{"create 503", "create", gcsError(503, "backendError", "We encountered an internal error. Please try again."), providers.ErrUnknownOutcome, 503, false},
		{"replace 500", "replace", gcsError(500, "internalError", "Internal Error"), providers.ErrUnknownOutcome, 500, false},
		{"delete 502", "delete", gcsError(502, "badGateway", "Bad Gateway"), providers.ErrUnknownOutcome, 502, false},
		{"create no response", "create", hangUp, providers.ErrUnknownOutcome, 0, false},
		{"replace no response", "replace", hangUp, providers.ErrUnknownOutcome, 0, false},
		{"delete no response", "delete", hangUp, providers.ErrUnknownOutcome, 0, false},
		// No portable meaning: the native error is all there is.
		{"stat 503", "stat", gcsError(503, "backendError", "We encountered an internal error. Please try again."), nil, 503, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeGCS(t, func(w http.ResponseWriter, r *http.Request) {
				// The bucket lookup a bare 404 leads to finds the bucket,
				// unless the case is about a missing one.
				// fake-gcs-server's JSON API answers JSON, also for a
				// missing bucket.
				if r.URL.Path == "/storage/v1/b/"+testBucket {
					if tt.bucket {
						gcsError(404, "notFound", "Not Found")(w, r)
					} else {
						bucketJSON(w, r)
					}
					return
				}
				tt.answer(w, r)
			})
			s := New(f.client(t, DateTransport(http.DefaultTransport)), testBucket)
			err := ops[tt.op](t.Context(), s)
			checkErr(t, err, tt.op, testKey, tt.want)
			if tt.status != 0 {
				var ge *googleapi.Error
				if !errors.As(err, &ge) || ge.Code != tt.status {
					t.Errorf("native error not reachable: errors.As found %v, want a *googleapi.Error with code %d", ge, tt.status)
				}
			}
			if tt.bucket && !strings.Contains(err.Error(), `"`+testBucket+`"`) {
				t.Errorf("error does not name the missing bucket: %v", err)
			}
			// Conditional writes go out once; reads keep the SDK's retries
			// for answers it deems transient.
			n := 0
			for _, r := range f.requests() {
				if r.URL.Path != "/storage/v1/b/"+testBucket {
					n++
				}
			}
			switch {
			case isWrite(tt.op) && n != 1:
				t.Errorf("%s sent %d requests, want exactly 1", tt.op, n)
			case !isWrite(tt.op) && storage.ShouldRetry(err) && n != 3:
				t.Errorf("%s sent %d requests, want 3 (the SDK's retries)", tt.op, n)
			}
		})
	}
}

// plain404 answers as fake-gcs-server's media download does for a missing
// bucket or object, and Go's mux for a path it does not serve.
func plain404(text string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) { http.Error(w, text, http.StatusNotFound) }
}

// htmlPage404 answers as Google's front end does for a path no API serves.
func htmlPage404(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=UTF-8")
	w.WriteHeader(http.StatusNotFound)
	fmt.Fprint(w, "<!DOCTYPE html>\n<html lang=en>\n  <meta charset=utf-8>\n  <title>Error 404 (Not Found)!!1</title>\n")
}

// bucketJSON answers a bucket metadata read.
func bucketJSON(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	fmt.Fprintf(w, `{"kind":"storage#bucket","id":%q,"name":%q,"metageneration":"1"}`, testBucket, testBucket)
}

// hangUp closes the connection without answering: a lost response.
func hangUp(w http.ResponseWriter, r *http.Request) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	conn.Close()
}

func checkErr(t *testing.T, err error, op, key string, want error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: got success, want %v", op, want)
	}
	var pe *providers.Error
	if !errors.As(err, &pe) || pe.Op != op || pe.Key != key {
		t.Errorf("%s: error %v (%T) is not a *providers.Error for %s %q", op, err, err, op, key)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("%q", key)) {
		t.Errorf("%s: message does not name the key: %v", op, err)
	}
	sentinels := []error{providers.ErrNotFound, providers.ErrPrecondition, providers.ErrConflict, providers.ErrThrottled,
		providers.ErrUnknownOutcome, providers.ErrTooLarge, providers.ErrInvalidKey, providers.ErrNoBucket,
		providers.ErrPermission, providers.ErrUnreachable, providers.ErrWrongEndpoint, providers.ErrInvalidBucket}
	for _, s := range sentinels {
		// ErrInvalidBucket is a kind of ErrInvalidKey.
		if errors.Is(err, s) != (s == want || s == providers.ErrInvalidKey && want == providers.ErrInvalidBucket) {
			t.Errorf("%s: errors.Is(err, %q) = %v; err: %v", op, s, errors.Is(err, s), err)
		}
	}
}

// A write whose context ends while the request is in flight may have landed.
func TestWriteCancelledInFlight(t *testing.T) {
	arrived := make(chan struct{}, 1)
	f := newFakeGCS(t, func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-r.Context().Done()
	})
	s := New(f.client(t, http.DefaultTransport), testBucket)
	ctx, cancel := context.WithCancel(t.Context())
	go func() { <-arrived; cancel() }()
	_, err := s.Create(ctx, testKey, []byte("x"), nil)
	checkErr(t, err, "create", testKey, providers.ErrUnknownOutcome)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("context error not reachable: %v", err)
	}
}

// The preconditions must be on the wire: the emulator ignores some of them,
// so only the request shows that they are sent.
func TestPreconditionsOnTheWire(t *testing.T) {
	f := newFakeGCS(t, objectJSON(1700000000000002, `{"Owner":"alice"}`))
	s := New(f.client(t, DateTransport(http.DefaultTransport)), testBucket)
	ctx := t.Context()

	res, err := s.Create(ctx, testKey, []byte("hello"), map[string]string{"owner": "alice"})
	if err != nil {
		t.Fatal(err)
	}
	wantTime, _ := time.Parse(time.RFC3339, "2026-12-01T09:59:59.123Z")
	wantDate, _ := http.ParseTime(testDate)
	if res.Version != "1700000000000002" || !res.LastModified.Equal(wantTime) || !res.StoreTime.Equal(wantDate) {
		t.Errorf("create: %+v, want version 1700000000000002, LastModified %v, StoreTime %v", res, wantTime, wantDate)
	}
	if _, err := s.Replace(ctx, testKey, []byte("hello"), nil, "1700000000000002"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, testKey, "1700000000000002"); err != nil {
		t.Fatal(err)
	}
	a, err := s.Stat(ctx, testKey)
	if err != nil {
		t.Fatal(err)
	}
	if a.Metadata["owner"] != "alice" || len(a.Metadata) != 1 {
		t.Errorf("stat: metadata %q, want the key lower-cased: owner=alice", a.Metadata)
	}

	reqs := f.requests()
	if len(reqs) != 4 {
		t.Fatalf("%d requests, want 4", len(reqs))
	}
	want := []struct{ method, path, gen, ifGen string }{
		{"POST", "/upload/storage/v1/b/" + testBucket + "/o", "", "0"},
		{"POST", "/upload/storage/v1/b/" + testBucket + "/o", "", "1700000000000002"},
		{"DELETE", "/storage/v1/b/" + testBucket + "/o/" + testKey, "1700000000000002", "1700000000000002"},
		{"GET", "/storage/v1/b/" + testBucket + "/o/" + testKey, "", ""},
	}
	for i, w := range want {
		r := reqs[i]
		q := r.URL.Query()
		if r.Method != w.method || r.URL.Path != w.path || q.Get("generation") != w.gen || q.Get("ifGenerationMatch") != w.ifGen {
			t.Errorf("request %d: %s %s generation=%q ifGenerationMatch=%q, want %s %s generation=%q ifGenerationMatch=%q",
				i, r.Method, r.URL.Path, q.Get("generation"), q.Get("ifGenerationMatch"), w.method, w.path, w.gen, w.ifGen)
		}
	}
}

// Versions the store never produced, and keys GCS refuses, fail before any
// request: GenerationMatch: 0 would mean "no condition".
func TestRefusedBeforeSending(t *testing.T) {
	f := newFakeGCS(t, objectJSON(1, `{}`))
	s := New(f.client(t, http.DefaultTransport), testBucket)
	ctx := t.Context()
	for _, v := range []string{"", "0", "-5", "abc", "1.5", "99999999999999999999"} {
		_, err := s.Replace(ctx, testKey, []byte("x"), nil, v)
		checkErr(t, err, "replace", testKey, providers.ErrPrecondition)
		checkErr(t, s.Delete(ctx, testKey, v), "delete", testKey, providers.ErrPrecondition)
	}
	for _, key := range []string{"", "a\nb", "a\rb", ".", "..", "bad\xffutf8", strings.Repeat("k", 1025)} {
		_, err := s.Create(ctx, key, []byte("x"), nil)
		checkErr(t, err, "create", key, providers.ErrInvalidKey)
		_, err = s.Get(ctx, key, 0)
		checkErr(t, err, "get", key, providers.ErrInvalidKey)
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("%d requests sent, want none", n)
	}
}

func TestStoreTime(t *testing.T) {
	f := newFakeGCS(t, objectJSON(7, `{}`))
	wantDate, _ := http.ParseTime(testDate)
	for _, tt := range []struct {
		name string
		open func(t *testing.T) providers.Store
		want time.Time
	}{
		{"New without DateTransport", func(t *testing.T) providers.Store {
			return New(f.client(t, http.DefaultTransport), testBucket)
		}, time.Time{}},
		{"New with DateTransport", func(t *testing.T) providers.Store {
			return New(f.client(t, DateTransport(http.DefaultTransport)), testBucket)
		}, wantDate},
		{"Open", func(t *testing.T) providers.Store {
			s, key, err := providers.Open(t.Context(), "gs://"+testBucket+"/leases/job%20one?endpoint="+url.QueryEscape(f.URL+"/storage/v1/"))
			if err != nil {
				t.Fatal(err)
			}
			if key != testKey {
				t.Errorf("Open: key %q, want %q", key, testKey)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}, wantDate},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, err := tt.open(t).Stat(t.Context(), testKey)
			if err != nil {
				t.Fatal(err)
			}
			if !a.StoreTime.Equal(tt.want) {
				t.Errorf("StoreTime = %v, want %v", a.StoreTime, tt.want)
			}
		})
	}
}

func TestParseURL(t *testing.T) {
	for _, tt := range []struct {
		url, bucket, key, endpoint string
	}{
		{"gs://bkt", "bkt", "", ""},
		{"gs://bkt/", "bkt", "", ""},
		{"gs://bkt/leases/job", "bkt", "leases/job", ""},
		{"gs://bkt/leases/", "bkt", "leases/", ""},
		{"gs://my.bucket_1/a%20b/%D0%BA%23x%3F", "my.bucket_1", "a b/к#x?", ""},
		{"gs://" + strings.Repeat("b", 63) + "/k", strings.Repeat("b", 63), "k", ""},
		{"gs://" + strings.Repeat(strings.Repeat("b", 63)+".", 3) + strings.Repeat("b", 30) + "/k", strings.Repeat(strings.Repeat("b", 63)+".", 3) + strings.Repeat("b", 30), "k", ""},
		{"gs://bkt/k?endpoint=http://127.0.0.1:4443/storage/v1/", "bkt", "k", "http://127.0.0.1:4443/storage/v1/"},
		// A server's address means the JSON API below it.
		{"gs://bkt/k?endpoint=http://127.0.0.1:4443", "bkt", "k", "http://127.0.0.1:4443/storage/v1/"},
		{"gs://bkt/k?endpoint=http://127.0.0.1:4443/", "bkt", "k", "http://127.0.0.1:4443/storage/v1/"},
		{"gs://bkt/k?endpoint=https%3A%2F%2Fstorage.example.com%2Fstorage%2Fv1%2F", "bkt", "k", "https://storage.example.com/storage/v1/"},
	} {
		u, err := url.Parse(tt.url)
		if err != nil {
			t.Fatal(err)
		}
		bucket, key, endpoint, err := parseURL(u)
		if err != nil || bucket != tt.bucket || key != tt.key || endpoint != tt.endpoint {
			t.Errorf("parseURL(%q) = %q, %q, %q, %v; want %q, %q, %q", tt.url, bucket, key, endpoint, err, tt.bucket, tt.key, tt.endpoint)
		}
	}
	for _, bad := range []string{
		"gs:///key",
		"gs:b/key",
		"gs://user@bkt/key",
		"gs://bkt:99/key",
		"gs://bkt/key#frag",
		"gs://bkt/key?region=eu",
		"gs://bkt/key?endpoint=127.0.0.1:4443",
		"gs://bkt/key?endpoint=ftp://h/",
	} {
		u, err := url.Parse(bad)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := parseURL(u); !errors.Is(err, providers.ErrBadURL) {
			t.Errorf("parseURL(%q): %v, want ErrBadURL", bad, err)
		}
		if _, _, err := providers.Open(t.Context(), bad); !errors.Is(err, providers.ErrBadURL) {
			t.Errorf("Open(%q): %v, want ErrBadURL", bad, err)
		}
	}
	// Bucket names GCS cannot have: the bucket's fault, named, before any
	// request.
	for _, bad := range []struct{ url, mention string }{
		{"gs://b/lease", `bucket "b" is not a valid GCS bucket name: it has 1 characters; GCS bucket names have 3 to 63 characters`},
		{"gs://" + strings.Repeat("b", 64) + "/lease", "it has 64 characters"},
		{"gs://" + strings.Repeat("b", 64) + ".b/lease", `its dot-separated part "` + strings.Repeat("b", 64) + `" has 64 characters`},
		{"gs://" + strings.Repeat("b.", 112) + "/lease", "it has 224 characters"},
		{"gs://Ops/lease", `it has the capital "O" at byte 0`},
		{"gs://ops!x/lease", `it has "!" at byte 3`},
		{"gs://_ops/lease", "begin and end with a lowercase letter or a digit"},
		{"gs://10.0.0.1/lease", "formed like an IP address"},
	} {
		_, _, err := providers.Open(t.Context(), bad.url)
		if !errors.Is(err, providers.ErrBadURL) || !errors.Is(err, providers.ErrInvalidBucket) || !strings.Contains(err.Error(), bad.mention) {
			t.Errorf("Open(%q): %v, want ErrBadURL and ErrInvalidBucket mentioning %s", bad.url, err, bad.mention)
		}
	}
}

func TestPropertiesAndAs(t *testing.T) {
	f := newFakeGCS(t, objectJSON(1, `{}`))
	c := f.client(t, http.DefaultTransport)
	s := New(c, testBucket)
	p := s.Properties()
	if p.Name != "gcs" || p.VersionsRepeat || p.TimestampGranularity != time.Second || p.MinWriteInterval != time.Second {
		t.Errorf("Properties() = %+v", p)
	}
	var client *storage.Client
	var bucket *storage.BucketHandle
	if !s.As(&client) || client != c {
		t.Errorf("As(**storage.Client) did not reach the client")
	}
	if !s.As(&bucket) || bucket.BucketName() != testBucket {
		t.Errorf("As(**storage.BucketHandle) did not reach the bucket")
	}
	var other *http.Client
	if s.As(&other) || s.As(client) {
		t.Errorf("As accepted a target of another type")
	}
	// The caller owns a client passed to New.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Stat(t.Context(), testKey); err != nil {
		t.Errorf("stat after Close of a store from New: %v", err)
	}
}

// Get is one request: the media reply carries the generation, the
// metadata and the bytes.
func TestGetIsOneRequest(t *testing.T) {
	f := newFakeGCS(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Goog-Generation", "1700000000000009")
		w.Header().Set("X-Goog-Metageneration", "1")
		w.Header().Set("X-Goog-Meta-Owner", "alice")
		w.Header().Set("Last-Modified", "Tue, 01 Dec 2026 09:59:59 GMT")
		w.Header().Set("Content-Type", "application/octet-stream")
		fmt.Fprint(w, "hello")
	})
	s := New(f.client(t, DateTransport(http.DefaultTransport)), testBucket)
	o, err := s.Get(t.Context(), testKey, 100)
	if err != nil {
		t.Fatal(err)
	}
	wantMod, _ := http.ParseTime("Tue, 01 Dec 2026 09:59:59 GMT")
	wantDate, _ := http.ParseTime(testDate)
	if string(o.Data) != "hello" || o.Version != "1700000000000009" || o.Metadata["owner"] != "alice" ||
		!o.LastModified.Equal(wantMod) || !o.StoreTime.Equal(wantDate) {
		t.Errorf("get: %+v, want hello at generation 1700000000000009 with owner=alice", o)
	}
	if reqs := f.requests(); len(reqs) != 1 {
		t.Errorf("get sent %d requests, want 1", len(reqs))
	}
}

// TestUnreachable: with nothing listening no request is ever sent, so even a
// write's outcome is known; the opener's reads give up after a few attempts
// instead of retrying for ever.
func TestUnreachable(t *testing.T) {
	f := newFakeGCS(t, func(w http.ResponseWriter, r *http.Request) {})
	f.Close() // the port now refuses connections
	c, err := storage.NewClient(t.Context(), option.WithEndpoint(f.URL+"/storage/v1/"), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetRetry(storage.WithBackoff(gax.Backoff{Initial: time.Millisecond, Max: time.Millisecond}), storage.WithMaxAttempts(readAttempts))
	s := New(c, testBucket)
	for op, call := range ops {
		err := call(t.Context(), s)
		if !errors.Is(err, providers.ErrUnreachable) || errors.Is(err, providers.ErrUnknownOutcome) {
			t.Errorf("%s with the store down: %v, want ErrUnreachable and a known outcome", op, err)
		}
		if !strings.Contains(err.Error(), `"`+testBucket+`"`) {
			t.Errorf("%s: error does not name the bucket: %v", op, err)
		}
	}
}

// TestOpenWithTransport: OpenOptions.Transport wraps the client's
// transport for the store it opens, and for no other.
func TestOpenWithTransport(t *testing.T) {
	f := newFakeGCS(t, objectJSON(7, `{}`))
	raw := "gs://" + testBucket + "/leases/job%20one?endpoint=" + url.QueryEscape(f.URL+"/storage/v1/")
	var wc *wirecount.Transport
	counted, key, err := providers.OpenWith(t.Context(), raw, providers.OpenOptions{
		Transport: func(base http.RoundTripper) http.RoundTripper {
			wc = wirecount.New(base)
			return wc
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer counted.Close()
	if wc == nil {
		t.Fatal("the opener did not call OpenOptions.Transport")
	}
	if _, err := counted.Stat(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	plain, key, err := providers.Open(t.Context(), raw)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := plain.Stat(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	if got := wc.Counts(); got.Total() != 1 {
		t.Errorf("counted %v, want the one request of the store opened with the transport", got)
	}
}
