package azurestore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/objlease/objlease/providers"
)

const testContainer = "leases"

// fakeAzure starts an HTTP server that answers with h and returns a store
// whose real SDK client talks to it, plus a count of the requests it saw. The
// client keeps the SDK's default of three retries, with a negligible delay,
// so the counts show which calls the SDK may repeat.
func fakeAzure(t *testing.T, h http.HandlerFunc) (*providers.Bucket, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	c, err := container.NewClientWithNoCredential(srv.URL+"/devstoreaccount1/"+testContainer, &container.ClientOptions{
		ClientOptions: azcore.ClientOptions{ // RetryDelay -1 (none) would make azcore wait MaxRetryDelay instead.
			Retry: policy.RetryOptions{RetryDelay: time.Nanosecond, MaxRetryDelay: time.Nanosecond}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return New(c), &n
}

// azureError answers the way Azure Blob Storage does: the code in
// x-ms-error-code and, except for HEAD, in an XML body.
func azureError(w http.ResponseWriter, r *http.Request, status int, code string) {
	h := w.Header()
	h.Set("x-ms-request-id", "9f1b4c2e-0000-0000-0000-000000000000")
	h.Set("x-ms-version", "2026-12-06")
	if code != "" {
		h.Set("x-ms-error-code", code)
	}
	if r.Method == http.MethodHead || code == "" {
		w.WriteHeader(status)
		return
	}
	h.Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="utf-8"?><Error><Code>%s</Code><Message>%s
RequestId:9f1b4c2e-0000-0000-0000-000000000000
Time:2026-11-29T10:00:00.0000000Z</Message></Error>`, code, http.StatusText(status))
}

// run performs op on key and returns its error.
func run(ctx context.Context, s *providers.Bucket, op, key string) error {
	var err error
	switch op {
	case "get":
		_, err = s.Get(ctx, key, 0)
	case "stat":
		_, err = s.Stat(ctx, key)
	case "create":
		_, err = s.Create(ctx, key, []byte("record"), map[string]string{"lease-nonce": "n1"})
	case "replace":
		_, err = s.Replace(ctx, key, []byte("record"), nil, `"0x8DD0000000000001"`)
	case "delete":
		err = s.Delete(ctx, key, `"0x8DD0000000000001"`)
	case "list":
		_, err = s.List(ctx, key, "", 10)
	default:
		panic(op)
	}
	return err
}

func isWrite(op string) bool { return op == "create" || op == "replace" || op == "delete" }

var sentinels = []error{
	providers.ErrNotFound, providers.ErrPrecondition, providers.ErrConflict, providers.ErrThrottled,
	providers.ErrUnknownOutcome, providers.ErrTooLarge, providers.ErrInvalidKey, providers.ErrNoBucket,
	providers.ErrPermission, providers.ErrUnreachable,
}

// checkOnly fails unless err matches want and no other sentinel (want nil:
// none at all).
func checkOnly(t *testing.T, err, want error) {
	t.Helper()
	for _, s := range sentinels {
		if got := errors.Is(err, s); got != (s == want) {
			t.Errorf("errors.Is(%v, %v) = %v, want %v", err, s, got, !got)
		}
	}
}

// TestErrorMapping drives every row of the mapping table through the real SDK
// with the status, code and body Azure (or Azurite) sends.
func TestErrorMapping(t *testing.T) {
	tests := []struct {
		op     string
		status int
		code   string
		want   error // nil: no portable meaning
	}{
		// Azure and Azurite: If-None-Match: * on an existing blob.
		{"create", 409, "BlobAlreadyExists", providers.ErrPrecondition},
		// A 412 for the same case, should the service ever send it.
		{"create", 412, "ConditionNotMet", providers.ErrPrecondition},
		// Stale If-Match (Azure, Azurite); Azurite also for a missing blob.
		{"replace", 412, "ConditionNotMet", providers.ErrPrecondition},
		{"delete", 412, "ConditionNotMet", providers.ErrPrecondition},
		// Azure: If-Match on a missing blob.
		{"replace", 404, "BlobNotFound", providers.ErrPrecondition},
		{"delete", 404, "BlobNotFound", providers.ErrPrecondition},
		// Reads of a missing blob, with and without the header code.
		{"get", 404, "BlobNotFound", providers.ErrNotFound},
		{"stat", 404, "BlobNotFound", providers.ErrNotFound},
		{"stat", 404, "", providers.ErrNotFound},
		// The container is missing.
		{"get", 404, "ContainerNotFound", providers.ErrNoBucket},
		{"create", 404, "ContainerNotFound", providers.ErrNoBucket},
		{"replace", 404, "ContainerNotFound", providers.ErrNoBucket},
		{"list", 404, "ContainerNotFound", providers.ErrNoBucket},
		{"stat", 404, "ContainerNotFound", providers.ErrNoBucket},
		{"delete", 404, "ContainerNotFound", providers.ErrNoBucket},
		// Credentials refused: a wrong account key (Azure and Azurite
		// answer 403 AuthenticationFailed), a principal without the role.
		{"get", 403, "AuthenticationFailed", providers.ErrPermission},
		{"stat", 403, "AuthenticationFailed", providers.ErrPermission},
		{"create", 403, "AuthenticationFailed", providers.ErrPermission},
		{"create", 403, "AuthorizationFailure", providers.ErrPermission},
		{"replace", 403, "AuthorizationPermissionMismatch", providers.ErrPermission},
		// Names the service refuses.
		{"create", 400, "InvalidResourceName", providers.ErrInvalidKey},
		{"get", 400, "InvalidUri", providers.ErrInvalidKey},
		// Throttling: Azure's 503 ServerBusy, a gateway's 429.
		{"create", 503, "ServerBusy", providers.ErrThrottled},
		{"replace", 429, "", providers.ErrThrottled},
		{"get", 503, "ServerBusy", providers.ErrThrottled},
		{"list", 429, "TooManyRequests", providers.ErrThrottled},
		// Server failures on writes: the write may have landed.
		{"create", 500, "InternalError", providers.ErrUnknownOutcome},
		{"replace", 500, "OperationTimedOut", providers.ErrUnknownOutcome},
		{"delete", 503, "ServiceUnavailable", providers.ErrUnknownOutcome},
		{"create", 502, "", providers.ErrUnknownOutcome},
		// ...but a failed read is just a failed read.
		{"get", 500, "InternalError", nil},
		// Native leases refuse writes with Lease* codes (Azure 409, Azurite
		// 412): not a version mismatch.
		{"replace", 409, "LeaseIdMissing", nil},
		{"replace", 412, "LeaseIdMissing", nil},
		{"delete", 412, "LeaseIdMismatchWithBlobOperation", nil},
		{"create", 409, "LeaseIdMissing", nil},
		// Other definite refusals.
		{"replace", 400, "InvalidMetadata", nil},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%d%s", tt.op, tt.status, tt.code), func(t *testing.T) {
			s, n := fakeAzure(t, func(w http.ResponseWriter, r *http.Request) {
				azureError(w, r, tt.status, tt.code)
			})
			const key = "jobs/nightly report"
			err := run(context.Background(), s, tt.op, key)
			if err == nil {
				t.Fatal("no error")
			}
			checkOnly(t, err, tt.want)

			var pe *providers.Error
			if !errors.As(err, &pe) || pe.Op != tt.op || pe.Key != key {
				t.Errorf("error %v is not a *providers.Error for %s %q", err, tt.op, key)
			}
			var re *azcore.ResponseError
			if !errors.As(err, &re) || re.StatusCode != tt.status || re.ErrorCode != tt.code {
				t.Errorf("native error not reachable: %v", err)
			}
			if !strings.Contains(err.Error(), key) {
				t.Errorf("message %q does not name the key", err)
			}
			if (tt.code == "ContainerNotFound" || tt.status == 403) && !strings.Contains(err.Error(), `"`+testContainer+`"`) {
				t.Errorf("message %q does not name the container", err)
			}
			// The SDK's message spans lines and carries the reply body.
			if strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), fmt.Sprintf("%d %s", tt.status, tt.code)) {
				t.Errorf("message %q is not one line naming status and code", err)
			}

			// Writes go out once; reads keep the SDK's retries for the
			// statuses it retries.
			want := int32(1)
			if !isWrite(tt.op) && (tt.status == 429 || tt.status >= 500) {
				want = 4
			}
			if got := n.Load(); got != want {
				t.Errorf("server saw %d requests, want %d", got, want)
			}
		})
	}
}

// TestNoAnswer covers writes whose reply never arrives: the connection is
// dropped after the request was read, or the caller's context ends while the
// store is working.
func TestNoAnswer(t *testing.T) {
	dropConn := func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err)
		}
		conn.Close()
	}
	for _, op := range []string{"create", "replace", "delete", "get"} {
		t.Run("dropped/"+op, func(t *testing.T) {
			s, n := fakeAzure(t, dropConn)
			err := run(context.Background(), s, op, "a/b")
			if isWrite(op) {
				checkOnly(t, err, providers.ErrUnknownOutcome)
				if got := n.Load(); got != 1 {
					t.Errorf("write sent %d times, want once", got)
				}
			} else {
				checkOnly(t, err, nil)
			}
			var pe *providers.Error
			if !errors.As(err, &pe) || pe.Key != "a/b" {
				t.Errorf("error %v does not name the key", err)
			}
		})
	}
	for _, op := range []string{"create", "replace", "delete"} {
		t.Run("cancelled/"+op, func(t *testing.T) {
			arrived := make(chan struct{})
			s, _ := fakeAzure(t, func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body) // the server notices a closed connection only after the body
				close(arrived)
				<-r.Context().Done()
			})
			ctx, cancel := context.WithCancel(context.Background())
			go func() { <-arrived; cancel() }()
			err := run(ctx, s, op, "a/b")
			checkOnly(t, err, providers.ErrUnknownOutcome)
			if !errors.Is(err, context.Canceled) {
				t.Errorf("context error not reachable: %v", err)
			}
		})
	}
}

// TestUnreachable: with nothing listening no request is ever sent, so even
// a write's outcome is known.
func TestUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close() // the port now refuses connections
	c, err := container.NewClientWithNoCredential(srv.URL+"/devstoreaccount1/"+testContainer, &container.ClientOptions{
		ClientOptions: azcore.ClientOptions{Retry: policy.RetryOptions{RetryDelay: time.Nanosecond, MaxRetryDelay: time.Nanosecond}},
	})
	if err != nil {
		t.Fatal(err)
	}
	s := New(c)
	for _, op := range []string{"create", "replace", "delete", "get", "stat", "list"} {
		err := run(t.Context(), s, op, "a/b")
		checkOnly(t, err, providers.ErrUnreachable)
		if !strings.Contains(err.Error(), `"`+testContainer+`"`) {
			t.Errorf("%s: message %q does not name the container", op, err)
		}
	}
}
