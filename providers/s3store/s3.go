// Package s3store stores lease records in an Amazon S3 bucket or an S3-compatible
// store, using conditional PutObject and DeleteObject.
//
// # Constructing
//
// Build an *s3sdk.Client the usual way (so you control credentials,
// transport and retries) and wrap it:
//
//	cfg, err := config.LoadDefaultConfig(ctx)
//	client := s3sdk.NewFromConfig(cfg)
//	store := s3store.New(client, "my-bucket") // a *providers.Bucket
//
// or open a URL (the scheme is registered when this package is imported):
//
//	store, key, err := providers.Open(ctx, "s3://my-bucket/leases/job?region=eu-west-1")
//
// # URL form
//
//	s3://BUCKET/KEY/PATH?endpoint=http://127.0.0.1:7070&region=us-east-1&path_style=true
//
// Query parameters (any other is refused):
//   - endpoint: base URL of an S3-compatible store. Without it the SDK's
//     default endpoint applies, which honours AWS_ENDPOINT_URL_S3 and
//     AWS_ENDPOINT_URL.
//   - region: signing region. Without it AWS_REGION, AWS_DEFAULT_REGION or the
//     shared config decide; if none does, us-east-1.
//   - path_style: "true" for path-style addressing (http://host/bucket/key).
//     It defaults to true when an endpoint is given, by the URL or by
//     AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL, and to false otherwise.
//   - tigris_consistent: "true" to send X-Tigris-Consistent: true with every
//     request to a Tigris bucket reached under a name of its own; see
//     TigrisConsistent. Tigris's own endpoints get it without asking.
//   - unquoted_etag: "true" to send If-Match without the quotes S3 puts
//     around an ETag, for servers that compare it with an unquoted one and
//     refuse every conditional write against the current version (Ceph RGW
//     16); see UnquotedETags. objlease doctor finds such a server and says
//     to add it.
//
// Credentials come from the SDK's default chain (config.LoadDefaultConfig):
// AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, AWS_PROFILE
// and the shared files, web identity, container and EC2 instance roles.
//
// # Writes
//
// Create sends PutObject with If-None-Match: *, Replace sends PutObject with
// If-Match: the version. Delete sends HEAD, then DeleteObject with If-Match:
// AWS answers 404 to a conditional DELETE of a missing key, but some
// S3-compatible stores (versitygw) answer 204, and the HEAD keeps Delete's
// promise of ErrPrecondition there too, except for a key that vanishes
// between the two requests. The HEAD only looks for a missing key: a stale
// version is always sent to the store, so that a store ignoring If-Match on
// DELETE is caught by probe.Run instead of being hidden by a local
// check. A version is the object's ETag
// without its quotes. ETags of single-part uploads are the MD5 of the body, so
// writing identical bytes again yields an earlier version again
// (Properties.VersionsRepeat is true).
//
// Keys must be at most 1024 bytes; the Bucket refuses control characters
// (ListObjectsV2 could not return those in XML) with the other portable
// rules.
//
// # Tigris
//
// Tigris evaluates If-Match and If-None-Match on an object's leader, and
// serves a read from it, only for a request that carries
// X-Tigris-Consistent: true. Every request to an endpoint in Tigris's
// domains (t3.storage.dev, fly.storage.tigris.dev) carries it, so that
// conditional writes are decided on the leader and a renewal sees the
// record as it is; other stores never get it unless the client was built
// with TigrisConsistent (or the URL says tigris_consistent=true).
//
// # Retries
//
// Reads keep the client's retry policy. Conditional writes are sent exactly
// once: if the SDK resent a write whose first reply was lost, the resend would
// be refused with 412 although the first attempt succeeded, and the caller
// would be told "precondition failed" about its own write. Sent once, such a
// write reports ErrUnknownOutcome instead, which the lease protocol resolves
// by re-reading the record and looking for its own nonce. Throttling answers
// to writes are returned at once as ErrThrottled for the same reason.
//
// # Errors
//
// Store answers map onto the portable errors of package providers (and the
// two of this package); the SDK's error stays reachable with errors.As
// (smithy.APIError for the code, *smithyhttp.ResponseError for the status),
// and messages name the key:
//
//	412 PreconditionFailed (stale If-Match, If-None-Match on existing)  ErrPrecondition
//	404 NoSuchKey on a write, 404 to Delete's HEAD (key missing)        ErrPrecondition
//	404 NoSuchKey on GET, 404 on HEAD                                   ErrNotFound
//	409 ConditionalRequestConflict (AWS: racing conditional writes)     ErrConflict
//	429, 503 SlowDown                                                   ErrThrottled
//	404 NoSuchBucket                                                    ErrNoBucket, naming the bucket
//	404 to a write whose body was lost (Ceph RGW): a one-key listing
//	tells a missing bucket (ErrNoBucket) from a missing key             ErrPrecondition
//	403 (AWS: InvalidAccessKeyId, SignatureDoesNotMatch, AccessDenied),
//	404 XAdminUserNotFound (versitygw: unknown key),
//	400 ExpiredToken, InvalidToken                                      ErrPermission, naming the bucket
//	400 InvalidBucketName                                               ErrInvalidBucket (also ErrInvalidKey), naming the bucket
//	400 KeyTooLongError                                                 ErrInvalidKey
//	501 NotImplemented (store lacks conditional writes)                 errors.ErrUnsupported
//	301 with x-amz-bucket-region, 400 AuthorizationHeaderMalformed
//	"... expecting 'R'" (the request was signed for another region)     ErrBadURL, naming the region to give
//	4xx whose body holds no S3 error, 404 or 405 with no body (not to
//	HEAD), a listing without IsTruncated (not an S3 server)             ErrWrongEndpoint
//	no connection (refused, DNS, TLS handshake): nothing sent           ErrUnreachable
//	on PUT and DELETE: transport error, lost reply, timeout or
//	cancellation after sending, 5xx                                     ErrUnknownOutcome
//
// Anything else (a read's 5xx or transport error after the SDK's retries, 403
// RequestTimeTooSkewed, ...) is a *providers.Error that wraps only the native
// error. A write whose context is done before it is sent wraps the context's
// error: nothing was sent. A HEAD reply has no body, so a 404 (or 400, or
// 301) to Stat's HEAD could be a missing bucket (or on versitygw an unknown access key): until
// a request has shown the bucket exists, Stat asks once more with a one-key
// listing, whose reply names the cause. Delete reports ErrPrecondition for a
// missing bucket.
//
// # Timestamps
//
// Attrs.LastModified is S3's Last-Modified (1 s resolution) on Get, Stat and
// List. WriteResult.LastModified stays zero: the PutObject reply does not
// carry it. StoreTime is the reply's Date header everywhere.
package s3store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	s3sdk "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/driver"
)

