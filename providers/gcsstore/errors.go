package gcsstore

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"

	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/driver"
)

// mapErr turns what the SDK returned for op on key into an error matching
// the portable sentinels. It is the only place where store answers become
// portable errors; the SDK's error stays in the chain for errors.As. slot
// holds what DateTransport saw of the reply (nothing, for a client without
// it); ctx is the call's, for the one bucket lookup a 404 may need.
func (s *store) mapErr(ctx context.Context, slot *replySlot, op, key string, err error) error {
	write := op == "create" || op == "replace" || op == "delete"
	status := 0
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		status = ge.Code
	}
	// The SDK turns every 404 of an object call into ErrObjectNotExist, and
	// of a listing into ErrBucketNotExist; the read path drops the reply.
	notFound := status == http.StatusNotFound ||
		errors.Is(err, storage.ErrObjectNotExist) || errors.Is(err, storage.ErrBucketNotExist)
	body := slot.errorBody()
	if ge != nil && ge.Body != "" {
		body = ge.Body
	}
	// fake-gcs-server says "Not Found" for a missing bucket and a missing
	// object alike: until the bucket is known to exist, look it up once.
	var lookup error
	if notFound && !s.seen.Load() && !notAPI(op, body) && !bucketMissing(body) && op != "create" && op != "list" {
		lookup = s.lookUpBucket(ctx)
	}

	var sentinel error
	switch {
	// An S3 server (its reply carries an S3 request ID, which no Cloud
	// Storage reply does) given as a GCS endpoint: whatever it answered
	// (NoSuchBucket, 405 to the JSON API's POST) is not about the bucket.
	case status >= 400 && slot.fromS3(), errors.Is(lookup, errS3Endpoint):
		sentinel = fmt.Errorf("%w: bucket %q: the endpoint answered as an S3 server does (an x-amz-request-id in the reply), not as Cloud Storage: an S3 store takes an s3:// URL", providers.ErrWrongEndpoint, s.name)
	// A 404 with no body to a call of the JSON API, which always says why
	// in a JSON error: a server that answers 404 to everything.
	case notFound && op != "get" && slot.bareError() && (ge == nil || strings.TrimSpace(ge.Body) == ""):
		sentinel = fmt.Errorf("%w: bucket %q: the endpoint answered 404 with no body, which no Cloud Storage API does (is the endpoint the JSON API root, …/storage/v1/?)", providers.ErrWrongEndpoint, s.name)
	// GCS and fake-gcs-server: 412 conditionNotMet, DoesNotExist or
	// GenerationMatch did not hold (also GenerationMatch on a missing object).
	case status == http.StatusPreconditionFailed:
		sentinel = providers.ErrPrecondition
	// GCS: 409 conflict, a concurrent change to the same object won and this
	// request committed nothing. fake-gcs-server never answers it.
	case status == http.StatusConflict:
		sentinel = providers.ErrConflict
	// GCS: 429 rateLimitExceeded, more than about one mutation per second of
	// one object (or a project-wide rate limit), and sometimes 410 Gone for
	// the same limit. Nothing was written. fake-gcs-server never answers
	// either.
	case status == http.StatusTooManyRequests, status == http.StatusGone:
		sentinel = providers.ErrThrottled
	// GCS: 401 for missing or expired credentials, 403 "... does not have
	// storage.objects.create access" for IAM. Nothing was written.
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		sentinel = fmt.Errorf("%w for bucket %q", providers.ErrPermission, s.name)
	// A 404 page that no Cloud Storage API writes: the endpoint is not the
	// API root (an endpoint without /storage/v1/, or fake-gcs-server
	// without -public-host for XML reads). Taken for a missing object, it
	// would hide an existing one.
	case notFound && notAPI(op, body):
		hint := "is the endpoint the JSON API root, …/storage/v1/?"
		if op == "get" {
			hint = "fake-gcs-server serves XML reads only with -public-host set to its address"
		}
		sentinel = fmt.Errorf("%w: bucket %q: the endpoint answered a page no Cloud Storage API serves (%s): %q",
			providers.ErrWrongEndpoint, s.name, hint, firstLine(body))
	// GCS: 404 "The specified bucket does not exist." (JSON), NoSuchBucket
	// (XML read); a create or a listing cannot 404 for any other reason
	// (fake-gcs-server says only "Not Found").
	case notFound && (bucketMissing(body) || op == "create" || op == "list"):
		sentinel = fmt.Errorf("%w: %q", providers.ErrNoBucket, s.name)
	// The lookup found no bucket, or no API.
	case lookup != nil:
		sentinel = lookup
	// GCS and fake-gcs-server: 404 on a conditional replace or on a delete
	// naming a generation: the object, or that generation, is gone.
	case notFound && write:
		sentinel = providers.ErrPrecondition
	// GCS and fake-gcs-server: 404 on a read.
	case notFound:
		sentinel = providers.ErrNotFound
	// GCS: 400 "Invalid bucket name: '...'", for a name Open's check let
	// through: the bucket's fault, not the key's.
	case status == http.StatusBadRequest && strings.Contains(strings.ToLower(ge.Message+" "+body), "bucket name"):
		sentinel = fmt.Errorf("%w %q", providers.ErrInvalidBucket, s.name)
	// GCS: 400 invalid, an object name it refuses.
	case status == http.StatusBadRequest:
		sentinel = providers.ErrInvalidKey
	// No connection could be made (refused, DNS, TLS handshake): nothing
	// was sent, so even a write's outcome is known.
	case status == 0 && driver.ConnectFailed(err):
		sentinel = fmt.Errorf("%w: bucket %q", providers.ErrUnreachable, s.name)
	// A write answered 5xx, or not answered at all (connection reset, lost
	// response, timeout, context ended): it may have been applied.
	case write && (status >= 500 || status == 0):
		sentinel = providers.ErrUnknownOutcome
	// A read that failed after the SDK's retries, ...: no portable meaning,
	// the native error says what happened.
	default:
		return err
	}
	return fmt.Errorf("%w: %w", sentinel, err)
}

