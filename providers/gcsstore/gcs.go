// Package gcsstore keeps objects in a Google Cloud Storage bucket.
//
// # Construction
//
// Wrap a client you built yourself, so that you control credentials,
// transport and retries:
//
//	client, err := storage.NewClient(ctx)
//	...
//	s := gcsstore.New(client, "my-bucket") // a *providers.Bucket
//
// or open a store by URL (importing this package registers the "gs" scheme):
//
//	s, key, err := providers.Open(ctx, "gs://my-bucket/leases/job")
//
// The URL form is gs://BUCKET/KEY; the key part is percent-decoded. Write a
// '#' or '?' in a key as %23 or %3F. Query parameters:
//
//	endpoint=URL   the JSON API endpoint, e.g. http://127.0.0.1:4443/storage/v1/
//	               for fake-gcs-server; requests are then sent without
//	               credentials.
//
// Environment: STORAGE_EMULATOR_HOST=host:port (the SDK's own convention)
// also points the store at an emulator without credentials. Otherwise the
// opener uses Application Default Credentials: GOOGLE_APPLICATION_CREDENTIALS,
// the file written by "gcloud auth application-default login", or the
// metadata server on Google Cloud. An endpoint without a path (as
// http://127.0.0.1:4443) means the JSON API root below it (/storage/v1/).
// A store from the opener reads objects through the XML API (the SDK's
// default) from GCS, and through the JSON API from an emulator
// (STORAGE_EMULATOR_HOST, or an http:// endpoint: fake-gcs-server serves XML
// reads only with -public-host, and sends metadata either way), bounds a
// read to three attempts (the SDK's default
// retries until the context ends, which against a store that is down is
// for ever), and closes its client on Close; a store from New leaves the
// client, and its retry policy, to its owner.
//
// # Retries
//
// Conditional writes (Create, Replace, Delete) are sent exactly once: the SDK
// treats requests with generation preconditions as idempotent and would
// resend one whose response was lost, and the resend is then refused with
// 412, reporting a write that succeeded as a failed precondition. This store
// disables the SDK's retries for those writes and reports a lost response as
// ErrUnknownOutcome; the caller re-reads to learn the outcome (the lease
// protocol recognises its own nonce). Reads and listings keep the client's
// retry policy.
//
// # Versions and times
//
// Version is the object's generation as a decimal string. A generation never
// repeats for an object name, not even for identical bytes or after a delete
// and re-create, but it is no counter: generations are large and not
// consecutive, so they are versions, not fencing tokens.
//
// Attrs.LastModified is the object's "updated" time: millisecond resolution
// from Stat, List and writes, but the Last-Modified header (one second) from
// Get, hence TimestampGranularity of one second. StoreTime is the HTTP Date
// of the response; the SDK does not expose response headers, so it is filled
// only when the client's transport is wrapped with DateTransport. The opener
// does this; for a client passed to New, StoreTime stays zero unless you wrap
// its transport yourself. DateTransport also keeps the start of error
// replies, which the SDK drops on reads, to tell a missing bucket and a
// wrong endpoint from a missing object.
//
// Get is one request: the reader's reply carries the bytes, the generation
// and, through the XML API, the custom metadata. The JSON API sends no
// custom metadata with an object's bytes, so with a client made
// storage.WithJSONReads Get's Metadata is empty on GCS (fake-gcs-server
// sends it either way); use Stat for metadata there.
//
// # Store answers and portable errors
//
//	412 conditionNotMet                        ErrPrecondition
//	409 conflict (concurrent change)           ErrConflict
//	429 rateLimitExceeded (>1 write/s/object),
//	410 Gone for the same limit (GCS, at times) ErrThrottled
//	401, 403 (credentials, IAM)                ErrPermission, naming the bucket
//	404 whose body is no API error (an HTML
//	or "404 page not found" page)              ErrWrongEndpoint
//	404 bucket does not exist                  ErrNoBucket, naming the bucket
//	404 on Create or List                      ErrNoBucket, naming the bucket
//	other 404, bucket not yet seen: the bucket
//	is looked up once (fake-gcs-server says
//	only "Not Found" for bucket and object)    ErrNoBucket if it is missing
//	404 on Replace or Delete                   ErrPrecondition
//	404 on Get or Stat                         ErrNotFound
//	400 "Invalid bucket name"                  ErrInvalidBucket (also
//	                                           ErrInvalidKey), naming the bucket
//	400 (object name refused)                  ErrInvalidKey
//	no connection (refused, DNS, TLS): nothing
//	was sent                                   ErrUnreachable
//	5xx, transport error, timeout on a write   ErrUnknownOutcome
//	anything else (a read's 5xx or transport   *providers.Error without a sentinel
//	error after the SDK's retries)
//
// Names GCS refuses (empty, over 1024 bytes, not UTF-8, with CR or LF, "."
// and "..") fail with ErrInvalidKey before any request, so the emulator, which
// accepts some of them, answers alike: the Bucket applies the portable rules
// and the 1024-byte limit, CheckKey the rest.
//
// Every error is a *providers.Error naming the operation and key; the SDK's
// error (usually a *googleapi.Error) stays reachable with errors.As.
//
// Metadata keys come back lower-cased: GCS keeps the case it was given.
//
// # Emulator differences
//
// fake-gcs-server honours DoesNotExist and GenerationMatch on writes, but
// ignores preconditions on a DELETE that names no generation, on metadata
// PATCH and on reads. Delete therefore names the generation and also requires
// it to match (obj.Generation(g).If(GenerationMatch: g)): a stale delete is
// answered 404 for the missing generation (mapped to ErrPrecondition) on
// both. In a bucket with object versioning a stale generation still exists
// as a non-current one; there a stale delete is refused only because GCS
// checks GenerationMatch against the live generation, as documented, which
// only a real versioned bucket can show. The emulator also never answers 409
// or 429, and says only "Not Found" for a missing bucket.
package gcsstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"
	"sync/atomic"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/iterator"

	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/driver"
)

