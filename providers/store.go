// Package providers is the portable face of objlease's object stores: the
// Bucket every provider returns, the Store interface the lease code
// consumes, the errors every store's failures map onto, and Open, which
// opens a store by URL.
//
// A store holds objects under string keys. Every write is conditional: create
// only if absent, replace or delete only if the object's version still
// matches. Versions are opaque strings chosen by the store; the protocol only
// compares them for equality.
//
// The names say which is which:
//
//   - *Bucket is the portable type a program holds. It does what every
//     store needs alike: key checks, refusing an empty version, checking
//     the context before anything is sent, naming the operation and key in
//     errors, lower-casing metadata keys, bounding reads and counting
//     requests.
//   - Store is the interface the lease code consumes; *Bucket implements it.
//   - driver.Driver (package providers/driver) is the small interface a
//     provider implements (file, mem, s3store, gcsstore, azurestore), and
//     what middleware such as faulty wraps; NewBucket turns one into a
//     Bucket. Every driver passes the same conformance suite in
//     providertest.
//
// Open picks the opener a provider registered for the URL's scheme
// (Register). With the scheme a provider also registers its Hints
// (RegisterHints): its own words for what to check when its store is not
// set up, which HintsFor gives a program that reports failures, so that
// the program names no store itself.
package providers

import (
	"context"

	"github.com/objlease/objlease/providers/driver"
)

// Portable errors, the same values as package driver's: drivers return
// them, and callers test for them here with errors.Is. The native error
// stays reachable with errors.As.
var (
	// ErrNotFound: the object does not exist.
	ErrNotFound = driver.ErrNotFound
	// ErrPrecondition: a conditional write was refused because the object
	// exists (create) or its version no longer matches (replace, delete), or
	// it does not exist (replace, delete).
	ErrPrecondition = driver.ErrPrecondition
	// ErrConflict: another write to the same object raced with this one;
	// nothing was written; re-read and retry.
	ErrConflict = driver.ErrConflict
	// ErrThrottled: the store asked the client to slow down. Nothing was
	// written.
	ErrThrottled = driver.ErrThrottled
	// ErrUnknownOutcome: the request may or may not have been applied.
	// Re-read to find out.
	ErrUnknownOutcome = driver.ErrUnknownOutcome
	// ErrTooLarge: the object is larger than the caller's read bound.
	ErrTooLarge = driver.ErrTooLarge
	// ErrInvalidKey: the key, a metadata name or the bucket name is not
	// acceptable to the store. Nothing was sent.
	ErrInvalidKey = driver.ErrInvalidKey
	// ErrInvalidBucket: the bucket or container name is not one the store
	// can have. It also matches ErrInvalidKey. Nothing was written.
	ErrInvalidBucket = driver.ErrInvalidBucket
	// ErrNoBucket: the bucket or container does not exist. Nothing was
	// written.
	ErrNoBucket = driver.ErrNoBucket
	// ErrPermission: the store refused the credentials or denied the
	// request. Nothing was written.
	ErrPermission = driver.ErrPermission
	// ErrNoCredentials: no credentials could be found or obtained for the
	// store, so no request was sent. It also matches ErrPermission.
	ErrNoCredentials = driver.ErrNoCredentials
	// ErrAccessDenied: the store accepted the credentials and denied the
	// request. It also matches ErrPermission.
	ErrAccessDenied = driver.ErrAccessDenied
	// ErrUnreachable: no connection to the store could be made; the
	// request was never sent.
	ErrUnreachable = driver.ErrUnreachable
	// ErrWrongEndpoint: something answered at the store's address, but not
	// as the store's API does. A write was not applied.
	ErrWrongEndpoint = driver.ErrWrongEndpoint
)

// Types shared with drivers; see package driver for their fields.
type (
	// Error names the operation and the object a portable error is about.
	Error = driver.Error
	// Attrs describes one version of an object without its bytes.
	Attrs = driver.Attrs
	// WriteResult is what a successful conditional write reports.
	WriteResult = driver.WriteResult
	// ListPage is one page of a listing, in lexical key order.
	ListPage = driver.ListPage
	// Properties are declared facts about a store that the protocol must
	// respect.
	Properties = driver.Properties
)

// Wrap returns an *Error for op on key that matches sentinel with errors.Is
// and keeps native reachable with errors.As. native may be nil.
func Wrap(op, key string, sentinel, native error) error {
	return driver.Wrap(op, key, sentinel, native)
}

// Object is an object's attributes and bytes.
type Object struct {
	Attrs
	Data []byte
}

// Store is the store contract the lease code consumes (objlease.New,
// fence, semaphore, shard, Probe). *Bucket is its implementation, and what
// every provider returns; the interface exists so that a caller can put a
// layer of its own between the lease code and a Bucket (to count, log or,
// in tests, intercept calls). Implementations must be safe for concurrent
// use. A new store is written as a driver.Driver, not as a Store.
//
// Keys are slash-separated paths without a leading slash. Every method
// returns errors that match the sentinels above with errors.Is. Its methods
// but Get are driver.Common's and documented there; where a Store has Get,
// which reads an object whole, a driver.Driver has Read.
type Store interface {
	// Get reads an object. If it is larger than maxBytes it returns
	// ErrTooLarge without reading it whole (maxBytes <= 0: no bound).
	Get(ctx context.Context, key string, maxBytes int64) (*Object, error)
	driver.Common
}
