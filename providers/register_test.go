package providers_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/objlease/objlease/providers"
)

// A scheme registered twice is refused with an error naming it; the
// first registration stays.
func TestRegisterDuplicate(t *testing.T) {
	errFirst := errors.New("first opener")
	first := func(context.Context, *url.URL, providers.OpenOptions) (*providers.Bucket, string, error) {
		return nil, "", errFirst
	}
	second := func(context.Context, *url.URL, providers.OpenOptions) (*providers.Bucket, string, error) {
		return nil, "", errors.New("second opener")
	}
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("Register panicked on a duplicate scheme: %v", r)
		}
	}()
	if err := providers.Register("dup-test", first); err != nil {
		t.Fatal(err)
	}
	err := providers.Register("dup-test", second)
	if err == nil || !strings.Contains(err.Error(), `"dup-test"`) {
		t.Fatalf("second Register: %v, want an error naming the scheme", err)
	}
	if _, _, err := providers.Open(t.Context(), "dup-test://x/k"); !errors.Is(err, errFirst) {
		t.Errorf("Open after a refused Register: %v, want the first opener's answer", err)
	}
	if err := providers.Register("", first); err == nil {
		t.Error("Register accepted an empty scheme")
	}
}

// A cloud store's scheme in a program built without it is named as such,
// not as a typo.
func TestOpenSchemeLeftOut(t *testing.T) {
	_, _, err := providers.Open(t.Context(), "gs://bucket/key") // no provider imported here
	if !errors.Is(err, providers.ErrBadURL) || !strings.Contains(err.Error(), `built without the store of scheme "gs"`) {
		t.Errorf("gs:// with no GCS provider: %v", err)
	}
	_, _, err = providers.Open(t.Context(), "s4://bucket/key")
	if !strings.Contains(err.Error(), `unknown scheme "s4"`) {
		t.Errorf("s4://: %v", err)
	}
}