// maxKeyBytes is S3's limit on the length of a key.
const maxKeyBytes = 1024

// store is the driver.Driver for one S3 bucket; New puts it under a
// *providers.Bucket. It is safe for concurrent use.
type store struct {
	client *s3sdk.Client
	bucket string
	// seen: a reply has shown that the bucket exists, so a HEAD's bare
	// 404 means the object is missing.
	seen atomic.Bool
	// opts apply to every request (TigrisConsistent on Tigris).
	opts []func(*s3sdk.Options)
}

var _ driver.Driver = (*store)(nil)

// New returns the store for bucket that uses client, which the caller has
// configured (credentials, region, endpoint, HTTP client, retries).
func New(client *s3sdk.Client, bucket string) *providers.Bucket {
	return providers.NewBucket(NewDriver(client, bucket)).WithRequestTimeout(providers.DefaultRequestTimeout)
}

// NewDriver returns the driver New wraps, for a caller that puts its own
// layer (such as package faulty) between it and providers.NewBucket.
func NewDriver(client *s3sdk.Client, bucket string) driver.Driver {
	s := &store{client: client, bucket: bucket}
	if client != nil && isTigris(client.Options().BaseEndpoint) {
		s.opts = append(s.opts, TigrisConsistent)
	}
	return s
}

// with returns the options of every request followed by more.
func (s *store) with(more ...func(*s3sdk.Options)) []func(*s3sdk.Options) {
	return append(s.opts[:len(s.opts):len(s.opts)], more...)
}

// sendOnce turns off the SDK's retries for one conditional write; see the
// package doc.
func sendOnce(o *s3sdk.Options) { o.Retryer = retry.AddWithMaxAttempts(o.Retryer, 1) }

// Read starts reading the object under key: one GET.
func (s *store) Read(ctx context.Context, key string, _ int64) (*driver.Reader, error) {
	out, err := s.client.GetObject(ctx, &s3sdk.GetObjectInput{Bucket: &s.bucket, Key: &key}, s.opts...)
	if err != nil {
		return nil, s.mapError("get", key, read, err)
	}
	s.seen.Store(true)
	size := int64(-1)
	if out.ContentLength != nil {
		size = *out.ContentLength
	}
	return &driver.Reader{
		Attrs: driver.Attrs{
			Key:          key,
			Version:      version(out.ETag),
			Size:         size,
			Metadata:     out.Metadata,
			LastModified: aws.ToTime(out.LastModified),
			StoreTime:    dateOf(out.ResultMetadata),
		},
		Body: out.Body,
	}, nil
}

