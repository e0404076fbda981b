package providers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
)

// ErrBadURL is returned by Open for a URL it cannot use.
var ErrBadURL = errors.New("bad store URL")

// OpenOptions configure how OpenWith builds a store's client. The zero
// value is what Open uses.
type OpenOptions struct {
	// Transport, if set, makes the openers of HTTP stores (s3://, gs://,
	// azblob://) send their requests through Transport(base), base being
	// the transport they would use otherwise: a way to count or observe
	// what goes on the wire (see package wirecount). Stores that send no
	// HTTP requests (file://, mem://) ignore it.
	Transport func(base http.RoundTripper) http.RoundTripper
}

// RoundTripper returns base as o.Transport wraps it, and whether there
// was a wrapper; openers call it while building clients.
func (o OpenOptions) RoundTripper(base http.RoundTripper) (http.RoundTripper, bool) {
	if o.Transport == nil {
		return base, false
	}
	return o.Transport(base), true
}

// Opener opens the store a URL names, as opts ask, and returns it with the
// object key (or key prefix) the URL points at. Providers register one per
// scheme.
type Opener func(ctx context.Context, u *url.URL, opts OpenOptions) (store *Bucket, key string, err error)

var (
	openersMu sync.RWMutex
	openers   = map[string]Opener{}
)

// Register makes a URL scheme available to Open. It refuses a scheme that
// is already registered, leaving the first opener in place. Providers call
// it from init, where a refusal is a programming error they panic on.
func Register(scheme string, open Opener) error {
	if scheme == "" || open == nil {
		return fmt.Errorf("providers: Register(%q): empty scheme or nil opener", scheme)
	}
	openersMu.Lock()
	defer openersMu.Unlock()
	if _, dup := openers[scheme]; dup {
		return fmt.Errorf("providers: scheme %q is already registered", scheme)
	}
	openers[scheme] = open
	return nil
}

// Schemes lists the registered URL schemes.
func Schemes() []string {
	openersMu.RLock()
	defer openersMu.RUnlock()
	s := make([]string, 0, len(openers))
	for k := range openers {
		s = append(s, k)
	}
	sort.Strings(s)
	return s
}

// cloudSchemes are the schemes of the stores a build may leave out
// (package all's build tags).
var cloudSchemes = []string{"s3", "gs", "azblob"}

// Open opens the store named by rawURL (for example file:///srv/leases/job,
// s3://bucket/leases/job) and returns it with the key the URL points at. The
// provider package for the scheme must be imported (providers/all imports
// every one). It is OpenWith with the zero OpenOptions.
func Open(ctx context.Context, rawURL string) (*Bucket, string, error) {
	return OpenWith(ctx, rawURL, OpenOptions{})
}

// OpenWith is Open with explicit options for the store's client.
func OpenWith(ctx context.Context, rawURL string, opts OpenOptions) (*Bucket, string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, "", fmt.Errorf("%w %q: %v", ErrBadURL, rawURL, err)
	}
	if u.Scheme == "" {
		return nil, "", fmt.Errorf("%w %q: no scheme (want one of %s)", ErrBadURL, rawURL, strings.Join(Schemes(), ", "))
	}
	openersMu.RLock()
	open, ok := openers[u.Scheme]
	openersMu.RUnlock()
	if !ok {
		what := "unknown scheme"
		if slices.Contains(cloudSchemes, u.Scheme) {
			what = "this program was built without the store of scheme"
		}
		return nil, "", fmt.Errorf("%w %q: %s %q (want one of %s)", ErrBadURL, rawURL, what, u.Scheme, strings.Join(Schemes(), ", "))
	}
	s, key, err := open(ctx, u, opts)
	if err != nil {
		return nil, "", err
	}
	return s, key, nil
}
