package s3store

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/aws"
	s3sdk "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/driver"
)

// Names this package gave the portable errors before package providers had
// them; they are the same values.
var (
	// ErrNoBucket is providers.ErrNoBucket.
	ErrNoBucket = providers.ErrNoBucket
	// ErrCredentials is providers.ErrPermission.
	ErrCredentials = providers.ErrPermission
)

// answer is what a failed SDK call tells us about the store's reply.
type answer struct {
	status  int    // HTTP status; 0 if no reply arrived
	code    string // S3 error code from the body, or the SDK's stand-in for HEAD
	noReply bool   // the request failed in transit, or its reply was lost or unreadable
	ctxErr  bool   // the caller's context ended while the request was out
	// region is the bucket's region where the reply names it (the
	// x-amz-bucket-region header, or "expecting" in the message).
	region string
	// notS3 says a reply with a body carried no S3 error in it: the body
	// was not XML, or had no error code, so the SDK made one up from the
	// status line. S3 names its errors in every reply that has a body.
	notS3 bool
}

func inspect(err error) answer {
	var a answer
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) && re.Response != nil {
		a.status = re.HTTPStatusCode()
	}
	if re != nil && re.Response != nil {
		a.region = re.Response.Header.Get("X-Amz-Bucket-Region")
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		a.code = ae.ErrorCode()
		if m := expectingRegion.FindStringSubmatch(ae.ErrorMessage()); m != nil {
			a.region = m[1]
		}
	}
	var send *smithyhttp.RequestSendError
	var de *smithy.DeserializationError
	var ne net.Error
	a.noReply = errors.As(err, &send) || errors.As(err, &de) || errors.As(err, &ne)
	a.ctxErr = errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
	// A HEAD's reply has no body, and says nothing either way. Any other
	// 404 or 405 from S3 names its error in a body: one with no body is
	// from something else (a wrong host behind a proxy).
	head := re != nil && re.Response != nil && re.Response.Request != nil && re.Response.Request.Method == http.MethodHead
	if (a.status == 404 || a.status == 405) && !head && re.Response.ContentLength == 0 {
		a.notS3 = true
	}
	// A 500 is judged so only where its body is XML: a front end's own
	// 500 page is a failure to retry, but an XML error S3 would not write
	// (fake-gcs-server's <errorResponse> for a bucket it lacks) is from a
	// server that is not S3.
	xmlBody := re != nil && re.Response != nil && strings.Contains(re.Response.Header.Get("Content-Type"), "xml")
	if (a.status >= 400 && a.status < 500 || a.status == 501 || a.status == 500 && xmlBody) && !head && re.Response.ContentLength != 0 {
		text := http.StatusText(a.status)
		var syntax *xml.SyntaxError
		// A body cut off in transit is lost, not foreign: the status line
		// still says what the store answered.
		a.notS3 = !bodyLost(err) && (errors.As(err, &de) || errors.As(err, &syntax) ||
			ae != nil && ae.ErrorCode() == strings.ReplaceAll(text, " ", "") && ae.ErrorMessage() == text)
	}
	return a
}

// expectingRegion finds the bucket's region in AuthorizationHeaderMalformed's
// message: AWS `the region 'us-east-1' is wrong; expecting 'eu-west-1'`,
// versitygw the same with double quotes.
var expectingRegion = regexp.MustCompile(`expecting ['"]([a-z0-9-]+)['"]`)

// bodyLost says reading the reply failed on the connection (it closed or
// reset mid-body), as opposed to the body arriving and not parsing.
func bodyLost(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET)
}

// request says what a failed request was for, which decides what some
// answers mean.
type request int

const (
	read     request = iota // Get, Stat, List
	write                   // a conditional PUT or DELETE: it may have landed
	precheck                // the HEAD before a DELETE: a read, but absent means "no match"
)