// Stat reads the attributes and metadata of the object under key.
func (s *store) Stat(ctx context.Context, key string) (*driver.Attrs, error) {
	const op = "stat"
	out, err := s.client.HeadObject(ctx, &s3sdk.HeadObjectInput{Bucket: &s.bucket, Key: &key}, s.opts...)
	if err != nil {
		// A HEAD's reply has no body: until the bucket is known to exist,
		// a listing names what a bare 404, 400 or 301 meant.
		if st := inspect(err).status; (st == 404 || st == 400 || st == 301) && !s.seen.Load() {
			return nil, s.whyMissing(ctx, key, err)
		}
		return nil, s.mapError(op, key, read, err)
	}
	s.seen.Store(true)
	return &driver.Attrs{
		Key:          key,
		Version:      version(out.ETag),
		Size:         aws.ToInt64(out.ContentLength),
		Metadata:     out.Metadata,
		LastModified: aws.ToTime(out.LastModified),
		StoreTime:    dateOf(out.ResultMetadata),
	}, nil
}

// Create writes the object only if nothing exists under key.
func (s *store) Create(ctx context.Context, key string, data []byte, metadata map[string]string) (driver.WriteResult, error) {
	return s.CreateFrom(ctx, key, bodyOf(data), metadata)
}

// CreateFrom is Create with the bytes read from body as they are sent.
func (s *store) CreateFrom(ctx context.Context, key string, body *io.SectionReader, metadata map[string]string) (driver.WriteResult, error) {
	return s.put(ctx, "create", key, body, metadata, func(in *s3sdk.PutObjectInput) { in.IfNoneMatch = aws.String("*") })
}

// bodyOf is data as a body to send.
func bodyOf(data []byte) *io.SectionReader {
	return io.NewSectionReader(bytes.NewReader(data), 0, int64(len(data)))
}

// Replace writes the object only if its current version is ifVersion.
// The Bucket refuses an empty version, which the SDK would drop, turning
// this into an unconditional write.
func (s *store) Replace(ctx context.Context, key string, data []byte, metadata map[string]string, ifVersion string) (driver.WriteResult, error) {
	return s.ReplaceFrom(ctx, key, bodyOf(data), metadata, ifVersion)
}

// ReplaceFrom is Replace with the bytes read from body as they are sent.
func (s *store) ReplaceFrom(ctx context.Context, key string, body *io.SectionReader, metadata map[string]string, ifVersion string) (driver.WriteResult, error) {
	return s.put(ctx, "replace", key, body, metadata, func(in *s3sdk.PutObjectInput) { in.IfMatch = etag(ifVersion) })
}

func (s *store) put(ctx context.Context, op, key string, body *io.SectionReader, metadata map[string]string, cond func(*s3sdk.PutObjectInput)) (driver.WriteResult, error) {
	in := &s3sdk.PutObjectInput{
		Bucket: &s.bucket,
		Key:    &key,
		// A fresh reader from the start: the SDK seeks it to hash the
		// payload and to resend it.
		Body:          driver.Exact(body),
		ContentLength: aws.Int64(body.Size()),
		Metadata:      metadata,
	}
	cond(in)
	out, err := s.client.PutObject(ctx, in, s.with(sendOnce)...)
	if err != nil {
		return driver.WriteResult{}, s.writeError(ctx, op, key, err)
	}
	s.seen.Store(true)
	if aws.ToString(out.ETag) == "" {
		// The write landed but its version is unknown; a re-read finds it.
		return driver.WriteResult{}, driver.Wrap(op, key, driver.ErrUnknownOutcome, errors.New("store returned no ETag"))
	}
	return driver.WriteResult{Version: version(out.ETag), StoreTime: dateOf(out.ResultMetadata)}, nil
}

