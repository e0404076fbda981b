package s3store

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	s3sdk "github.com/aws/aws-sdk-go-v2/service/s3"
)

// redirect sends every request to srv, whatever host the client addressed.
type redirect struct{ srv *url.URL }

func (r redirect) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.URL.Scheme, req.URL.Host = r.srv.Scheme, r.srv.Host
	return http.DefaultTransport.RoundTrip(req)
}

// TestTigrisConsistent: Tigris evaluates a condition on the region's leader,
// and reads from it, only for requests that carry X-Tigris-Consistent: true.
// Every request to a Tigris endpoint carries it, and a client built with
// TigrisConsistent sends it to any endpoint; other stores never see it.
func TestTigrisConsistent(t *testing.T) {
	for _, tt := range []struct {
		name, endpoint string // "" endpoint: the test server's own address
		opts           []func(*s3sdk.Options)
		want           bool
	}{
		{"t3.storage.dev", "https://t3.storage.dev", nil, true},
		{"fly.storage.tigris.dev", "https://fly.storage.tigris.dev", nil, true},
		{"other store", "", nil, false},
		{"AWS", "https://s3.us-east-1.amazonaws.com", nil, false},
		{"lookalike", "https://storage.tigris.dev.example.com", nil, false},
		{"forced", "", []func(*s3sdk.Options){TigrisConsistent}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := &memS3{deleteIfMatch: true, objects: map[string]memObject{}}
			var mu sync.Mutex
			seen := map[string]int{} // requests by whether they carried the header
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				seen[r.Method+" "+r.Header.Get("X-Tigris-Consistent")]++
				mu.Unlock()
				if r.Method == http.MethodGet && r.URL.Query().Has("list-type") {
					awsHeaders(w)
					w.Header().Set("Content-Type", "application/xml")
					w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>bkt</Name><KeyCount>0</KeyCount><IsTruncated>false</IsTruncated></ListBucketResult>`))
					return
				}
				m.handle(w, r)
			}))
			t.Cleanup(srv.Close)
			u, _ := url.Parse(srv.URL)
			endpoint := tt.endpoint
			if endpoint == "" {
				endpoint = srv.URL
			}
			client := s3sdk.New(s3sdk.Options{
				Region:       "us-east-1",
				BaseEndpoint: aws.String(endpoint),
				UsePathStyle: true,
				Credentials:  credentials.NewStaticCredentialsProvider("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ""),
				HTTPClient:   &http.Client{Transport: redirect{u}},
			}, tt.opts...)
			s := New(client, testBucket)
			ctx := context.Background()
			r, err := s.Create(ctx, "k", []byte("one"), nil)
			if err != nil {
				t.Fatal(err)
			}
			if r, err = s.Replace(ctx, "k", []byte("two"), nil, r.Version); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Get(ctx, "k", 0); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Stat(ctx, "k"); err != nil {
				t.Fatal(err)
			}
			if _, err := s.List(ctx, "", "", 10); err != nil {
				t.Fatal(err)
			}
			if err := s.Delete(ctx, "k", r.Version); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			for k, n := range seen {
				method, header, _ := strings.Cut(k, " ")
				if want := map[bool]string{true: "true", false: ""}[tt.want]; header != want {
					t.Errorf("%d %s requests with X-Tigris-Consistent %q, want %q", n, method, header, want)
				}
			}
		})
	}
}

// TestNoVersionIDWithConditions: AWS answers a request that names a
// versionId and carries If-Match with 501 NotImplemented, which the driver
// would report as a store without conditional writes. No request the driver
// sends names a version.
func TestNoVersionIDWithConditions(t *testing.T) {
	m := &memS3{deleteIfMatch: true, objects: map[string]memObject{}}
	s, f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("versionId") {
			s3Error(w, r, 501, "NotImplemented", "A header you provided implies functionality that is not implemented")
			return
		}
		m.handle(w, r)
	})
	ctx := t.Context()
	r, err := s.Create(ctx, "k", []byte("one"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r, err = s.Replace(ctx, "k", []byte("two"), nil, r.Version); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "k", 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "k", r.Version); err != nil {
		t.Fatal(err)
	}
	if f.requests(http.MethodDelete) != 1 {
		t.Errorf("%d DELETE requests, want 1", f.requests(http.MethodDelete))
	}
}

// TestUnquotedETags: with the option, If-Match carries the ETag without
// quotes (Ceph RGW 16 compares it unquoted), on PUT and DELETE alike;
// If-None-Match: * is left alone. Without it, the ETag is quoted as S3's.
func TestUnquotedETags(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts []func(*s3sdk.Options)
		want string
	}{
		{"default", nil, `"0123abcd"`},
		{"unquoted", []func(*s3sdk.Options){UnquotedETags}, `0123abcd`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			got := map[string]string{} // method -> If-Match; PUT* -> If-None-Match
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				if v := r.Header.Get("If-None-Match"); v != "" {
					got["PUT*"] = v
				} else if v := r.Header.Get("If-Match"); v != "" {
					got[r.Method] = v
				}
				mu.Unlock()
				awsHeaders(w)
				if r.Method == http.MethodPut {
					w.Header().Set("ETag", `"4567"`)
				}
				if r.Method == http.MethodDelete {
					w.WriteHeader(http.StatusNoContent)
				}
			}))
			t.Cleanup(srv.Close)
			client := s3sdk.New(s3sdk.Options{
				Region:       "us-east-1",
				BaseEndpoint: aws.String(srv.URL),
				UsePathStyle: true,
				Credentials:  credentials.NewStaticCredentialsProvider("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ""),
			}, tt.opts...)
			st := New(client, "bkt")
			ctx := t.Context()
			if _, err := st.Create(ctx, "k", []byte("a"), nil); err != nil {
				t.Fatal(err)
			}
			if _, err := st.Replace(ctx, "k", []byte("b"), nil, "0123abcd"); err != nil {
				t.Fatal(err)
			}
			if err := st.Delete(ctx, "k", "0123abcd"); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if got["PUT"] != tt.want || got["DELETE"] != tt.want || got["PUT*"] != "*" {
				t.Errorf("sent If-Match %q on PUT and %q on DELETE, If-None-Match %q; want %q, %q and *", got["PUT"], got["DELETE"], got["PUT*"], tt.want, tt.want)
			}
		})
	}
}
