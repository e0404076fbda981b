package s3store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/objlease/objlease/providers"
)

// sentinels are every error mapError may choose.
var sentinels = []error{
	providers.ErrNotFound, providers.ErrPrecondition, providers.ErrConflict, providers.ErrThrottled,
	providers.ErrUnknownOutcome, providers.ErrInvalidKey, ErrNoBucket, ErrCredentials, errors.ErrUnsupported,
	providers.ErrUnreachable, providers.ErrInvalidBucket,
}

// checkMapped fails t unless err names op and key, matches want (and no other
// sentinel; want nil: none) and keeps the SDK error reachable.
func checkMapped(t *testing.T, err error, op, key string, want error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s %q: success, want %v", op, key, want)
	}
	var pe *providers.Error
	if !errors.As(err, &pe) || pe.Op != op || pe.Key != key {
		t.Errorf("%s %q: %v (%T) does not name the operation and key", op, key, err, err)
	}
	for _, s := range sentinels {
		// ErrInvalidBucket is a kind of ErrInvalidKey.
		if got := errors.Is(err, s); got != (s == want || s == providers.ErrInvalidKey && want == providers.ErrInvalidBucket) {
			t.Errorf("%s %q: errors.Is(err, %v) = %v: %v", op, key, s, got, err)
		}
	}
	var oe *smithy.OperationError
	if !errors.As(err, &oe) {
		t.Errorf("%s %q: SDK error not reachable with errors.As: %v", op, key, err)
	}
}

