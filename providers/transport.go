package providers

import (
	"context"
	"net/http"
)

type transportKey struct{}

// WithTransport returns a context that makes the openers of HTTP stores
// (s3://, gs://, azblob://) send their requests through wrap(base), base
// being the transport they would use otherwise: a way to count or observe
// what goes on the wire (see package wirecount) for stores opened by URL.
func WithTransport(ctx context.Context, wrap func(base http.RoundTripper) http.RoundTripper) context.Context {
	return context.WithValue(ctx, transportKey{}, wrap)
}

// Transport returns base as the context's WithTransport wraps it, and
// whether there was a wrapper; openers call it while building clients.
func Transport(ctx context.Context, base http.RoundTripper) (http.RoundTripper, bool) {
	wrap, ok := ctx.Value(transportKey{}).(func(http.RoundTripper) http.RoundTripper)
	if !ok || wrap == nil {
		return base, false
	}
	return wrap(base), true
}