// Delete removes the object only if its current version is ifVersion. A
// HEAD first finds a missing key (see the package doc for why); whether the
// version matches is left to the store, which answers the conditional DELETE.
func (s *store) Delete(ctx context.Context, key string, ifVersion string) error {
	const op = "delete"
	if ifVersion == "" {
		// As in Replace: an empty If-Match would make the delete unconditional.
		return driver.Wrap(op, key, driver.ErrPrecondition, errors.New("empty version"))
	}
	if _, err := s.client.HeadObject(ctx, &s3sdk.HeadObjectInput{Bucket: &s.bucket, Key: &key}, s.opts...); err != nil {
		if inspect(err).status == 404 && !s.seen.Load() {
			// As in Stat: until the bucket is known to exist, a bare 404
			// may mean no bucket, or no S3 at the endpoint.
			return s.whyMissingFor(ctx, op, precheck, key, err)
		}
		return s.mapError(op, key, precheck, err)
	}
	// The version is not compared here: the store must refuse a stale
	// If-Match itself, or Probe could not find a store that ignores it.
	if ctx.Err() != nil {
		return &driver.Error{Op: op, Key: key, Err: context.Cause(ctx)}
	}
	_, err := s.client.DeleteObject(ctx, &s3sdk.DeleteObjectInput{Bucket: &s.bucket, Key: &key, IfMatch: etag(ifVersion)}, s.with(sendOnce)...)
	if err != nil {
		return s.writeError(ctx, op, key, err)
	}
	return nil
}

// List returns up to pageSize objects under prefix in lexical order; S3
// caps a page at 1000 objects. pageSize <= 0 leaves the size to the store.
func (s *store) List(ctx context.Context, prefix, pageToken string, pageSize int) (driver.ListPage, error) {
	const op = "list"
	in := &s3sdk.ListObjectsV2Input{Bucket: &s.bucket}
	if prefix != "" {
		in.Prefix = &prefix
	}
	if pageToken != "" {
		in.ContinuationToken = &pageToken
	}
	if pageSize > 0 {
		in.MaxKeys = aws.Int32(int32(min(pageSize, 1000)))
	}
	out, err := s.client.ListObjectsV2(ctx, in, s.opts...)
	if err != nil {
		return driver.ListPage{}, s.mapError(op, prefix, read, err)
	}
	if err := s.checkListing(out); err != nil {
		return driver.ListPage{}, driver.Wrap(op, prefix, err, nil)
	}
	s.seen.Store(true)
	now := dateOf(out.ResultMetadata)
	page := driver.ListPage{Objects: make([]driver.Attrs, 0, len(out.Contents))}
	for _, o := range out.Contents {
		page.Objects = append(page.Objects, driver.Attrs{
			Key:          aws.ToString(o.Key),
			Version:      version(o.ETag),
			Size:         aws.ToInt64(o.Size),
			LastModified: aws.ToTime(o.LastModified),
			StoreTime:    now,
		})
	}
	if aws.ToBool(out.IsTruncated) {
		page.NextToken = aws.ToString(out.NextContinuationToken)
	}
	return page, nil
}

// checkListing refuses a listing that no S3 server would send: every S3
// listing says whether it IsTruncated. fake-gcs-server's XML API, given as
// an S3 endpoint, answers with one that does not (and 404 to every read).
func (s *store) checkListing(out *s3sdk.ListObjectsV2Output) error {
	if out.IsTruncated != nil {
		return nil
	}
	return fmt.Errorf("%w: bucket %q: the endpoint answered a listing without IsTruncated, which every S3 listing has", providers.ErrWrongEndpoint, s.bucket)
}

// Properties reports that ETags repeat for identical bytes and that
// Last-Modified has one-second resolution.
func (s *store) Properties() driver.Properties {
	return driver.Properties{
		Name:                 "s3",
		Where:                fmt.Sprintf("bucket %q", s.bucket),
		VersionsRepeat:       true,
		TimestampGranularity: time.Second,
		MaxKeyBytes:          maxKeyBytes,
	}
}

// As sets *target to the underlying client if target is a **s3sdk.Client.
func (s *store) As(target any) bool {
	p, ok := target.(**s3sdk.Client)
	if ok {
		*p = s.client
	}
	return ok
}

// Close does nothing: the client belongs to the caller.
func (s *store) Close() error { return nil }

// version turns an ETag into a version: S3 quotes ETags, some compatible
// stores do not, so the quotes are dropped here and added back in etag.
func version(tag *string) string { return strings.Trim(aws.ToString(tag), `"`) }

func etag(version string) *string { return aws.String(`"` + version + `"`) }

// dateOf returns the Date header of the raw reply, or zero.
func dateOf(md middleware.Metadata) time.Time {
	resp, ok := awsmiddleware.GetRawResponse(md).(*smithyhttp.Response)
	if !ok || resp == nil {
		return time.Time{}
	}
	t, err := http.ParseTime(resp.Header.Get("Date"))
	if err != nil {
		return time.Time{}
	}
	return t
}