// store is the driver.Driver for one GCS bucket; New puts it under a
// *providers.Bucket. It is safe for concurrent use.
type store struct {
	client *storage.Client
	bucket *storage.BucketHandle
	name   string // bucket name, for messages
	owned  bool   // the opener built client; Close closes it
	// seen: a reply has shown that the bucket exists, so a 404 is about
	// the object.
	seen atomic.Bool
}

var _ driver.Driver = (*store)(nil)

// New returns the store for bucket that uses client. The caller keeps
// ownership of client: Close does not close it.
func New(client *storage.Client, bucket string) *providers.Bucket {
	return providers.NewBucket(NewDriver(client, bucket)).WithRequestTimeout(providers.DefaultRequestTimeout)
}

// NewDriver returns the driver New wraps, for a caller that puts its own
// layer (such as package faulty) between it and providers.NewBucket.
func NewDriver(client *storage.Client, bucket string) driver.Driver {
	return newStore(client, bucket)
}

func newStore(client *storage.Client, bucket string) *store {
	return &store{client: client, bucket: client.Bucket(bucket), name: bucket}
}

// Largest page a GCS listing returns.
const maxPageSize = 1000

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Properties reports GCS's declared properties.
func (s *store) Properties() driver.Properties {
	return driver.Properties{
		Name:           "gcs",
		Where:          fmt.Sprintf("bucket %q", s.name),
		VersionsRepeat: false,
		// Get's LastModified is the Last-Modified header.
		TimestampGranularity: time.Second,
		// GCS throttles mutations of one object above about one per second.
		MinWriteInterval: time.Second,
		MaxKeyBytes:      1024,
	}
}

// CheckKey refuses the names GCS refuses beyond the portable rules.
func (s *store) CheckKey(key string) error {
	if key == "." || key == ".." {
		return errors.New(`object name is "." or ".."`)
	}
	return nil
}

