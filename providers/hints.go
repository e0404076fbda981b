package providers

import (
	"fmt"
	"net/url"
	"sync"
)

// Hints are a store's own words for what a person should check when the
// store is not set up as a URL says: what it calls a bucket, where it takes
// its address and its credentials from. A provider registers them with its
// scheme (RegisterHints), and a program that reports failures (the objlease
// command) asks for them by scheme (HintsFor), so that it names no store
// itself. An empty field means the store has nothing to add.
type Hints struct {
	// Container is what the store calls what a URL's host names:
	// "bucket", "container", "directory". Empty: "bucket".
	Container string
	// Endpoint names where the store takes its address from besides a
	// URL's ?endpoint= ("AWS_ENDPOINT_URL").
	Endpoint string
	// Credentials names where the store takes its credentials from, for
	// when it refused them.
	Credentials string
	// NoCredentials names what to set when the store found no credentials
	// at all.
	NoCredentials string
	// NoBucket, if set, says why the container u names was not found when
	// the URL itself explains it (S3: an endpoint with a path before the
	// bucket), as the whole reason; "" when it does not.
	NoBucket func(u *url.URL) string
}

var (
	hintsMu sync.RWMutex
	hints   = map[string]Hints{}
)

// RegisterHints records a scheme's Hints. Like Register it refuses a
// scheme already given hints; providers call it from init next to
// Register.
func RegisterHints(scheme string, h Hints) error {
	if scheme == "" {
		return fmt.Errorf("providers: RegisterHints(%q): empty scheme", scheme)
	}
	hintsMu.Lock()
	defer hintsMu.Unlock()
	if _, dup := hints[scheme]; dup {
		return fmt.Errorf("providers: scheme %q already has hints", scheme)
	}
	hints[scheme] = h
	return nil
}

// HintsFor returns the Hints registered for scheme, with Container filled
// in; ok is false, and the Hints neutral, for a scheme no provider gave
// hints for.
func HintsFor(scheme string) (h Hints, ok bool) {
	hintsMu.RLock()
	h, ok = hints[scheme]
	hintsMu.RUnlock()
	if h.Container == "" {
		h.Container = "bucket"
	}
	return h, ok
}
