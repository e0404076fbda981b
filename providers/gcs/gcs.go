// Package gcs keeps objects in a Google Cloud Storage bucket.
//
// # Construction
//
// Wrap a client you built yourself, so that you control credentials,
// transport and retries:
//
//	client, err := storage.NewClient(ctx)
//	...
//	s := gcs.New(client, "my-bucket")
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
// metadata server on Google Cloud. A store from the opener reads through the
// JSON API (storage.WithJSONReads) and closes its client on Close; a store
// from New leaves the client to its owner.
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
// Attrs.LastModified is the object's "updated" time (millisecond resolution).
// StoreTime is the HTTP Date of the response; the SDK does not expose
// response headers, so it is filled only when the client's transport is
// wrapped with DateTransport. The opener does this; for a client passed to New,
// StoreTime stays zero unless you wrap its transport yourself.
//
// Get reads the object's attributes and then the bytes of exactly that
// generation, two requests, because the SDK's reader does not return custom
// metadata. If the object is replaced between the two, Get starts again (up
// to ten times).
//
// # Store answers and portable errors
//
//	412 conditionNotMet                        ErrPrecondition
//	409 conflict (concurrent change)           ErrConflict
//	429 rateLimitExceeded (>1 write/s/object)  ErrThrottled
//	404 bucket does not exist                  ErrInvalidKey, naming the bucket
//	404 on Create or List                      ErrInvalidKey, naming the bucket
//	404 on Replace or Delete                   ErrPrecondition
//	404 on Get or Stat                         ErrNotFound
//	400 (object name refused)                  ErrInvalidKey
//	5xx, transport error, timeout on a write   ErrUnknownOutcome
//	anything else (403, a read's 5xx or        *providers.Error without a sentinel
//	transport error after the SDK's retries)
//
// Names GCS refuses (empty, over 1024 bytes, not UTF-8, with CR or LF, "."
// and "..") fail with ErrInvalidKey before any request, so the emulator, which
// accepts some of them, answers alike.
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
package gcs

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"cloud.google.com/go/storage"
	"google.golang.org/api/iterator"

	"github.com/objlease/objlease/providers"
)

// Store is a providers.Store backed by one GCS bucket. It is safe for
// concurrent use.
type Store struct {
	client *storage.Client
	bucket *storage.BucketHandle
	name   string // bucket name, for messages
	owned  bool   // the opener built client; Close closes it
}

var _ providers.Store = (*Store)(nil)

// New returns a store for bucket that uses client. The caller keeps
// ownership of client: Close does not close it.
func New(client *storage.Client, bucket string) *Store {
	return &Store{client: client, bucket: client.Bucket(bucket), name: bucket}
}

// Largest page a GCS listing returns.
const maxPageSize = 1000

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Properties reports GCS's declared properties.
func (s *Store) Properties() providers.Properties {
	return providers.Properties{
		Name:                 "gcs",
		VersionsRepeat:       false,
		TimestampGranularity: time.Millisecond,
		// GCS throttles mutations of one object above about one per second.
		MinWriteInterval: time.Second,
	}
}