// As sets target, a **storage.Client or **storage.BucketHandle, to the
// store's client or bucket handle.
func (s *store) As(target any) bool {
	switch t := target.(type) {
	case **storage.Client:
		*t = s.client
	case **storage.BucketHandle:
		*t = s.bucket
	default:
		return false
	}
	return true
}

// Close closes the client if the store opened it from a URL.
func (s *store) Close() error {
	if s.owned {
		return s.client.Close()
	}
	return nil
}

// Stat reads the attributes and metadata of key.
func (s *store) Stat(ctx context.Context, key string) (*driver.Attrs, error) {
	ctx, slot := withReplySlot(ctx)
	oa, err := s.bucket.Object(key).Attrs(ctx)
	if err != nil {
		return nil, s.mapErr(ctx, slot, "stat", key, err)
	}
	s.seen.Store(true)
	a := attrs(oa)
	a.StoreTime = slot.date()
	return &a, nil
}

// Read reads key in one request: the reply carries the bytes, the
// generation and (XML API) the metadata.
func (s *store) Read(ctx context.Context, key string, _ int64) (*driver.Reader, error) {
	ctx, slot := withReplySlot(ctx)
	r, err := s.bucket.Object(key).NewReader(ctx)
	if err != nil {
		return nil, s.mapErr(ctx, slot, "get", key, err)
	}
	s.seen.Store(true)
	return &driver.Reader{
		Attrs: driver.Attrs{
			Key:          key,
			Version:      strconv.FormatInt(r.Attrs.Generation, 10),
			Size:         r.Attrs.Size,
			Metadata:     r.Metadata(),
			LastModified: r.Attrs.LastModified,
			StoreTime:    slot.date(),
		},
		Body: r,
	}, nil
}

// Create writes key only if no object exists under it.
func (s *store) Create(ctx context.Context, key string, data []byte, metadata map[string]string) (driver.WriteResult, error) {
	return s.CreateFrom(ctx, key, bodyOf(data), metadata)
}

// CreateFrom implements driver.StreamWriter.
func (s *store) CreateFrom(ctx context.Context, key string, body *io.SectionReader, metadata map[string]string) (driver.WriteResult, error) {
	return s.write(ctx, "create", key, body, metadata, storage.Conditions{DoesNotExist: true})
}

// Replace writes key only if its current generation is ifVersion.
func (s *store) Replace(ctx context.Context, key string, data []byte, metadata map[string]string, ifVersion string) (driver.WriteResult, error) {
	return s.ReplaceFrom(ctx, key, bodyOf(data), metadata, ifVersion)
}

// ReplaceFrom implements driver.StreamWriter.
func (s *store) ReplaceFrom(ctx context.Context, key string, body *io.SectionReader, metadata map[string]string, ifVersion string) (driver.WriteResult, error) {
	gen, err := parseVersion(ifVersion)
	if err != nil {
		return driver.WriteResult{}, fmt.Errorf("%w: %w", driver.ErrPrecondition, err)
	}
	return s.write(ctx, "replace", key, body, metadata, storage.Conditions{GenerationMatch: gen})
}

// bodyReader remembers the error of reading the body, which is not the
// store's.
type bodyReader struct {
	r   io.Reader
	err error
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		b.err = err
	}
	return n, err
}

// bodyOf is data as a body to send.
func bodyOf(data []byte) *io.SectionReader {
	return io.NewSectionReader(bytes.NewReader(data), 0, int64(len(data)))
}