// mapError is the one place where S3 answers become portable errors. Rows
// are checked in order; the comment on each says which store behaviour it
// covers. The result names op and key and wraps err.
func (s *store) mapError(op, key string, req request, err error) error {
	a := inspect(err)
	var sentinel error
	switch {
	// AWS and versitygw: If-None-Match: * on an existing key, or If-Match
	// with a stale ETag (PUT and DELETE).
	case a.status == 412:
		sentinel = providers.ErrPrecondition

	// No credentials could be obtained (none configured, or the chain
	// failed): nothing was sent.
	case a.status == 0 && errors.Is(err, providers.ErrNoCredentials):
		sentinel = providers.ErrNoCredentials

	// A server that is not S3 (a GCS emulator, a web server, a wrong
	// path behind a proxy): a 4xx (or 501) reply whose body holds no S3
	// error. A
	// HEAD's reply has no body and is not judged here (see whyMissing).
	case a.notS3:
		sentinel = fmt.Errorf("%w: bucket %q: the endpoint answered %d without an S3 error in the reply", providers.ErrWrongEndpoint, s.bucket, a.status)

	// The region the request was signed for is not the bucket's. AWS: 301
	// PermanentRedirect (bare to HEAD) with x-amz-bucket-region; AWS and
	// versitygw: 400 AuthorizationHeaderMalformed "... expecting 'R'".
	case a.region != "" && (a.status == 301 || a.status == 400) && a.region != s.signingRegion():
		sentinel = fmt.Errorf("%w: bucket %q is in region %q, not %q: give ?region=%s (or set AWS_REGION)", providers.ErrBadURL, s.bucket, a.region, s.signingRegion(), a.region)

	// AWS and versitygw: NoSuchBucket on any request with a body.
	case a.code == "NoSuchBucket":
		sentinel = fmt.Errorf("%w: %q", ErrNoBucket, s.bucket)

	// AWS and MinIO: 403 AccessDenied, the credentials are good and a
	// policy denies the request.
	case a.status == 403 && a.code == "AccessDenied":
		sentinel = fmt.Errorf("%w for bucket %q", providers.ErrAccessDenied, s.bucket)

	// AWS: 403 InvalidAccessKeyId, SignatureDoesNotMatch (and a bare 403
	// on HEAD); 400 ExpiredToken / InvalidToken for stale session
	// credentials. versitygw: 404 XAdminUserNotFound for an unknown access
	// key. A skewed clock is the SDK's to correct, not a credentials problem.
	case a.status == 403 && a.code != "RequestTimeTooSkewed",
		a.code == "XAdminUserNotFound", a.code == "ExpiredToken", a.code == "InvalidToken":
		sentinel = fmt.Errorf("%w for bucket %q", ErrCredentials, s.bucket)

	// AWS and versitygw: GET of a missing key answers 404 NoSuchKey; HEAD has
	// no body, so the SDK reports NotFound.
	case req == read && a.status == 404:
		sentinel = providers.ErrNotFound

	// AWS and versitygw: PUT with If-Match on a missing key answers 404
	// NoSuchKey, and so does AWS for DELETE; the HEAD before a DELETE answers
	// 404. For the contract, absent is one way of not matching.
	case a.status == 404 && (a.code == "NoSuchKey" || a.code == "NotFound"):
		sentinel = providers.ErrPrecondition

	// A 404 to a replace or delete whose body was lost, once a listing
	// has shown the bucket is there (see writeError): the key is missing,
	// one way of not matching.
	case req == write && a.status == 404 && a.code == "" && op != "create":
		sentinel = providers.ErrPrecondition

	// AWS only (no emulator here does it): a conditional write that raced
	// another one to the same key is refused with 409
	// ConditionalRequestConflict. Nothing was written.
	case a.status == 409 && a.code == "ConditionalRequestConflict":
		sentinel = providers.ErrConflict

	// AWS: 503 SlowDown when a prefix takes too many requests; 429 from
	// S3-compatible stores and proxies. Nothing was written.
	case a.status == 429, a.status == 503 && a.code == "SlowDown":
		sentinel = providers.ErrThrottled

	// AWS: 400 InvalidBucketName, for a name Open's check let through (an
	// S3-compatible store with a rule of its own): the bucket's fault, not
	// the key's.
	case a.code == "InvalidBucketName":
		sentinel = fmt.Errorf("%w %q", providers.ErrInvalidBucket, s.bucket)

	// AWS: 400 KeyTooLongError.
	case a.code == "KeyTooLongError":
		sentinel = providers.ErrInvalidKey

	// S3-compatible stores without conditional writes answer 501
	// NotImplemented to If-None-Match / If-Match. Nothing was written.
	case a.status == 501:
		sentinel = fmt.Errorf("%w: store does not implement conditional writes", errors.ErrUnsupported)

	// No connection could be made (refused, DNS, TLS handshake): the
	// request was never sent, so even a write's outcome is known.
	case a.status == 0 && driver.ConnectFailed(err):
		sentinel = fmt.Errorf("%w: bucket %q", providers.ErrUnreachable, s.bucket)

	// A write whose reply we did not get or could not read, that the
	// caller's context cut short, or that failed inside the store (5xx) may
	// have landed.
	case req == write && (a.status >= 500 || a.status < 300 && (a.noReply || a.ctxErr)):
		sentinel = providers.ErrUnknownOutcome
	}
	// The SDK's message names the operation, request and host IDs before
	// the store's answer; the answer is what a reader needs.
	var ae smithy.APIError
	if a.status != 0 && errors.As(err, &ae) {
		summary := fmt.Sprintf("%d %s", a.status, ae.ErrorCode())
		if m := ae.ErrorMessage(); m != "" {
			summary += ": " + m
		}
		err = driver.Native(summary, err)
	}
	if sentinel == nil {
		return &providers.Error{Op: op, Key: key, Err: err}
	}
	return providers.Wrap(op, key, sentinel, err)
}