// TestMapError drives the real SDK client into each row of mapError with the
// status, code and headers the real store sends.
func TestMapError(t *testing.T) {
	tests := []struct {
		name, op     string
		status       int
		code, msg    string
		want         error
		wantAttempts int // requests of the op's method; 0: not checked
	}{
		// Conditional writes refused.
		{"create on existing", "create", 412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold", providers.ErrPrecondition, 1},
		{"replace stale", "replace", 412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold", providers.ErrPrecondition, 1},
		{"delete stale", "delete", 412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold", providers.ErrPrecondition, 1},
		{"replace missing", "replace", 404, "NoSuchKey", "The specified key does not exist.", providers.ErrPrecondition, 1},
		{"delete missing", "delete", 404, "NoSuchKey", "The specified key does not exist.", providers.ErrPrecondition, 1},
		// Reads of a missing key.
		{"get missing", "get", 404, "NoSuchKey", "The specified key does not exist.", providers.ErrNotFound, 1},
		{"stat missing", "stat", 404, "", "", providers.ErrNotFound, 1},
		// Racing conditional writes on AWS.
		{"create conflict", "create", 409, "ConditionalRequestConflict", "A conflicting operation occurred. If using PutObject you can retry the request.", providers.ErrConflict, 1},
		{"replace conflict", "replace", 409, "ConditionalRequestConflict", "A conflicting operation occurred. If using PutObject you can retry the request.", providers.ErrConflict, 1},
		{"delete conflict", "delete", 409, "ConditionalRequestConflict", "A conflicting operation occurred.", providers.ErrConflict, 1},
		// Throttling: writes are not retried, reads are and still fail.
		{"create slowdown", "create", 503, "SlowDown", "Please reduce your request rate.", providers.ErrThrottled, 1},
		{"replace 429", "replace", 429, "TooManyRequests", "Too many requests", providers.ErrThrottled, 1},
		{"get slowdown", "get", 503, "SlowDown", "Please reduce your request rate.", providers.ErrThrottled, 3},
		// Bucket missing: not to be mistaken for a missing key.
		{"get no bucket", "get", 404, "NoSuchBucket", "The specified bucket does not exist", ErrNoBucket, 1},
		{"create no bucket", "create", 404, "NoSuchBucket", "The specified bucket does not exist", ErrNoBucket, 1},
		{"list no bucket", "list", 404, "NoSuchBucket", "The specified bucket does not exist", ErrNoBucket, 1},
		// Credentials.
		{"get unknown access key", "get", 403, "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records.", ErrCredentials, 1},
		{"create bad signature", "create", 403, "SignatureDoesNotMatch", "The request signature we calculated does not match the signature you provided.", ErrCredentials, 1},
		{"list access denied", "list", 403, "AccessDenied", "Access Denied", ErrCredentials, 1},
		{"stat forbidden", "stat", 403, "", "", ErrCredentials, 1},
		{"get versitygw unknown key", "get", 404, "XAdminUserNotFound", "No user exists with the provided access key ID.", ErrCredentials, 1},
		{"create expired token", "create", 400, "ExpiredToken", "The provided token has expired.", ErrCredentials, 1},
		{"create skewed clock", "create", 403, "RequestTimeTooSkewed", "The difference between the request time and the current time is too large.", nil, 1},
		// Keys the store refuses.
		{"create key too long", "create", 400, "KeyTooLongError", "Your key is too long", providers.ErrInvalidKey, 1},
		// A bucket name the store refuses: the bucket's fault, not the key's.
		{"get invalid bucket name", "get", 400, "InvalidBucketName", "The specified bucket is not valid.", providers.ErrInvalidBucket, 1},
		{"create invalid bucket name", "create", 400, "InvalidBucketName", "The specified bucket is not valid.", providers.ErrInvalidBucket, 1},
		// A store without conditional writes.
		{"create not implemented", "create", 501, "NotImplemented", "A header you provided implies functionality that is not implemented", errors.ErrUnsupported, 1},
		// Failures inside the store: a write may have landed; a read is retried.
		{"create internal error", "create", 500, "InternalError", "We encountered an internal error. Please try again.", providers.ErrUnknownOutcome, 1},
		{"replace internal error", "replace", 500, "InternalError", "We encountered an internal error. Please try again.", providers.ErrUnknownOutcome, 1},
		{"delete unavailable", "delete", 503, "ServiceUnavailable", "Service is unable to handle request.", providers.ErrUnknownOutcome, 1},
		{"get internal error", "get", 500, "InternalError", "We encountered an internal error. Please try again.", nil, 3},
		// Anything else keeps only the native error.
		{"create invalid argument", "create", 400, "InvalidArgument", "Invalid argument", nil, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := "leases/" + strings.ReplaceAll(tt.name, " ", "-")
			s, f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
				switch {
				case r.Method == http.MethodHead && tt.op == "delete":
					headOK(w)
					return
				case r.Method == http.MethodGet && tt.op == "stat":
					// The listing that tells a missing key from a missing
					// bucket after a bare 404 to HEAD.
					emptyListing(w, key)
					return
				}
				s3Error(w, r, tt.status, tt.code, tt.msg)
			})
			err := do(t.Context(), s, tt.op, key)
			checkMapped(t, err, tt.op, key, tt.want)
			if tt.code != "" && tt.op != "stat" {
				var ae smithy.APIError
				if !errors.As(err, &ae) || ae.ErrorCode() != tt.code {
					t.Errorf("native code not reachable: want %s in %v", tt.code, err)
				}
			}
			var re *smithyhttp.ResponseError
			if !errors.As(err, &re) || re.HTTPStatusCode() != tt.status {
				t.Errorf("native status not reachable: want %d in %v", tt.status, err)
			}
			if got := f.requests(methodOf(tt.op)); tt.wantAttempts != 0 && got != tt.wantAttempts {
				t.Errorf("%d %s requests, want %d", got, methodOf(tt.op), tt.wantAttempts)
			}
			if tt.code == "InvalidBucketName" && !strings.Contains(err.Error(), `invalid bucket name "`+testBucket+`"`) {
				t.Errorf("error does not say the bucket name %q is invalid: %v", testBucket, err)
			}
			if errors.Is(err, ErrNoBucket) || errors.Is(err, ErrCredentials) {
				if !strings.Contains(err.Error(), `"`+testBucket+`"`) {
					t.Errorf("error does not name bucket %q: %v", testBucket, err)
				}
			}
		})
	}
}

