package main

// The words of each store's own hints (providers.Hints), as a failure's
// reason quotes them: the command itself names no store.

import (
	"net/url"

	"github.com/objlease/objlease/providers"
)

// hintsOf is the Hints of the URL's store, as its provider registered
// them; neutral for a URL that does not parse or a scheme no provider
// gave hints for.
func hintsOf(rawURL string) providers.Hints {
	u, err := url.Parse(rawURL)
	if err != nil {
		h, _ := providers.HintsFor("")
		return h
	}
	h, _ := providers.HintsFor(u.Scheme)
	return h
}

// noBucketHint is the store's own reason for a missing container that the
// URL explains, "" if there is none.
func noBucketHint(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	if h := hintsOf(rawURL); h.NoBucket != nil {
		return h.NoBucket(u)
	}
	return ""
}

// orHint is " or "+hint, or "" without a hint: what follows a check of
// the URL itself.
func orHint(hint string) string {
	if hint == "" {
		return ""
	}
	return " or " + hint
}

// whereEndpoint names where the URL's store takes its address from:
// "?endpoint= or " and its store's Endpoint hint, or "?endpoint=" alone.
func whereEndpoint(rawURL string) string {
	return "?endpoint=" + orHint(hintsOf(rawURL).Endpoint)
}

// whereEndpointAnd is whereEndpoint followed by the "and" that joins one
// more thing to check to it.
func whereEndpointAnd(rawURL string) string {
	if hintsOf(rawURL).Endpoint == "" {
		return "?endpoint= and"
	}
	return whereEndpoint(rawURL) + ", and"
}

// parenHint is " ("+verb+" "+hint+")", or "" without a hint.
func parenHint(verb, hint string) string {
	if hint == "" {
		return ""
	}
	return " (" + verb + " " + hint + ")"
}
