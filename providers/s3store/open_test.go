package s3store

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	s3sdk "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/wirecount"
)

func TestParseURL(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		url  string
		want urlConfig
	}{
		{"s3://bkt", urlConfig{bucket: "bkt"}},
		{"s3://bkt/leases/job", urlConfig{bucket: "bkt", key: "leases/job"}},
		{"s3://bkt/leases/", urlConfig{bucket: "bkt", key: "leases/"}},
		{"s3://my.bucket/a%20b/%D0%BA", urlConfig{bucket: "my.bucket", key: "a b/к"}},
		{"s3://abc/k", urlConfig{bucket: "abc", key: "k"}},
		{"s3://" + strings.Repeat("b", 63) + "/k", urlConfig{bucket: strings.Repeat("b", 63), key: "k"}},
		{"s3://logs-2026.example-1/k", urlConfig{bucket: "logs-2026.example-1", key: "k"}},
		{"s3://base--usw2-az1--x-s3/k", urlConfig{bucket: "base--usw2-az1--x-s3", key: "k"}},
		{"s3://bkt/k?region=eu-west-1", urlConfig{bucket: "bkt", key: "k", region: "eu-west-1"}},
		{"s3://bkt/k?endpoint=http://127.0.0.1:7070&region=us-east-1&path_style=true",
			urlConfig{bucket: "bkt", key: "k", endpoint: "http://127.0.0.1:7070", region: "us-east-1", pathStyle: &yes}},
		{"s3://bkt/k?endpoint=https://s3.example.com&path_style=false",
			urlConfig{bucket: "bkt", key: "k", endpoint: "https://s3.example.com", pathStyle: &no}},
		{"s3://bkt/k?endpoint=https://objects.example.com&tigris_consistent=true",
			urlConfig{bucket: "bkt", key: "k", endpoint: "https://objects.example.com", tigrisConsistent: true}},
		{"s3://bkt/k?tigris_consistent=false", urlConfig{bucket: "bkt", key: "k"}},
		{"s3://bkt/k?unquoted_etag=true", urlConfig{bucket: "bkt", key: "k", unquotedETag: true}},
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.url)
		if err != nil {
			t.Fatal(err)
		}
		got, err := parseURL(u)
		if err != nil {
			t.Errorf("parseURL(%q): %v", tt.url, err)
			continue
		}
		if got.bucket != tt.want.bucket || got.key != tt.want.key || got.endpoint != tt.want.endpoint ||
			got.region != tt.want.region || got.tigrisConsistent != tt.want.tigrisConsistent || (got.pathStyle == nil) != (tt.want.pathStyle == nil) ||
			got.pathStyle != nil && *got.pathStyle != *tt.want.pathStyle {
			t.Errorf("parseURL(%q) = %+v, want %+v", tt.url, got, tt.want)
		}
	}

	for _, bad := range []struct{ url, mention string }{
		{"s3:///k", "no bucket"},
		{"s3://bkt:9000/k", "port"},
		{"s3://user:secret@bkt/k", "credentials"},
		{"s3://bkt/k?endpiont=http://x", `"endpiont"`},
		{"s3://bkt/k?endpoint=127.0.0.1:7070", "not an http(s) URL"},
		{"s3://bkt/k?path_style=maybe", `"maybe"`},
		{"s3://bkt/k?tigris_consistent=yes please", `tigris_consistent "yes please" is not true or false`},
		{"s3://bkt/k?unquoted_etag=1x", `unquoted_etag "1x" is not true or false`},
		{"s3://bkt/k?region=a&region=b", "2 times"},
		// Bucket names S3 cannot have, refused before any request and
		// named as the bucket's fault, not the key's.
		{"s3://bk/lease", `bucket "bk" is not a valid S3 bucket name: it has 2 characters; S3 bucket names have 3 to 63`},
		{"s3://" + strings.Repeat("b", 64) + "/lease", "it has 64 characters"},
		{"s3://My-Bucket/lease", `bucket "My-Bucket" is not a valid S3 bucket name: it has the capital "M" at byte 0`},
		{"s3://my_bucket/lease", `it has "_" at byte 2`},
		{"s3://-bucket/lease", "begin and end with a lowercase letter or a digit"},
		{"s3://bucket./lease", "begin and end with a lowercase letter or a digit"},
		{"s3://my..bucket/lease", "two dots in a row"},
		{"s3://192.168.5.4/lease", "formed like an IP address"},
	} {
		u, err := url.Parse(bad.url)
		if err != nil {
			t.Fatal(err)
		}
		_, err = parseURL(u)
		if !errors.Is(err, providers.ErrBadURL) || !strings.Contains(err.Error(), bad.mention) || strings.Contains(err.Error(), "not a valid S3 bucket name") != errors.Is(err, providers.ErrInvalidBucket) {
			t.Errorf("parseURL(%q) = %v, want ErrBadURL mentioning %s", bad.url, err, bad.mention)
		}
		if strings.Contains(bad.url, "secret") && strings.Contains(err.Error(), "secret") {
			t.Errorf("parseURL(%q) error shows the password: %v", bad.url, err)
		}
	}
}

