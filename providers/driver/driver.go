// Package driver is what an objlease store provider implements: the small
// Driver interface, the portable errors a driver returns, and the few
// helpers only drivers need. Programs do not use it: they hold a
// *providers.Bucket, which each provider's constructor returns and which
// does over any Driver the work every store needs alike (key checks,
// refusing an empty version, checking the context, naming the operation
// and key in errors, bounding reads, counting requests).
//
// # Writing a driver
//
// A provider package keeps its driver type unexported and exports
// constructors: one returning the portable type,
//
//	func New(client *sdk.Client, bucket string) *providers.Bucket {
//		return providers.NewBucket(NewDriver(client, bucket))
//	}
//
// and one returning the bare Driver (NewDriver), for middleware such as
// package faulty that wraps a Driver and is wrapped in turn by
// providers.NewBucket, so that every check and metric runs once per
// request. To be reachable by URL it registers an opener in init:
//
//	func init() {
//		if err := providers.Register("myscheme", open); err != nil {
//			panic(err)
//		}
//	}
//
// where open reads the URL and providers.OpenOptions (an HTTP store wraps
// its transport with OpenOptions.Transport when it is set). Next to it,
// providers.RegisterHints gives the scheme its providers.Hints: what the
// store calls a bucket and which settings carry its endpoint and its
// credentials, which the objlease command prints when the store is not
// set up.
//
// The driver's methods are called only after the shared checks passed
// (see Driver). Each maps its store's answers onto the sentinels of this
// package in one function, keeping the native error reachable with
// errors.As; Native keeps long SDK messages to one line and ConnectFailed
// recognises a request that was never sent. A driver whose store refuses
// keys the portable rules accept implements KeyChecker. Properties declares
// what the protocol must respect (repeating versions, timestamp
// granularity, write rate, key length).
//
// Every driver must pass providertest.Run over providers.NewBucket(d):
// missing objects and buckets, each conditional write and its refusals,
// listing order and paging, metadata, As.
package driver

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// Driver is what a provider implements; providers.NewBucket turns it into
// the portable *providers.Bucket. The Bucket has already done the shared
// work when a Driver method is called: the key passed the portable checks
// (and the driver's own, see KeyChecker), the context was not done, a
// version is not empty and metadata names are portable. A Driver must be
// safe for concurrent use.
//
// Errors match the sentinels of this package with errors.Is where one
// applies, and keep the native error reachable with errors.As. They need
// not name the operation or key: the Bucket wraps them in an *Error (an
// *Error a driver returns is passed on unchanged).
type Driver interface {
	// Read starts reading an object. maxBytes is the caller's bound (<= 0:
	// none); the Bucket enforces it, a driver may use it as a hint.
	Read(ctx context.Context, key string, maxBytes int64) (*Reader, error)
	Common
}

// Common is what a Driver and a providers.Store have alike: every method
// but the one that reads an object's bytes (a Driver's Read, a Store's
// Get).
type Common interface {
	// Stat reads an object's attributes and metadata, not its bytes.
	Stat(ctx context.Context, key string) (*Attrs, error)
	// Create writes the object only if no object exists under key;
	// otherwise ErrPrecondition.
	Create(ctx context.Context, key string, data []byte, metadata map[string]string) (WriteResult, error)
	// Replace writes the object only if its current version is ifVersion;
	// otherwise (including when it is absent) ErrPrecondition.
	Replace(ctx context.Context, key string, data []byte, metadata map[string]string, ifVersion string) (WriteResult, error)
	// Delete removes the object only if its current version is ifVersion;
	// otherwise (including when it is absent) ErrPrecondition.
	Delete(ctx context.Context, key string, ifVersion string) error
	// List returns up to pageSize objects whose keys start with prefix,
	// after the position named by pageToken ("" for the first page), in
	// the store's order (lexical on most stores, not on S3 Express).
	List(ctx context.Context, prefix, pageToken string, pageSize int) (ListPage, error)
	// Properties reports the store's declared properties.
	Properties() Properties
	// As sets *target to a native type the store holds (for a Store, a
	// pointer to its client's type) and reports whether it could.
	As(target any) bool
	// Close releases what the driver or store owns.
	Close() error
}

// StreamWriter is implemented by a Driver that can write an object from a
// body it reads while it sends (CreateFrom and ReplaceFrom, otherwise as
// Create and Replace), so that the object's bytes are never all in
// memory. A retried request reads the body again from its start.
type StreamWriter interface {
	CreateFrom(ctx context.Context, key string, body *io.SectionReader, metadata map[string]string) (WriteResult, error)
	ReplaceFrom(ctx context.Context, key string, body *io.SectionReader, metadata map[string]string, ifVersion string) (WriteResult, error)
}

// Exact is body, read from its start, failing with io.ErrUnexpectedEOF if
// it ends before its size (a file cut short while it was sent), so that a
// write sends all of it or fails, never a shorter object: a store may keep
// a body shorter than its declared length.
func Exact(body *io.SectionReader) io.ReadSeeker {
	return &exact{io.NewSectionReader(body, 0, body.Size())}
}

type exact struct{ *io.SectionReader }

