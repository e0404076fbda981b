package providers_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/objlease/objlease/providers"
)

// A scheme's hints are what its provider registered, once; a scheme
// without any gets the neutral word for a bucket and nothing else.
func TestRegisterHints(t *testing.T) {
	h := providers.Hints{Container: "vault", Endpoint: "VAULT_ADDR", NoBucket: func(u *url.URL) string { return u.Host }}
	// A second run of the test finds its own registration in place.
	if err := providers.RegisterHints("hints-test", h); err != nil && !strings.Contains(err.Error(), "already") {
		t.Fatal(err)
	}
	err := providers.RegisterHints("hints-test", providers.Hints{Container: "other"})
	if err == nil || !strings.Contains(err.Error(), `"hints-test"`) {
		t.Errorf("second RegisterHints: %v, want an error naming the scheme", err)
	}
	got, ok := providers.HintsFor("hints-test")
	if !ok || got.Container != "vault" || got.Endpoint != "VAULT_ADDR" || got.NoBucket(&url.URL{Host: "v"}) != "v" {
		t.Errorf("HintsFor(hints-test) = %+v, %v; want the first registration", got, ok)
	}
	if got, ok := providers.HintsFor("no-hints-test"); ok || got.Container != "bucket" || got.Endpoint != "" || got.NoBucket != nil {
		t.Errorf("HintsFor(no-hints-test) = %+v, %v; want neutral hints", got, ok)
	}
	if err := providers.RegisterHints("", h); err == nil {
		t.Error("RegisterHints accepted an empty scheme")
	}
}
