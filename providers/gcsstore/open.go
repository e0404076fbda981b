package gcsstore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/option"
	htransport "google.golang.org/api/transport/http"

	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/internal/bucketname"
)

func init() {
	if err := providers.Register("gs", open); err != nil {
		panic(err)
	}
	if err := providers.RegisterHints("gs", providers.Hints{
		Container:     "bucket",
		Endpoint:      "STORAGE_EMULATOR_HOST",
		Credentials:   "GOOGLE_APPLICATION_CREDENTIALS",
		NoCredentials: "GOOGLE_APPLICATION_CREDENTIALS",
	}); err != nil {
		panic(err)
	}
}

// open is the Opener for gs://BUCKET/KEY URLs.
func open(ctx context.Context, u *url.URL, oo providers.OpenOptions) (*providers.Bucket, string, error) {
	bucket, key, endpoint, err := parseURL(u)
	if err != nil {
		return nil, "", err
	}
	client, err := newClient(ctx, endpoint, oo)
	if err != nil {
		return nil, "", fmt.Errorf("gcs: client for bucket %q: %w", bucket, err)
	}
	d := newStore(client, bucket)
	d.owned = true
	return providers.NewBucket(d).WithRequestTimeout(providers.DefaultRequestTimeout), key, nil
}

// parseURL splits gs://BUCKET/KEY?endpoint=URL.
func parseURL(u *url.URL) (bucket, key, endpoint string, err error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %q: %s", providers.ErrBadURL, u.Redacted(), fmt.Sprintf(format, args...))
	}
	switch {
	case u.Opaque != "":
		return "", "", "", bad("want gs://BUCKET/KEY")
	case u.Host == "":
		return "", "", "", bad("no bucket")
	case u.User != nil || u.Port() != "":
		return "", "", "", bad("bucket %q is not a bucket name", u.Host)
	case u.Fragment != "":
		return "", "", "", bad("'#' in a key must be written %%23")
	}
	q := u.Query()
	for name := range q {
		if name != "endpoint" {
			return "", "", "", bad("unknown parameter %q (want endpoint)", name)
		}
	}
	if endpoint = q.Get("endpoint"); endpoint != "" {
		e, err := url.Parse(endpoint)
		if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" {
			return "", "", "", bad("endpoint %q is not an http(s) URL", endpoint)
		}
		if e.Path == "" || e.Path == "/" {
			// The address of a server, as STORAGE_EMULATOR_HOST gives it:
			// the JSON API is below it. Taken as given, every object
			// request would miss the API.
			e.Path = "/storage/v1/"
			endpoint = e.String()
		}
	}
	if err := BucketRule.Check(u.Host); err != nil {
		return "", "", "", fmt.Errorf("%w %q: %w", providers.ErrBadURL, u.Redacted(), err)
	}
	return u.Host, strings.TrimPrefix(u.Path, "/"), endpoint, nil
}

// BucketRule is the rule for Cloud Storage bucket names that Open enforces
// before any request. (GCS also refuses names that begin with "goog" or
// hold "google"; the store says so itself.)
var BucketRule = bucketname.Rule{
	Store: "GCS", Word: "bucket", Min: 3, Max: 63, DottedMax: 222, Allowed: "-_.",
	NoIP:    true,
	Summary: "GCS bucket names have 3 to 63 characters (up to 222 with dots, 63 between dots): lowercase letters, digits, hyphens, underscores and dots, beginning and ending with a letter or digit, not formed like an IP address",
}

// readAttempts bounds the attempts of a read from an opened store.
const readAttempts = 3