func (e *exact) Read(p []byte) (int, error) {
	n, err := e.SectionReader.Read(p)
	if err == io.EOF {
		if at, _ := e.Seek(0, io.SeekCurrent); at < e.Size() {
			err = io.ErrUnexpectedEOF
		}
	}
	return n, err
}

// KeyChecker is implemented by drivers whose store refuses, or would store
// under another name, keys that pass the portable checks. CheckKey says
// why key is refused, or returns nil. Middleware that wraps a Driver
// passes it on.
type KeyChecker interface {
	CheckKey(key string) error
}

// Reader is an object being read: its attributes and its bytes.
type Reader struct {
	// Attrs.Size is the length the store declared, or -1 if it did not.
	Attrs
	Body io.ReadCloser
}

// NewBytesReader returns a Reader over data already in memory.
func NewBytesReader(a Attrs, data []byte) *Reader {
	a.Size = int64(len(data))
	return &Reader{Attrs: a, Body: io.NopCloser(bytes.NewReader(data))}
}

// Attrs describes one version of an object without its bytes.
type Attrs struct {
	Key     string
	Version string // opaque; changes on every successful write (see Properties.VersionsRepeat)
	Size    int64
	// Metadata round-trips what was written. Keys are lower-case ASCII
	// (letters, digits, '-'); stores that canonicalise case hand them back
	// lower-cased.
	Metadata map[string]string
	// LastModified is the store's own timestamp of the write that produced
	// Version, at the store's granularity; zero if the store does not report it.
	LastModified time.Time
	// StoreTime is the store's clock when it answered (the HTTP Date header);
	// zero if unknown.
	StoreTime time.Time
}

// WriteResult is what a successful conditional write reports.
type WriteResult struct {
	Version      string
	LastModified time.Time // zero if the store did not report it
	StoreTime    time.Time // zero if unknown
}

// ListPage is one page of a listing. Most stores list in lexical key order;
// some (S3 Express One Zone directory buckets) do not, so callers must not
// rely on the order: sort what a user sees, and never take the first key
// listed for the smallest.
type ListPage struct {
	Objects   []Attrs // Metadata may be nil: listing need not fetch it
	NextToken string  // empty when this is the last page
}

// Properties are declared facts about a store that the protocol must respect.
type Properties struct {
	// Name is a short name for messages ("s3", "gcs", "file", ...).
	Name string
	// Where names the bucket or container in messages that no answer
	// from the store can name (a request timeout): `bucket "b"`.
	Where string
	// VersionsRepeat: writing identical bytes again may yield a version equal
	// to an earlier one (S3 ETags are the MD5 of the body). The lease record
	// embeds a unique nonce so its versions never repeat; user objects are not
	// so protected.
	VersionsRepeat bool
	// TimestampGranularity is the resolution of Attrs.LastModified.
	TimestampGranularity time.Duration
	// MinWriteInterval is the smallest sustained interval between writes to one
	// object the store accepts without throttling (about 1 s on GCS).
	MinWriteInterval time.Duration
	// MaxKeyBytes is the longest key, in bytes, the store accepts; 0 means
	// no limit of its own.
	MaxKeyBytes int
}

// ConnectFailed reports whether err says that no connection to the store
// could be made, so that the request was never sent: DNS failure, connection
// refused, no route, a failed TLS handshake. Drivers map it to
// ErrUnreachable. An error after the connection was made (reset, timeout
// while waiting for the reply) is not one of these.
func ConnectFailed(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	var verify *tls.CertificateVerificationError
	var record tls.RecordHeaderError
	var alert tls.AlertError
	var unknownCA x509.UnknownAuthorityError
	var host x509.HostnameError
	var invalid x509.CertificateInvalidError
	return errors.As(err, &dns) || errors.As(err, &verify) || errors.As(err, &record) ||
		errors.As(err, &alert) || errors.As(err, &unknownCA) || errors.As(err, &host) ||
		errors.As(err, &invalid)
}

// Native returns an error whose message is summary (one line, e.g.
// "403 SignatureDoesNotMatch") and that unwraps to native, so that
// errors.As still reaches the SDK's error while messages stay short: some
// SDK errors span many lines and carry the whole reply body.
func Native(summary string, native error) error { return &nativeError{summary, native} }

type nativeError struct {
	summary string
	err     error
}

func (e *nativeError) Error() string { return e.summary }
func (e *nativeError) Unwrap() error { return e.err }

// Error names the operation and the object a portable error is about.
type Error struct {
	Op  string // "get", "stat", "create", "replace", "delete", "list"
	Key string
	Err error // wraps one of the sentinels and, where there is one, the native error
}

func (e *Error) Error() string { return fmt.Sprintf("%s %q: %v", e.Op, e.Key, e.Err) }
func (e *Error) Unwrap() error { return e.Err }

// Wrap returns an *Error for op on key that matches sentinel with errors.Is
// and keeps native reachable with errors.As. native may be nil.
func Wrap(op, key string, sentinel, native error) error {
	if native == nil {
		return &Error{Op: op, Key: key, Err: sentinel}
	}
	return &Error{Op: op, Key: key, Err: fmt.Errorf("%w: %w", sentinel, native)}
}