// emptyListing answers a one-key listing of an existing, empty bucket.
func emptyListing(w http.ResponseWriter, prefix string) {
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult><Name>%s</Name><Prefix>%s</Prefix><KeyCount>0</KeyCount><MaxKeys>1</MaxKeys><IsTruncated>false</IsTruncated></ListBucketResult>`, testBucket, prefix)
}

// TestDeletePrecheck covers the HEAD that Delete sends first.
func TestDeletePrecheck(t *testing.T) {
	t.Run("absent", func(t *testing.T) {
		// HEAD answers a bare 404; the listing that tells a missing key
		// from a missing bucket finds the bucket, empty.
		s, f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet {
				emptyListing(w, "k")
				return
			}
			s3Error(w, r, 404, "", "")
		})
		err := s.Delete(t.Context(), "k", "v1")
		checkMapped(t, err, "delete", "k", providers.ErrPrecondition)
		if n := f.requests(http.MethodDelete); n != 0 {
			t.Errorf("%d DELETE requests for an absent key, want 0", n)
		}
	})
	t.Run("other version", func(t *testing.T) {
		// The HEAD sees v1, but the stale version still goes to the store,
		// which must refuse it: only then can Probe catch a store that
		// ignores If-Match on DELETE.
		s, f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodHead {
				headOK(w)
				return
			}
			s3Error(w, r, 412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold")
		})
		err := s.Delete(t.Context(), "k", "v0")
		checkMapped(t, err, "delete", "k", providers.ErrPrecondition)
		if n := f.requests(http.MethodDelete); n != 1 {
			t.Fatalf("%d DELETE requests for a stale version, want 1", n)
		}
		if got := f.lastRequest(http.MethodDelete).Header.Get("If-Match"); got != `"v0"` {
			t.Errorf("delete sent If-Match %q, want \"v0\"", got)
		}
	})
	t.Run("head fails", func(t *testing.T) {
		// A failed HEAD is a read: nothing was written, the outcome is known.
		s, f := newFake(t, func(w http.ResponseWriter, r *http.Request) { s3Error(w, r, 500, "", "") })
		err := s.Delete(t.Context(), "k", "v1")
		checkMapped(t, err, "delete", "k", nil)
		if n := f.requests(http.MethodHead); n != 3 {
			t.Errorf("%d HEAD requests, want 3 (reads are retried)", n)
		}
	})
}

// dropConnection reads the request, then closes the connection without a
// reply: the request reached the store, the answer never came back.
func dropConnection(w http.ResponseWriter, r *http.Request) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err)
	}
	conn.Close()
}

// TestTransportErrors: a write whose reply is lost, or that the context cut
// short in flight, has an unknown outcome and is sent once; a read is retried
// and fails without claiming anything about a write.
func TestTransportErrors(t *testing.T) {
	for _, op := range []string{"create", "replace", "delete", "get", "stat", "list"} {
		t.Run("lost reply/"+op, func(t *testing.T) {
			s, f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodHead && op == "delete" {
					headOK(w)
					return
				}
				dropConnection(w, r)
			})
			err := do(t.Context(), s, op, "k")
			want, attempts := error(nil), 3
			if m := methodOf(op); m == http.MethodPut || m == http.MethodDelete {
				want, attempts = providers.ErrUnknownOutcome, 1
			}
			checkMapped(t, err, op, "k", want)
			if n := f.requests(methodOf(op)); n != attempts {
				t.Errorf("%d %s requests, want %d", n, methodOf(op), attempts)
			}
		})
	}

	// blockUntilGone holds the request until the client gives up on it (or
	// the test ends), telling the test when the request has arrived.
	blockUntilGone := func(t *testing.T, arrived chan<- struct{}) *providers.Bucket {
		stop := make(chan struct{})
		s, _ := newFake(t, func(w http.ResponseWriter, r *http.Request) {
			// The server notices a closed connection only once the body is read.
			io.Copy(io.Discard, r.Body)
			arrived <- struct{}{}
			select {
			case <-r.Context().Done():
			case <-stop:
			}
		})
		t.Cleanup(func() { close(stop) }) // runs before the server's Close
		return s
	}
	t.Run("canceled in flight", func(t *testing.T) {
		arrived := make(chan struct{}, 1)
		s := blockUntilGone(t, arrived)
		ctx, cancel := context.WithCancel(t.Context())
		go func() { <-arrived; cancel() }()
		_, err := s.Create(ctx, "k", []byte("x"), nil)
		checkMapped(t, err, "create", "k", providers.ErrUnknownOutcome)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cause not reachable: %v", err)
		}
	})
	t.Run("deadline in flight", func(t *testing.T) {
		arrived := make(chan struct{}, 1)
		s := blockUntilGone(t, arrived)
		// The server never answers, so the deadline's length only sets how
		// long the test waits.
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		_, err := s.Replace(ctx, "k", []byte("x"), nil, "v1")
		checkMapped(t, err, "replace", "k", providers.ErrUnknownOutcome)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("cause not reachable: %v", err)
		}
	})
	t.Run("canceled before sending", func(t *testing.T) {
		s, f := newFake(t, func(w http.ResponseWriter, r *http.Request) { t.Error("request sent") })
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := s.Create(ctx, "k", []byte("x"), nil)
		if !errors.Is(err, context.Canceled) || errors.Is(err, providers.ErrUnknownOutcome) {
			t.Errorf("create with a done context: %v, want context.Canceled and a known outcome", err)
		}
		if n := f.requests(http.MethodPut); n != 0 {
			t.Errorf("%d PUT requests, want 0", n)
		}
	})
	t.Run("success without ETag", func(t *testing.T) {
		s, _ := newFake(t, func(w http.ResponseWriter, r *http.Request) { awsHeaders(w) })
		_, err := s.Create(t.Context(), "k", []byte("x"), nil)
		if !errors.Is(err, providers.ErrUnknownOutcome) {
			t.Errorf("create answered 200 without ETag: %v, want ErrUnknownOutcome", err)
		}
	})
}

// TestStatMissingBucket: a HEAD's 404 has no body, so until the bucket is
// known to exist Stat asks a one-key listing what the 404 meant.
func TestStatMissingBucket(t *testing.T) {
	for _, tt := range []struct {
		name             string
		status           int
		code, msg        string
		want             error
		listsAfterSecond int // listings after a second Stat
	}{
		{"bucket missing", 404, "NoSuchBucket", "The specified bucket does not exist", ErrNoBucket, 2},
		{"versitygw unknown key", 404, "XAdminUserNotFound", "No user exists with the provided access key ID.", ErrCredentials, 2},
		{"object missing", 200, "", "", providers.ErrNotFound, 1},
		{"listing not allowed", 403, "AccessDenied", "Access Denied", providers.ErrNotFound, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
				switch {
				case r.Method == http.MethodHead:
					s3Error(w, r, 404, "", "")
				case tt.status == 200:
					awsHeaders(w)
					w.Header().Set("Content-Type", "application/xml")
					fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult><Name>%s</Name><Prefix>k</Prefix><KeyCount>0</KeyCount><MaxKeys>1</MaxKeys><IsTruncated>false</IsTruncated></ListBucketResult>`, testBucket)
				default:
					s3Error(w, r, tt.status, tt.code, tt.msg)
				}
			})
			_, err := s.Stat(t.Context(), "k")
			if !errors.Is(err, tt.want) {
				t.Fatalf("stat: %v, want %v", err, tt.want)
			}
			checkError(t, err, "stat", "k")
			if errors.Is(err, ErrNoBucket) && !strings.Contains(err.Error(), `"`+testBucket+`"`) {
				t.Errorf("error does not name bucket %q: %v", testBucket, err)
			}
			_, err = s.Stat(t.Context(), "k")
			if !errors.Is(err, tt.want) {
				t.Fatalf("second stat: %v, want %v", err, tt.want)
			}
			if n := f.requests(http.MethodGet); n != tt.listsAfterSecond {
				t.Errorf("%d listings after two Stats, want %d", n, tt.listsAfterSecond)
			}
		})
	}
}

