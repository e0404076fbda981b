package gcs

import (
	"context"
	"fmt"
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
)

func init() { providers.Register("gs", open) }

// open is the Opener for gs://BUCKET/KEY URLs.
func open(ctx context.Context, u *url.URL) (providers.Store, string, error) {
	bucket, key, endpoint, err := parseURL(u)
	if err != nil {
		return nil, "", err
	}
	client, err := newClient(ctx, endpoint)
	if err != nil {
		return nil, "", fmt.Errorf("gcs: client for bucket %q: %w", bucket, err)
	}
	s := New(client, bucket)
	s.owned = true
	return s, key, nil
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
	}
	return u.Host, strings.TrimPrefix(u.Path, "/"), endpoint, nil
}

// newClient builds a client whose transport records response dates. With an
// endpoint or STORAGE_EMULATOR_HOST it sends no credentials; otherwise it
// authenticates with Application Default Credentials.
func newClient(ctx context.Context, endpoint string) (*storage.Client, error) {
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.MaxIdleConnsPerHost = 100 // as the SDK's own transport does for GCS
	rt := DateTransport(base)
	opts := []option.ClientOption{storage.WithJSONReads()}
	if endpoint != "" || os.Getenv("STORAGE_EMULATOR_HOST") != "" {
		opts = append(opts, option.WithoutAuthentication())
		if endpoint != "" {
			opts = append(opts, option.WithEndpoint(endpoint))
		}
	} else {
		var err error
		rt, err = htransport.NewTransport(ctx, rt, option.WithScopes(storage.ScopeFullControl))
		if err != nil {
			return nil, err
		}
	}
	opts = append(opts, option.WithHTTPClient(&http.Client{Transport: rt}))
	return storage.NewClient(ctx, opts...)
}

// DateTransport wraps base so that a Store whose client sends its requests
// through it fills StoreTime from the HTTP Date header, which the SDK does
// not expose. It only reads response headers.
func DateTransport(base http.RoundTripper) http.RoundTripper {
	return dateTransport{base}
}

type dateTransport struct{ base http.RoundTripper }

func (t dateTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err == nil {
		if slot, ok := req.Context().Value(dateKey{}).(*dateSlot); ok {
			if d, perr := http.ParseTime(resp.Header.Get("Date")); perr == nil {
				slot.set(d)
			}
		}
	}
	return resp, err
}

type dateKey struct{}

// dateSlot carries the Date of the latest response to one store call from
// the transport back to the call.
type dateSlot struct {
	mu sync.Mutex
	t  time.Time
}

func withDateSlot(ctx context.Context) (context.Context, *dateSlot) {
	slot := new(dateSlot)
	return context.WithValue(ctx, dateKey{}, slot), slot
}

func (s *dateSlot) set(t time.Time) {
	s.mu.Lock()
	s.t = t
	s.mu.Unlock()
}

func (s *dateSlot) get() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.t
}
