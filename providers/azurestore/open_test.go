package azurestore

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/objlease/objlease/providers"
)

const devConnStr = "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;" +
	"AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;" +
	"BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;"

func TestParseURL(t *testing.T) {
	good := []struct {
		url  string
		want location
	}{
		{"azblob://leases", location{container: "leases"}},
		{"azblob://leases/", location{container: "leases"}},
		{"azblob://leases/jobs/nightly", location{container: "leases", key: "jobs/nightly"}},
		{"azblob://leases/jobs/night%20ly%C3%BC", location{container: "leases", key: "jobs/night lyü"}},
		{"azblob://leases/k?account=acct", location{container: "leases", key: "k", account: "acct"}},
		{"azblob://leases/k?endpoint=https://acct.blob.core.windows.net/", location{container: "leases", key: "k", endpoint: "https://acct.blob.core.windows.net"}},
		{"azblob://a-1-b/k", location{container: "a-1-b", key: "k"}},
		{"azblob://$web/k", location{container: "$web", key: "k"}},
	}
	for _, tt := range good {
		u, err := url.Parse(tt.url)
		if err != nil {
			t.Fatal(err)
		}
		got, err := parseURL(u)
		if err != nil || got != tt.want {
			t.Errorf("parseURL(%q) = %+v, %v; want %+v", tt.url, got, err, tt.want)
		}
	}
	bad := []string{
		"azblob:///key",              // no container
		"azblob://leases/k?acount=x", // misspelt parameter
		"azblob://user@leases/k",     // credentials do not go in the URL
		"azblob://leases:443/k",      // nor an endpoint
		"s3://leases/k",              // another scheme
		// Account names Azure cannot have: the request could not even be
		// built ("invalid character in host name", exit 69).
		"azblob://leases/k?account=bad%20name",
		"azblob://leases/k?account=Acct",
		"azblob://leases/k?account=ab",
		"azblob://leases/k?endpoint=acct.blob.core.windows.net", // no scheme
	}
	for _, raw := range bad {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := parseURL(u); !errors.Is(err, providers.ErrBadURL) {
			t.Errorf("parseURL(%q): %v, want ErrBadURL", raw, err)
		}
	}
	// Container names Azure cannot have: the container's fault, named,
	// before any request.
	for _, bad := range []struct{ url, mention string }{
		{"azblob://c/lease", `container "c" is not a valid Azure container name: it has 1 characters; Azure container names have 3 to 63 characters`},
		{"azblob://Leases/lease", `it has the capital "L" at byte 0`},
		{"azblob://my.leases/lease", `it has "." at byte 2`},
		{"azblob://my_leases/lease", `it has "_" at byte 2`},
		{"azblob://my--leases/lease", "two hyphens in a row"},
		{"azblob://leases-/lease", "begin and end with a lowercase letter or a digit"},
		{"azblob://" + strings.Repeat("c", 64) + "/lease", "it has 64 characters"},
	} {
		u, err := url.Parse(bad.url)
		if err != nil {
			t.Fatal(err)
		}
		_, err = parseURL(u)
		if !errors.Is(err, providers.ErrBadURL) || !errors.Is(err, providers.ErrInvalidBucket) || !strings.Contains(err.Error(), bad.mention) {
			t.Errorf("parseURL(%q): %v, want ErrBadURL and ErrInvalidBucket mentioning %s", bad.url, err, bad.mention)
		}
	}
}

func clientURL(t *testing.T, s providers.Store) string {
	t.Helper()
	var c *container.Client
	if !s.As(&c) {
		t.Fatal("As did not reach the client")
	}
	return c.URL()
}

// TestOpenChoosesAccount checks which account each URL and environment lead
// to. No request is sent.
func TestOpenChoosesAccount(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name, connStr, account, url, wantURL, wantKey string
	}{
		{"connection string", devConnStr, "", "azblob://leases/a/b",
			"http://127.0.0.1:10000/devstoreaccount1/leases", "a/b"},
		{"account variable", "", "acct", "azblob://leases/a",
			"https://acct.blob.core.windows.net/leases", "a"},
		{"query account beats connection string", devConnStr, "", "azblob://leases/a?account=other",
			"https://other.blob.core.windows.net/leases", "a"},
		{"endpoint", "", "", "azblob://leases/a?endpoint=https://edge.example/acct/",
			"https://edge.example/acct/leases", "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(EnvConnectionString, tt.connStr)
			t.Setenv(EnvAccount, tt.account)
			s, key, err := providers.Open(ctx, tt.url)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got := clientURL(t, s); got != tt.wantURL || key != tt.wantKey {
				t.Errorf("Open(%q) = client %q, key %q; want %q, %q", tt.url, got, key, tt.wantURL, tt.wantKey)
			}
		})
	}

	t.Run("no account", func(t *testing.T) {
		t.Setenv(EnvConnectionString, "")
		t.Setenv(EnvAccount, "")
		_, _, err := providers.Open(ctx, "azblob://leases/a")
		if !errors.Is(err, providers.ErrBadURL) || !strings.Contains(err.Error(), EnvConnectionString) {
			t.Errorf("Open without an account: %v, want ErrBadURL naming %s", err, EnvConnectionString)
		}
	})
	t.Run("bad connection string", func(t *testing.T) {
		t.Setenv(EnvConnectionString, "not a connection string")
		_, _, err := OpenURL(ctx, "azblob://leases/a", nil)
		if !errors.Is(err, providers.ErrBadURL) {
			t.Errorf("Open with a broken connection string: %v, want ErrBadURL", err)
		}
	})
}

// TestOpenWithTransport: the opener builds its client on the transport
// OpenOptions.Transport gives.
func TestOpenWithTransport(t *testing.T) {
	t.Setenv(EnvConnectionString, devConnStr)
	t.Setenv(EnvAccount, "")
	var wrapped bool
	s, _, err := providers.OpenWith(t.Context(), "azblob://leases/a", providers.OpenOptions{
		Transport: func(base http.RoundTripper) http.RoundTripper {
			wrapped = true
			return base
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !wrapped {
		t.Error("the opener did not call OpenOptions.Transport")
	}
}

// An https:// endpoint that answers without TLS (a plain HTTP port) is the
// URL's mistake: one attempt, not the SDK's retries for seconds before the
// caller can say so (Azurite took 9 to 14 s, past the command's timeout).
func TestPlainHTTPAtHTTPSEndpointIsNotRetried(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	t.Setenv(EnvConnectionString, strings.NewReplacer("http://127.0.0.1:10000", strings.Replace(srv.URL, "http://", "https://", 1), "=http;", "=https;").Replace(devConnStr))
	opts := &container.ClientOptions{ClientOptions: azcore.ClientOptions{Retry: policy.RetryOptions{RetryDelay: time.Millisecond}}}
	s, key, err := OpenURL(context.Background(), "azblob://leases/a", opts)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Get(context.Background(), key, 1<<10)
	if !errors.Is(err, providers.ErrWrongEndpoint) || !strings.Contains(err.Error(), "does not speak TLS") {
		t.Fatalf("Get at an https:// endpoint that speaks plain HTTP: %v, want ErrWrongEndpoint (it does not speak TLS)", err)
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections, want 1: an answer without TLS is not retried", n)
	}
}