func checkError(t *testing.T, err error, op, key string) {
	t.Helper()
	var pe *providers.Error
	if !errors.As(err, &pe) || pe.Op != op || pe.Key != key {
		t.Errorf("%s %q: %v (%T) does not name the operation and key", op, key, err, err)
	}
}

// TestUnreachable: with nothing listening, no request is ever sent, so even
// a write's outcome is known: ErrUnreachable, not ErrUnknownOutcome.
func TestUnreachable(t *testing.T) {
	s, f := newFake(t, func(w http.ResponseWriter, r *http.Request) {})
	f.srv.Close() // the port now refuses connections
	for _, op := range []string{"create", "replace", "delete", "get", "stat", "list"} {
		err := do(t.Context(), s, op, "k")
		if !errors.Is(err, providers.ErrUnreachable) || errors.Is(err, providers.ErrUnknownOutcome) {
			t.Errorf("%s with the store down: %v, want ErrUnreachable and a known outcome", op, err)
		}
		checkError(t, err, op, "k")
		if op != "list" && !strings.Contains(err.Error(), `"`+testBucket+`"`) {
			t.Errorf("%s: error does not name bucket %q: %v", op, testBucket, err)
		}
	}
}

// TestNotAnS3Endpoint: a server that is not S3 (a GCS emulator, a web
// server, a wrong host behind a proxy) answers 4xx without an S3 error
// body, or with no body at all. That is not a missing object: every
// operation says the endpoint does not serve the API.
func TestNotAnS3Endpoint(t *testing.T) {
	for _, page := range []struct{ name, contentType, body string }{
		{"plain", "text/plain; charset=utf-8", "404 page not found\n"},
		{"html", "text/html", "<!DOCTYPE HTML>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Error response</title>\n</head>\n<body><h1>Error response</h1></body></html>\n"},
		{"json", "application/json", `{"error":{"code":404,"message":"Not Found"}}`},
		{"empty", "", ""},
	} {
		for _, op := range []string{"get", "stat", "list", "create", "replace", "delete"} {
			t.Run(page.name+"/"+op, func(t *testing.T) {
				s, _ := newFake(t, func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", page.contentType)
					w.WriteHeader(http.StatusNotFound)
					if r.Method != http.MethodHead {
						io.WriteString(w, page.body)
					}
				})
				err := do(t.Context(), s, op, "k")
				if !errors.Is(err, providers.ErrWrongEndpoint) {
					t.Fatalf("%s: %v, want ErrWrongEndpoint", op, err)
				}
			})
		}
	}
}

