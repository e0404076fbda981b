// Package providers defines the store contract: the few operations the lease
// protocol needs from an object store, and the portable errors every store
// maps its own failures onto.
//
// A store holds objects under string keys. Every write is conditional: create
// only if absent, replace or delete only if the object's version still
// matches. Versions are opaque strings chosen by the store; the protocol only
// compares them for equality.
//
// Callers use *Bucket, the one implementation of Store that does what every
// store needs alike: key checks, refusing an empty version, checking the
// context before anything is sent, naming the operation and key in errors,
// lower-casing metadata keys, bounding reads and counting requests. Below it,
// each provider package (file, mem, s3, gcs, azblob, faulty) implements the small
// Driver interface, and every one passes the same conformance suite in
// providertest.
package providers

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Portable errors. Providers wrap their native errors so that errors.Is
// recognises one of these; the native error stays reachable with errors.As.
var (
	// ErrNotFound: the object does not exist.
	ErrNotFound = errors.New("object not found")
	// ErrPrecondition: a conditional write was refused because the object
	// exists (create) or its version no longer matches (replace, delete), or
	// it does not exist (replace, delete).
	ErrPrecondition = errors.New("precondition failed")
	// ErrConflict: the store refused the write because another write to the
	// same object raced with it (S3 409 ConditionalRequestConflict). The
	// outcome is known (nothing was written); re-read and retry.
	ErrConflict = errors.New("conflicting concurrent write")
	// ErrThrottled: the store asked the client to slow down (HTTP 429, 503
	// SlowDown). Nothing was written.
	ErrThrottled = errors.New("throttled by store")
	// ErrUnknownOutcome: the request may or may not have been applied
	// (timeout, connection reset, lost response). Re-read to find out.
	ErrUnknownOutcome = errors.New("outcome of write unknown")
	// ErrTooLarge: the object is larger than the caller's read bound.
	ErrTooLarge = errors.New("object larger than read bound")
	// ErrInvalidKey: the key, a metadata name or the bucket name is not
	// acceptable to the store. Nothing was sent.
	ErrInvalidKey = errors.New("invalid key")
	// ErrInvalidBucket: the bucket (S3, GCS) or container (Azure) name is
	// not one the store can have: refused by the provider's own check
	// before any request (then with ErrBadURL, from Open), or by the store.
	// It also matches ErrInvalidKey. Nothing was written.
	ErrInvalidBucket error = &refinement{"invalid bucket name", ErrInvalidKey}
	// ErrNoBucket: the bucket (S3, GCS) or container (Azure) does not exist.
	// Nothing was written.
	ErrNoBucket = errors.New("bucket does not exist")
	// ErrPermission: the store refused the credentials (unknown key, wrong
	// secret, expired token) or denied the request. Nothing was written.
	ErrPermission = errors.New("permission denied")
	// ErrNoCredentials: no credentials could be found or obtained for the
	// store (none configured, or the credential chain failed), so no
	// request was sent. It also matches ErrPermission.
	ErrNoCredentials error = &refinement{"no credentials found", ErrPermission}
	// ErrAccessDenied: the store accepted the credentials and denied the
	// request (a policy without the permission). It also matches
	// ErrPermission.
	ErrAccessDenied error = &refinement{"access denied", ErrPermission}
	// ErrUnreachable: no connection to the store could be made (connection
	// refused, DNS failure, TLS handshake failure), so the request was never
	// sent and a write was not applied. A request that was sent and whose
	// reply was lost is ErrUnknownOutcome instead.
	ErrUnreachable = errors.New("store unreachable")
	// ErrWrongEndpoint: something answered at the store's address, but not
	// as the store's API does (a wrong URL path, or a server that is not the
	// store). A write was not applied.
	ErrWrongEndpoint = errors.New("endpoint does not serve the store's API")
)

// refinement is a sentinel that also matches a broader one.
type refinement struct {
	msg   string
	broad error
}

func (e *refinement) Error() string { return e.msg }
func (e *refinement) Unwrap() error { return e.broad }

// Error names the operation and the object a portable error is about.
type Error struct {
	Op  string // "get", "stat", "create", "replace", "delete", "list"
	Key string
	Err error // wraps one of the sentinels above and, where there is one, the native error
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

// Object is an object's attributes and bytes.
type Object struct {
	Attrs
	Data []byte
}

// WriteResult is what a successful conditional write reports.
type WriteResult struct {
	Version      string
	LastModified time.Time // zero if the store did not report it
	StoreTime    time.Time // zero if unknown
}

// ListPage is one page of a listing, in lexical key order.
type ListPage struct {
	Objects   []Attrs // Metadata may be nil: listing need not fetch it
	NextToken string  // empty when this is the last page
}

// Properties are declared facts about a store that the protocol must respect.
type Properties struct {
	// Name is a short name for messages ("s3", "gcs", "file", ...).
	Name string
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

// Store is the contract. Implementations must be safe for concurrent use.
//
// Keys are slash-separated paths without a leading slash. Every method
// returns errors that match the sentinels above with errors.Is.
type Store interface {
	// Get reads an object. If it is larger than maxBytes it returns
	// ErrTooLarge without reading it whole (maxBytes <= 0: no bound).
	Get(ctx context.Context, key string, maxBytes int64) (*Object, error)
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
	// List returns up to pageSize objects whose keys start with prefix, after
	// the position named by pageToken ("" for the first page).
	List(ctx context.Context, prefix, pageToken string, pageSize int) (ListPage, error)
	// Properties reports the store's declared properties.
	Properties() Properties
	// As reaches the underlying client: it sets *target (a pointer to the
	// client's type) and reports whether it could.
	As(target any) bool
	// Close releases resources held by the store.
	Close() error
}