// lookUpBucket reads the bucket's metadata and notes that it exists. It
// returns an error matching ErrNoBucket if it does not, ErrWrongEndpoint if
// the answer came from no API, and nil if the bucket exists or the lookup
// itself failed (the original answer then stands).
func (s *store) lookUpBucket(ctx context.Context) error {
	ctx, slot := withReplySlot(ctx)
	_, err := s.bucket.Attrs(ctx)
	switch {
	case err == nil:
		s.seen.Store(true)
	case err != nil && slot.fromS3():
		return errS3Endpoint
	case errors.Is(err, storage.ErrBucketNotExist) && slot.bareError():
		return fmt.Errorf("%w: bucket %q: the endpoint answered 404 with no body, which no Cloud Storage API does (is the endpoint the JSON API root, …/storage/v1/?)",
			providers.ErrWrongEndpoint, s.name)
	case errors.Is(err, storage.ErrBucketNotExist) && notAPI("lookup", slot.errorBody()):
		return fmt.Errorf("%w: bucket %q: the endpoint answered a page no Cloud Storage API serves (is the endpoint the JSON API root, …/storage/v1/?): %q",
			providers.ErrWrongEndpoint, s.name, firstLine(slot.errorBody()))
	case errors.Is(err, storage.ErrBucketNotExist):
		return fmt.Errorf("%w: %q", providers.ErrNoBucket, s.name)
	}
	return nil
}

// errS3Endpoint is a bucket lookup answered by an S3 server; mapErr says
// so in full.
var errS3Endpoint = fmt.Errorf("%w: an S3 server", providers.ErrWrongEndpoint)

// bucketMissing reports GCS's answer for a bucket that does not exist, which
// the SDK reports like a missing object: "The specified bucket does not
// exist." in a JSON error, <Code>NoSuchBucket</Code> in an XML one.
func bucketMissing(body string) bool {
	return strings.Contains(strings.ToLower(body), "bucket does not exist") ||
		strings.Contains(body, "<Code>NoSuchBucket</Code>")
}

// notAPI reports a 404 body that Cloud Storage would not send for op: every
// call but a read goes to the JSON API, which answers JSON errors; a read's
// media download may also answer an XML error or, on fake-gcs-server, a bare
// "Not Found". Anything else (Go's "404 page not found", an HTML page from a
// front end, fake-gcs-server's "Not Found" to a JSON call sent to its XML
// paths) comes from something that is not the API.
func notAPI(op, body string) bool {
	b := strings.TrimSpace(body)
	switch {
	case b == "", strings.HasPrefix(b, "{"):
		return false
	case op == "get":
		return b != "Not Found" && !strings.HasPrefix(b, "<?xml") && !strings.HasPrefix(b, "<Error")
	}
	return true
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return s
}