// writeError is mapError for a failed write. A 404 whose body was lost
// (Ceph RGW closes the connection after a 404 to a PUT whose body it did not
// read) may mean no bucket or no key: a one-key listing tells them apart.
func (s *store) writeError(ctx context.Context, op, key string, err error) error {
	if a := inspect(err); a.status == 404 && a.code == "" && !a.notS3 {
		return s.whyMissingFor(ctx, op, write, key, err)
	}
	return s.mapError(op, key, write, err)
}

// signingRegion is the region requests are signed for.
func (s *store) signingRegion() string {
	if s.client == nil {
		return ""
	}
	return s.client.Options().Region
}

// whyMissing tells apart what a HEAD's bare 404 to Stat can mean, until the
// bucket is known to exist: a one-key listing names the cause in its body.
// If the listing is refused too (a policy without s3:ListBucket) or fails,
// the 404 stays ErrNotFound.
func (s *store) whyMissing(ctx context.Context, key string, headErr error) error {
	return s.whyMissingFor(ctx, "stat", read, key, headErr)
}

// whyMissingFor is whyMissing for op, whose HEAD answered 404 as req.
func (s *store) whyMissingFor(ctx context.Context, op string, req request, key string, headErr error) error {
	out, err := s.client.ListObjectsV2(ctx, &s3sdk.ListObjectsV2Input{Bucket: &s.bucket, Prefix: &key, MaxKeys: aws.Int32(1)}, s.opts...)
	if err == nil {
		if err := s.checkListing(out); err != nil {
			return providers.Wrap(op, key, err, headErr)
		}
		s.seen.Store(true)
		return s.mapError(op, key, req, headErr)
	}
	if m := s.mapError(op, key, read, err); errors.Is(m, ErrNoBucket) || errors.Is(m, providers.ErrWrongEndpoint) || errors.Is(m, providers.ErrBadURL) ||
		inspect(err).code != "AccessDenied" && errors.Is(m, ErrCredentials) {
		return m
	}
	return s.mapError(op, key, req, headErr)
}