// TestMalformedEndpointEnv: a malformed AWS_ENDPOINT_URL failed every
// request with the SDK's endpoint-rule error (exit 69); it is the URL's
// setting, refused before any request and named. ?endpoint= overrides it.
func TestMalformedEndpointEnv(t *testing.T) {
	for _, name := range []string{"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"} {
		isolateAWSEnv(t)
		t.Setenv(name, "http//127.0.0.1:9000")
		u, _ := url.Parse("s3://bkt/k")
		_, err := parseURL(u)
		if !errors.Is(err, providers.ErrBadURL) || !strings.Contains(err.Error(), name+` "http//127.0.0.1:9000" is not an http(s) URL`) {
			t.Errorf("%s malformed: %v, want ErrBadURL naming it", name, err)
		}
		u, _ = url.Parse("s3://bkt/k?endpoint=http://127.0.0.1:9000")
		if _, err := parseURL(u); err != nil {
			t.Errorf("%s malformed, ?endpoint= given: %v", name, err)
		}
	}
}

// isolateAWSEnv keeps the developer's AWS configuration out of the test and
// gives it static credentials.
func isolateAWSEnv(t *testing.T) {
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_CONFIG_FILE":             filepath.Join(dir, "config"),
		"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials"),
		"AWS_PROFILE":                 "",
		"AWS_REGION":                  "",
		"AWS_DEFAULT_REGION":          "",
		"AWS_ENDPOINT_URL":            "",
		"AWS_ENDPOINT_URL_S3":         "",
		"AWS_EC2_METADATA_DISABLED":   "true",
		"AWS_ACCESS_KEY_ID":           "AKIDFROMENV",
		"AWS_SECRET_ACCESS_KEY":       "secret-from-env",
		"AWS_SESSION_TOKEN":           "",
	} {
		t.Setenv(k, v)
	}
}

// TestOpen opens URLs through providers.Open and checks where the requests
// go and how they are signed.
func TestOpen(t *testing.T) {
	var got *http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		headOK(w)
	}))
	defer srv.Close()

	tests := []struct {
		name, url, endpointEnv string
		wantPath, wantRegion   string
	}{
		{"endpoint in URL, path style by default", "s3://bkt/leases/job?endpoint=" + srv.URL, "", "/bkt/leases/job", "us-east-1"},
		{"endpoint and region in URL", "s3://bkt/leases/job?endpoint=" + srv.URL + "&region=eu-west-1", "", "/bkt/leases/job", "eu-west-1"},
		{"endpoint from AWS_ENDPOINT_URL_S3", "s3://bkt/leases/job", srv.URL, "/bkt/leases/job", "us-east-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			isolateAWSEnv(t)
			t.Setenv("AWS_ENDPOINT_URL_S3", tt.endpointEnv)
			store, key, err := providers.Open(t.Context(), tt.url)
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			if key != "leases/job" {
				t.Errorf("key %q, want leases/job", key)
			}
			if _, err := store.Stat(t.Context(), key); err != nil {
				t.Fatal(err)
			}
			if got.URL.Path != tt.wantPath {
				t.Errorf("request path %q, want %q", got.URL.Path, tt.wantPath)
			}
			auth := got.Header.Get("Authorization")
			if !strings.Contains(auth, "Credential=AKIDFROMENV/") || !strings.Contains(auth, "/"+tt.wantRegion+"/s3/") {
				t.Errorf("Authorization %q: want the key from the environment and region %s", auth, tt.wantRegion)
			}
			var client *s3sdk.Client
			if !store.As(&client) {
				t.Error("As does not reach the client")
			}
		})
	}

	t.Run("virtual-hosted style when asked", func(t *testing.T) {
		isolateAWSEnv(t)
		store, _, err := providers.Open(t.Context(), "s3://bkt/k?path_style=false&endpoint="+srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		var client *s3sdk.Client
		store.As(&client)
		if client.Options().UsePathStyle {
			t.Error("path_style=false gave a path-style client")
		}
	})
}

// TestOpenWithTransport: OpenOptions.Transport wraps the client's
// transport for the store it opens, and for no other.
func TestOpenWithTransport(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { headOK(w) }))
	defer srv.Close()
	isolateAWSEnv(t)
	ctx := t.Context()
	var wc *wirecount.Transport
	counted, key, err := providers.OpenWith(ctx, "s3://bkt/k?endpoint="+srv.URL, providers.OpenOptions{
		Transport: func(base http.RoundTripper) http.RoundTripper {
			wc = wirecount.New(base)
			return wc
		}})
	if err != nil {
		t.Fatal(err)
	}
	if wc == nil {
		t.Fatal("the opener did not call OpenOptions.Transport")
	}
	if _, err := counted.Stat(ctx, key); err != nil {
		t.Fatal(err)
	}
	plain, key, err := providers.Open(ctx, "s3://bkt/k?endpoint="+srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Stat(ctx, key); err != nil {
		t.Fatal(err)
	}
	if got := wc.Counts(); got["HEAD"] != 1 || got.Total() != 1 {
		t.Errorf("counted %v, want the one HEAD of the store opened with the transport", got)
	}
}