func (s *store) write(ctx context.Context, op, key string, body *io.SectionReader, metadata map[string]string, cond storage.Conditions) (driver.WriteResult, error) {
	// The checksum first, in a pass of its own, so that the body streams
	// through once it is sent.
	sum := crc32.New(castagnoli)
	if _, err := io.Copy(sum, io.NewSectionReader(body, 0, body.Size())); err != nil {
		return driver.WriteResult{}, &driver.Error{Op: op, Key: key, Err: err}
	}
	ctx, slot := withReplySlot(ctx)
	wctx, abort := context.WithCancel(ctx)
	defer abort()
	w := s.bucket.Object(key).If(cond).Retryer(storage.WithPolicy(storage.RetryNever)).NewWriter(wctx)
	w.ChunkSize = 0 // one request, nothing buffered for a resend
	w.ContentType = "application/octet-stream"
	w.Metadata = metadata
	// The store checks the bytes and refuses a mismatch, so a corrupted
	// upload is never stored.
	w.CRC32C = sum.Sum32()
	w.SendCRC32C = true
	src := &bodyReader{r: driver.Exact(body)}
	_, err := io.Copy(w, src)
	if src.err != nil {
		// Closing would finish the upload: abort it, nothing is stored.
		abort()
		w.Close()
		return driver.WriteResult{}, &driver.Error{Op: op, Key: key, Err: fmt.Errorf("reading the body to send: %w", src.err)}
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return driver.WriteResult{}, s.mapErr(ctx, slot, op, key, err)
	}
	s.seen.Store(true)
	oa := w.Attrs()
	return driver.WriteResult{
		Version:      strconv.FormatInt(oa.Generation, 10),
		LastModified: oa.Updated,
		StoreTime:    slot.date(),
	}, nil
}

// Delete removes key only if its current generation is ifVersion.
func (s *store) Delete(ctx context.Context, key string, ifVersion string) error {
	gen, err := parseVersion(ifVersion)
	if err != nil {
		return fmt.Errorf("%w: %w", driver.ErrPrecondition, err)
	}
	ctx, slot := withReplySlot(ctx)
	// Naming the generation makes fake-gcs-server honour the precondition
	// (it ignores it on a plain delete); GenerationMatch keeps GCS from
	// deleting a non-current generation in a versioned bucket.
	err = s.bucket.Object(key).Generation(gen).If(storage.Conditions{GenerationMatch: gen}).
		Retryer(storage.WithPolicy(storage.RetryNever)).Delete(ctx)
	if err != nil {
		return s.mapErr(ctx, slot, "delete", key, err)
	}
	s.seen.Store(true)
	return nil
}

// List returns up to pageSize objects under prefix (GCS's page limit, 1000,
// when pageSize <= 0 or larger), in lexical order. Metadata is not fetched.
func (s *store) List(ctx context.Context, prefix, pageToken string, pageSize int) (driver.ListPage, error) {
	if pageSize <= 0 || pageSize > maxPageSize {
		pageSize = maxPageSize
	}
	q := &storage.Query{Prefix: prefix}
	if err := q.SetAttrSelection([]string{"Name", "Generation", "Size", "Updated"}); err != nil {
		return driver.ListPage{}, err
	}
	ctx, slot := withReplySlot(ctx)
	var objs []*storage.ObjectAttrs
	next, err := iterator.NewPager(s.bucket.Objects(ctx, q), pageSize, pageToken).NextPage(&objs)
	if err != nil {
		return driver.ListPage{}, s.mapErr(ctx, slot, "list", prefix, err)
	}
	s.seen.Store(true)
	page := driver.ListPage{Objects: make([]driver.Attrs, 0, len(objs)), NextToken: next}
	for _, oa := range objs {
		page.Objects = append(page.Objects, attrs(oa))
	}
	return page, nil
}

func attrs(oa *storage.ObjectAttrs) driver.Attrs {
	return driver.Attrs{
		Key:          oa.Name,
		Version:      strconv.FormatInt(oa.Generation, 10),
		Size:         oa.Size,
		LastModified: oa.Updated,
		Metadata:     oa.Metadata, // the Bucket lower-cases the keys
	}
}

// parseVersion turns a version back into a generation. A version this store
// never produced matches no object, hence ErrPrecondition for the caller;
// zero must never get through, as GenerationMatch: 0 means "no condition".
func parseVersion(v string) (int64, error) {
	gen, err := strconv.ParseInt(v, 10, 64)
	if err != nil || gen <= 0 {
		return 0, fmt.Errorf("version %q is not a GCS generation", v)
	}
	return gen, nil
}