// newClient builds a client whose transport records response dates and
// error replies. With an endpoint or STORAGE_EMULATOR_HOST it sends no
// credentials; otherwise it authenticates with Application Default
// Credentials. Against GCS objects are read through the XML API, whose
// replies carry custom metadata (the JSON API's do not); against an
// emulator (STORAGE_EMULATOR_HOST, or an http:// endpoint) through the JSON
// API, which fake-gcs-server serves whatever its -public-host and which
// there carries metadata too.
func newClient(ctx context.Context, endpoint string, oo providers.OpenOptions) (*storage.Client, error) {
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.MaxIdleConnsPerHost = 100 // as the SDK's own transport does for GCS
	wire, _ := oo.RoundTripper(base)
	rt := DateTransport(wire)
	var opts []option.ClientOption
	if os.Getenv("STORAGE_EMULATOR_HOST") != "" || strings.HasPrefix(endpoint, "http://") {
		opts = append(opts, storage.WithJSONReads())
	}
	if endpoint != "" || os.Getenv("STORAGE_EMULATOR_HOST") != "" {
		opts = append(opts, option.WithoutAuthentication())
		if endpoint != "" {
			opts = append(opts, option.WithEndpoint(endpoint))
		}
	} else {
		var err error
		rt, err = htransport.NewTransport(ctx, rt, option.WithScopes(storage.ScopeFullControl))
		if err != nil {
			// Application Default Credentials are looked up here; it
			// fails for nothing else a caller can set.
			return nil, fmt.Errorf("%w: %w", providers.ErrNoCredentials, err)
		}
	}
	opts = append(opts, option.WithHTTPClient(&http.Client{Transport: rt}))
	c, err := storage.NewClient(ctx, opts...)
	if err != nil {
		return nil, err
	}
	// The SDK's default retries a read until its context ends: against a
	// store that is down, without a deadline, for ever.
	c.SetRetry(storage.WithMaxAttempts(readAttempts))
	return c, nil
}

// DateTransport wraps base so that a Store whose client sends its requests
// through it fills StoreTime from the HTTP Date header, which the SDK does
// not expose, and tells a missing bucket or a wrong endpoint from a missing
// object on reads, whose error replies the SDK drops: it keeps the first
// bytes of each error reply's body (and passes the whole body on).
func DateTransport(base http.RoundTripper) http.RoundTripper {
	return dateTransport{base}
}

type dateTransport struct{ base http.RoundTripper }

// peekBytes is how much of an error reply is kept: enough for a JSON or XML
// error's code and message.
const peekBytes = 2048

func (t dateTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	slot, ok := req.Context().Value(replyKey{}).(*replySlot)
	if err != nil || !ok {
		return resp, err
	}
	if d, perr := http.ParseTime(resp.Header.Get("Date")); perr == nil {
		slot.setDate(d)
	}
	if resp.StatusCode >= 400 && resp.Body != nil {
		head, _ := io.ReadAll(io.LimitReader(resp.Body, peekBytes))
		slot.setError(string(head), resp.Header.Get("X-Amz-Request-Id") != "")
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
	}
	return resp, err
}

type replyKey struct{}

// replySlot carries what the transport saw of the latest reply to one
// store call back to the call.
type replySlot struct {
	mu   sync.Mutex
	t    time.Time
	body string // start of the latest error reply's body
	// failed: an error reply came (its body may be empty); s3: it carried
	// an S3 request ID, as every S3 server's reply does and no Cloud
	// Storage reply does.
	failed, s3 bool
}

func withReplySlot(ctx context.Context) (context.Context, *replySlot) {
	slot := new(replySlot)
	return context.WithValue(ctx, replyKey{}, slot), slot
}

func (s *replySlot) setDate(t time.Time) {
	s.mu.Lock()
	s.t = t
	s.mu.Unlock()
}

func (s *replySlot) setError(b string, s3 bool) {
	s.mu.Lock()
	s.body, s.failed, s.s3 = b, true, s3
	s.mu.Unlock()
}

// bareError reports an error reply that came with no body at all.
func (s *replySlot) bareError() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed && strings.TrimSpace(s.body) == ""
}

// fromS3 reports an error reply from an S3 server.
func (s *replySlot) fromS3() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.s3
}

func (s *replySlot) date() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.t
}

func (s *replySlot) errorBody() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.body
}