// As sets target, a **storage.Client or **storage.BucketHandle, to the
// store's client or bucket handle.
func (s *Store) As(target any) bool {
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
func (s *Store) Close() error {
	if s.owned {
		return s.client.Close()
	}
	return nil
}

// Stat reads the attributes and metadata of key.
func (s *Store) Stat(ctx context.Context, key string) (*providers.Attrs, error) {
	if err := checkKey(key); err != nil {
		return nil, providers.Wrap("stat", key, providers.ErrInvalidKey, err)
	}
	ctx, slot := withDateSlot(ctx)
	oa, err := s.bucket.Object(key).Attrs(ctx)
	if err != nil {
		return nil, s.mapErr("stat", key, err)
	}
	a := attrs(oa)
	a.StoreTime = slot.get()
	return &a, nil
}

// Get reads key, refusing with ErrTooLarge an object over maxBytes.
func (s *Store) Get(ctx context.Context, key string, maxBytes int64) (*providers.Object, error) {
	if err := checkKey(key); err != nil {
		return nil, providers.Wrap("get", key, providers.ErrInvalidKey, err)
	}
	ctx, slot := withDateSlot(ctx)
	const attempts = 10
	for i := 1; ; i++ {
		oa, err := s.bucket.Object(key).Attrs(ctx)
		if err != nil {
			return nil, s.mapErr("get", key, err)
		}
		a := attrs(oa)
		a.StoreTime = slot.get()
		if maxBytes > 0 && oa.Size > maxBytes {
			return nil, providers.Wrap("get", key, providers.ErrTooLarge,
				fmt.Errorf("object has %d bytes, bound is %d", oa.Size, maxBytes))
		}
		data, err := s.read(ctx, key, oa.Generation, oa.Size)
		if errors.Is(err, storage.ErrObjectNotExist) && i < attempts {
			continue // replaced or deleted since the attributes were read
		}
		if err != nil {
			return nil, s.mapErr("get", key, err)
		}
		return &providers.Object{Attrs: a, Data: data}, nil
	}
}

// read returns the bytes of one generation of key, which has size bytes.
func (s *Store) read(ctx context.Context, key string, gen, size int64) ([]byte, error) {
	r, err := s.bucket.Object(key).Generation(gen).NewReader(ctx)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	data, err := io.ReadAll(io.LimitReader(r, size+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) != size {
		return nil, fmt.Errorf("generation %d has %d bytes, attributes said %d", gen, len(data), size)
	}
	return data, nil
}

// Create writes key only if no object exists under it.
func (s *Store) Create(ctx context.Context, key string, data []byte, metadata map[string]string) (providers.WriteResult, error) {
	return s.write(ctx, "create", key, data, metadata, storage.Conditions{DoesNotExist: true})
}

// Replace writes key only if its current generation is ifVersion.
func (s *Store) Replace(ctx context.Context, key string, data []byte, metadata map[string]string, ifVersion string) (providers.WriteResult, error) {
	gen, err := parseVersion(ifVersion)
	if err != nil {
		return providers.WriteResult{}, providers.Wrap("replace", key, providers.ErrPrecondition, err)
	}
	return s.write(ctx, "replace", key, data, metadata, storage.Conditions{GenerationMatch: gen})
}

func (s *Store) write(ctx context.Context, op, key string, data []byte, metadata map[string]string, cond storage.Conditions) (providers.WriteResult, error) {
	if err := checkKey(key); err != nil {
		return providers.WriteResult{}, providers.Wrap(op, key, providers.ErrInvalidKey, err)
	}
	ctx, slot := withDateSlot(ctx)
	w := s.bucket.Object(key).If(cond).Retryer(storage.WithPolicy(storage.RetryNever)).NewWriter(ctx)
	w.ChunkSize = 0 // one request, nothing buffered for a resend
	w.ContentType = "application/octet-stream"
	w.Metadata = metadata
	// The store checks the bytes and refuses a mismatch, so a corrupted
	// upload is never stored.
	w.CRC32C = crc32.Checksum(data, castagnoli)
	w.SendCRC32C = true
	_, err := w.Write(data)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return providers.WriteResult{}, s.mapErr(op, key, err)
	}
	oa := w.Attrs()
	return providers.WriteResult{
		Version:      strconv.FormatInt(oa.Generation, 10),
		LastModified: oa.Updated,
		StoreTime:    slot.get(),
	}, nil
}

// Delete removes key only if its current generation is ifVersion.
func (s *Store) Delete(ctx context.Context, key string, ifVersion string) error {
	if err := checkKey(key); err != nil {
		return providers.Wrap("delete", key, providers.ErrInvalidKey, err)
	}
	gen, err := parseVersion(ifVersion)
	if err != nil {
		return providers.Wrap("delete", key, providers.ErrPrecondition, err)
	}
	// Naming the generation makes fake-gcs-server honour the precondition
	// (it ignores it on a plain delete); GenerationMatch keeps GCS from
	// deleting a non-current generation in a versioned bucket.
	err = s.bucket.Object(key).Generation(gen).If(storage.Conditions{GenerationMatch: gen}).
		Retryer(storage.WithPolicy(storage.RetryNever)).Delete(ctx)
	if err != nil {
		return s.mapErr("delete", key, err)
	}
	return nil
}

// List returns up to pageSize objects under prefix (GCS's page limit, 1000,
// when pageSize <= 0 or larger), in lexical order. Metadata is not fetched.
func (s *Store) List(ctx context.Context, prefix, pageToken string, pageSize int) (providers.ListPage, error) {
	if pageSize <= 0 || pageSize > maxPageSize {
		pageSize = maxPageSize
	}
	q := &storage.Query{Prefix: prefix}
	if err := q.SetAttrSelection([]string{"Name", "Generation", "Size", "Updated"}); err != nil {
		return providers.ListPage{}, &providers.Error{Op: "list", Key: prefix, Err: err}
	}
	var objs []*storage.ObjectAttrs
	next, err := iterator.NewPager(s.bucket.Objects(ctx, q), pageSize, pageToken).NextPage(&objs)
	if err != nil {
		return providers.ListPage{}, s.mapErr("list", prefix, err)
	}
	page := providers.ListPage{Objects: make([]providers.Attrs, 0, len(objs)), NextToken: next}
	for _, oa := range objs {
		page.Objects = append(page.Objects, attrs(oa))
	}
	return page, nil
}

func attrs(oa *storage.ObjectAttrs) providers.Attrs {
	a := providers.Attrs{
		Key:          oa.Name,
		Version:      strconv.FormatInt(oa.Generation, 10),
		Size:         oa.Size,
		LastModified: oa.Updated,
	}
	if oa.Metadata != nil {
		// GCS keeps the case it was given; hand keys back lower-cased as
		// the contract promises.
		a.Metadata = make(map[string]string, len(oa.Metadata))
		for k, v := range oa.Metadata {
			a.Metadata[strings.ToLower(k)] = v
		}
	}
	return a
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

// checkKey refuses names GCS refuses, so that every store answers the same
// (fake-gcs-server accepts some of them).
func checkKey(key string) error {
	switch {
	case key == "":
		return errors.New("empty object name")
	case len(key) > 1024:
		return fmt.Errorf("object name is %d bytes, GCS allows 1024", len(key))
	case !utf8.ValidString(key):
		return errors.New("object name is not valid UTF-8")
	case strings.ContainsAny(key, "\r\n"):
		return errors.New("object name contains a carriage return or line feed")
	case key == "." || key == "..":
		return errors.New(`object name is "." or ".."`)
	}
	return nil
}
