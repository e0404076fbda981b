// Package wirecount counts the HTTP requests a store's client sends, as
// they leave for the network: retries and the extra requests an operation
// needs are counted, store calls are not. Put it under the SDK client's
// HTTP client (s3sdk.Options.HTTPClient, option.WithHTTPClient,
// azcore.ClientOptions.Transport) to learn what an operation costs in
// round trips.
package wirecount

import (
	"context"
	"maps"
	"net/http"
	"sync"
)

type labelKey struct{}

// WithLabel returns a context whose requests Transport also counts under
// label (see Labeled): for instance the store operation that sends them,
// so that one operation's retries and extra requests count as its own.
func WithLabel(ctx context.Context, label string) context.Context {
	return context.WithValue(ctx, labelKey{}, label)
}

// Transport is an http.RoundTripper that counts the requests passing
// through it by method, including those that fail before an answer (no
// connection, lost reply). It is safe for concurrent use.
type Transport struct {
	base http.RoundTripper

	mu      sync.Mutex
	count   map[string]int
	labeled map[string]int
}

// New returns a Transport sending through base (nil: http.DefaultTransport).
func New(base http.RoundTripper) *Transport {
	if base == nil {
		base = http.DefaultTransport
	}
	return &Transport{base: base, count: map[string]int{}, labeled: map[string]int{}}
}

// RoundTrip counts req and sends it through the base transport.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	label, _ := req.Context().Value(labelKey{}).(string)
	t.mu.Lock()
	t.count[req.Method]++
	t.labeled[label]++
	t.mu.Unlock()
	return t.base.RoundTrip(req)
}

// Counts is a number of requests by HTTP method.
type Counts map[string]int

// Total is the number of requests of every method.
func (c Counts) Total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

// Counts returns the requests counted so far, by method.
func (t *Transport) Counts() Counts { return t.copyOf(&t.count) }

// Labeled returns the requests counted so far by the label of their
// context (WithLabel); "" counts those without one.
func (t *Transport) Labeled() Counts { return t.copyOf(&t.labeled) }

// copyOf copies the map at m, one of t's, under t.mu (Reset replaces them).
func (t *Transport) copyOf(m *map[string]int) Counts {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := make(Counts, len(*m))
	maps.Copy(c, *m)
	return c
}

// Reset sets every count to zero and returns the counts before.
func (t *Transport) Reset() Counts {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := Counts(t.count)
	t.count, t.labeled = map[string]int{}, map[string]int{}
	return c
}
