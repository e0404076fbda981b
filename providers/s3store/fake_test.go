package s3store

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	s3sdk "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/objlease/objlease/providers"
)

// fake is an HTTP server that answers the way S3 does, for driving the real
// SDK client into answers no emulator gives.
type fake struct {
	srv   *httptest.Server
	mu    sync.Mutex
	count map[string]int // requests seen, by method
	last  map[string]*http.Request
}

const testBucket = "bkt"

// newFake starts a server whose answers come from handle and returns a Store
// whose client talks to it. Reads keep the SDK's standard retries (three
// attempts) but without backoff, so retried tests stay fast.
func newFake(t *testing.T, handle http.HandlerFunc) (*providers.Bucket, *fake) {
	t.Helper()
	f := &fake{count: map[string]int{}, last: map[string]*http.Request{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.count[r.Method]++
		f.last[r.Method] = r
		f.mu.Unlock()
		handle(w, r)
	}))
	t.Cleanup(srv.Close)
	f.srv = srv
	client := s3sdk.New(s3sdk.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(srv.URL),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ""),
		Retryer: retry.NewStandard(func(o *retry.StandardOptions) {
			o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
			o.RateLimiter = ratelimit.None
		}),
	})
	return New(client, testBucket), f
}

func (f *fake) requests(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.count[method]
}

func (f *fake) lastRequest(method string) *http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last[method]
}

// awsHeaders sets the headers every S3 reply carries.
func awsHeaders(w http.ResponseWriter) {
	w.Header().Set("x-amz-request-id", "4442587FB7D0A2F9")
	w.Header().Set("x-amz-id-2", "Uuag1LuByRx9e6j5Onimru9pO4ZVKnJ2Qz7/C1NPcfTWAtRPfTaOFg==")
	w.Header().Set("Date", time.Now().UTC().Format(http.TimeFormat))
	w.Header().Set("Server", "AmazonS3")
}

// s3Error writes an error reply as S3 sends it: an XML body with the code,
// except for HEAD, whose replies have no body.
func s3Error(w http.ResponseWriter, r *http.Request, status int, code, message string) {
	awsHeaders(w)
	if r.Method == http.MethodHead || code == "" {
		w.WriteHeader(status)
		return
	}
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<Error><Code>%s</Code><Message>%s</Message><RequestId>4442587FB7D0A2F9</RequestId><HostId>Uuag1LuByRx9e6j5Onimru9pO4ZVKnJ2Qz7/C1NPcfTWAtRPfTaOFg==</HostId></Error>`, code, message)
}

// headOK answers a HEAD for an object at version "v1", as Delete asks first.
func headOK(w http.ResponseWriter) {
	awsHeaders(w)
	w.Header().Set("ETag", `"v1"`)
	w.Header().Set("Content-Length", "3")
	w.Header().Set("Last-Modified", "Sun, 29 Nov 2026 10:00:00 GMT")
	w.WriteHeader(http.StatusOK)
}

// do runs op on key and returns its error.
func do(ctx context.Context, s *providers.Bucket, op, key string) error {
	var err error
	switch op {
	case "get":
		_, err = s.Get(ctx, key, 0)
	case "stat":
		_, err = s.Stat(ctx, key)
	case "create":
		_, err = s.Create(ctx, key, []byte("new"), nil)
	case "replace":
		_, err = s.Replace(ctx, key, []byte("new"), nil, "v1")
	case "delete":
		err = s.Delete(ctx, key, "v1")
	case "list":
		_, err = s.List(ctx, key, "", 10)
	default:
		panic("unknown op " + op)
	}
	return err
}

// methodOf is the HTTP method of op's main request.
func methodOf(op string) string {
	switch op {
	case "create", "replace":
		return http.MethodPut
	case "delete":
		return http.MethodDelete
	case "stat":
		return http.MethodHead
	}
	return http.MethodGet
}
