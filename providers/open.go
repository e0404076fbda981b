package providers

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"
)

// ErrBadURL is returned by Open for a URL it cannot use.
var ErrBadURL = errors.New("bad store URL")

// Opener opens the store a URL names and returns it with the object key (or
// key prefix) the URL points at. Providers register one per scheme; a
// provider built on a Driver returns its *Bucket.
type Opener func(ctx context.Context, u *url.URL) (store *Bucket, key string, err error)

var (
	openersMu sync.RWMutex
	openers   = map[string]Opener{}
)

// Register makes a URL scheme available to Open. It panics if the scheme is
// registered twice, as database/sql does for drivers.
func Register(scheme string, open Opener) {
	openersMu.Lock()
	defer openersMu.Unlock()
	if _, dup := openers[scheme]; dup {
		panic("providers: Register called twice for scheme " + scheme)
	}
	openers[scheme] = open
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

// Open opens the store named by rawURL (for example file:///srv/leases/job,
// s3://bucket/leases/job) and returns it with the key the URL points at. The
// provider package for the scheme must be imported (providers/all imports
// every one).
func Open(ctx context.Context, rawURL string) (*Bucket, string, error) {
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
		return nil, "", fmt.Errorf("%w %q: unknown scheme %q (want one of %s)", ErrBadURL, rawURL, u.Scheme, strings.Join(Schemes(), ", "))
	}
	s, key, err := open(ctx, u)
	if err != nil {
		return nil, "", err
	}
	return s, key, nil
}
