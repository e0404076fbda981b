package main

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/objlease/objlease/providers"
)

// registerHintTest registers, once per process, two schemes whose
// openers fail as a store not set up does: "hinted", which gave its
// provider's hints, and "unhinted", which gave none.
var registerHintTest = sync.OnceFunc(func() {
	fail := func(_ context.Context, u *url.URL, _ providers.OpenOptions) (*providers.Bucket, string, error) {
		sentinel := providers.ErrNoCredentials
		if u.Query().Has("nobucket") {
			sentinel = providers.ErrNoBucket
		}
		return nil, "", providers.Wrap("open", strings.TrimPrefix(u.Path, "/"), fmt.Errorf("%w: %q", sentinel, u.Host), nil)
	}
	for _, scheme := range []string{"hinted", "unhinted"} {
		if err := providers.Register(scheme, fail); err != nil {
			panic(err)
		}
	}
	if err := providers.RegisterHints("hinted", providers.Hints{
		Container:     "vault",
		Endpoint:      "HINTED_ADDR",
		NoCredentials: "HINTED_TOKEN",
		NoBucket: func(u *url.URL) string {
			if u.Query().Get("nobucket") != "explained" {
				return ""
			}
			return fmt.Sprintf("vault %q is not served here", u.Host)
		},
	}); err != nil {
		panic(err)
	}
})

// A store's provider says what to check, in its own words; a store whose
// provider said nothing gets the neutral words.
func TestHintsFromProvider(t *testing.T) {
	registerHintTest()
	for _, tc := range []struct{ url, want string }{
		{"hinted://v/k", `objlease: inspect hinted://v/k: no credentials found (set HINTED_TOKEN)`},
		{"hinted://v/k?nobucket", `objlease: inspect hinted://v/k?nobucket: vault "v" does not exist (check the name or HINTED_ADDR)`},
		{"hinted://v/k?nobucket=explained", `objlease: inspect hinted://v/k?nobucket=explained: vault "v" is not served here`},
		{"unhinted://v/k", `objlease: inspect unhinted://v/k: no credentials found`},
		{"unhinted://v/k?nobucket", `objlease: inspect unhinted://v/k?nobucket: bucket "v" does not exist (check the name)`},
	} {
		var stdout, stderr bytes.Buffer
		c := &cli{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr}
		code := c.main(context.Background(), []string{"inspect", tc.url})
		if got := strings.TrimSuffix(stderr.String(), "\n"); code != 78 || got != tc.want {
			t.Errorf("inspect %s: exit %d, stderr\n%s\nwant exit 78 and\n%s", tc.url, code, got, tc.want)
		}
	}
}