// TestWrongRegion: a request signed for another region than the bucket's
// exited 69 with the store's message, or 69 "400 BadRequest" for a HEAD.
// Each answer that names the bucket's region says which region to give,
// as a bad URL (64). The fake is in us-east-1.
func TestWrongRegion(t *testing.T) {
	for _, tt := range []struct{ name, how string }{
		{"versitygw", "400"}, // 400 AuthorizationHeaderMalformed, bare to HEAD
		{"aws", "301"},       // 301 PermanentRedirect with x-amz-bucket-region
	} {
		for _, op := range []string{"get", "stat", "list", "create", "replace"} {
			t.Run(tt.name+"/"+op, func(t *testing.T) {
				s, _ := newFake(t, func(w http.ResponseWriter, r *http.Request) {
					if tt.how == "301" {
						w.Header().Set("X-Amz-Bucket-Region", "eu-west-1")
						s3Error(w, r, 301, "PermanentRedirect", "The bucket you are attempting to access must be addressed using the specified endpoint. Please send all future requests to this endpoint.")
						return
					}
					s3Error(w, r, 400, "AuthorizationHeaderMalformed", `The authorization header is malformed; the region "us-east-1" is wrong; expecting "eu-west-1"`)
				})
				err := do(t.Context(), s, op, "k")
				if !errors.Is(err, providers.ErrBadURL) || !strings.Contains(err.Error(), `bucket "bkt" is in region "eu-west-1", not "us-east-1": give ?region=eu-west-1`) {
					t.Errorf("%s: %v, want ErrBadURL naming the region", op, err)
				}
			})
		}
	}
}

// TestListingNotS3: fake-gcs-server's XML API, given as an S3 endpoint,
// lists a bucket with a ListBucketResult that has no IsTruncated, which no
// S3 listing lacks: the endpoint does not serve the API, for list and for
// the listing after a HEAD's bare 404.
func TestListingNotS3(t *testing.T) {
	s, _ := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead {
			s3Error(w, r, 404, "", "")
			return
		}
		w.Header().Set("Content-Type", "application/xml")
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult><Name>%s</Name><Delimiter></Delimiter><Prefix></Prefix><KeyCount>0</KeyCount></ListBucketResult>`, testBucket)
	})
	for _, op := range []string{"list", "stat"} {
		err := do(t.Context(), s, op, "k")
		if !errors.Is(err, providers.ErrWrongEndpoint) {
			t.Errorf("%s: %v, want ErrWrongEndpoint", op, err)
		}
		checkError(t, err, op, "k")
	}
}

// TestErrorBodyCut: a refusal whose body the connection lost mid-way (MinIO
// closes the connection after a 403 to a PUT whose body it did not read) is
// still the refusal its status line says, not a foreign endpoint.
func TestErrorBodyCut(t *testing.T) {
	const body = `<?xml version="1.0" encoding="UTF-8"?>` + "\n" +
		`<Error><Code>SignatureDoesNotMatch</Code><Message>The request signature we calculated does not match`
	for _, op := range []string{"create", "replace", "get", "list"} {
		t.Run(op, func(t *testing.T) {
			s, _ := newFake(t, func(w http.ResponseWriter, r *http.Request) {
				conn, buf, err := http.NewResponseController(w).Hijack()
				if err != nil {
					panic(err)
				}
				defer conn.Close()
				fmt.Fprintf(buf, "HTTP/1.1 403 Forbidden\r\nContent-Type: application/xml\r\nContent-Length: %d\r\n\r\n%s", len(body)+200, body)
				buf.Flush()
			})
			err := do(t.Context(), s, op, "k")
			if !errors.Is(err, providers.ErrPermission) || errors.Is(err, providers.ErrWrongEndpoint) {
				t.Fatalf("%s answered 403 with its body cut: %v, want ErrPermission", op, err)
			}
		})
	}
}

// TestWrite404BodyCut: Ceph RGW answers a PUT to a missing bucket with 404
// and closes the connection before its body is read. A listing then says
// whether the bucket or the key was missing.
func TestWrite404BodyCut(t *testing.T) {
	for _, tt := range []struct {
		op           string
		bucketExists bool
		want         error
	}{
		{"create", false, ErrNoBucket},
		{"replace", false, ErrNoBucket},
		{"delete", false, ErrNoBucket},
		{"replace", true, providers.ErrPrecondition},
		{"delete", true, providers.ErrPrecondition},
	} {
		t.Run(fmt.Sprintf("%s/bucket exists %v", tt.op, tt.bucketExists), func(t *testing.T) {
			s, _ := newFake(t, func(w http.ResponseWriter, r *http.Request) {
				switch {
				case r.Method == http.MethodHead:
					headOK(w)
				case r.Method == http.MethodGet && tt.bucketExists:
					awsHeaders(w)
					w.Header().Set("Content-Type", "application/xml")
					fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult><Name>%s</Name><Prefix>k</Prefix><KeyCount>0</KeyCount><MaxKeys>1</MaxKeys><IsTruncated>false</IsTruncated></ListBucketResult>`, testBucket)
				case r.Method == http.MethodGet:
					s3Error(w, r, 404, "NoSuchBucket", "The specified bucket does not exist")
				default:
					const body = `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuch`
					conn, buf, err := http.NewResponseController(w).Hijack()
					if err != nil {
						panic(err)
					}
					defer conn.Close()
					fmt.Fprintf(buf, "HTTP/1.1 404 Not Found\r\nContent-Type: application/xml\r\nContent-Length: %d\r\n\r\n%s", len(body)+200, body)
					buf.Flush()
				}
			})
			err := do(t.Context(), s, tt.op, "k")
			if !errors.Is(err, tt.want) {
				t.Fatalf("%s answered 404 with its body cut: %v, want %v", tt.op, err, tt.want)
			}
			checkError(t, err, tt.op, "k")
		})
	}
}

// TestErrorBodyLostLocally: the error as the SDK reported it in a CI run
// against MinIO: the 403's body could not be read because the connection
// had already been closed on this side.
func TestErrorBodyLostLocally(t *testing.T) {
	closed := &net.OpError{Op: "read", Net: "tcp", Err: net.ErrClosed}
	err := &smithy.OperationError{ServiceID: "S3", OperationName: "PutObject", Err: &smithyhttp.ResponseError{
		Response: &smithyhttp.Response{Response: &http.Response{
			StatusCode: http.StatusForbidden, ContentLength: 300, Request: &http.Request{Method: http.MethodPut},
		}},
		Err: &smithy.DeserializationError{Err: fmt.Errorf("failed to copy error response body, %w", closed)},
	}}
	s := &store{bucket: testBucket}
	if got := s.mapError("create", "k", write, err); !errors.Is(got, providers.ErrPermission) || errors.Is(got, providers.ErrWrongEndpoint) {
		t.Errorf("403 with its body lost on a closed connection: %v, want ErrPermission", got)
	}
}
