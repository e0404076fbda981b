package driver

import "errors"

// Portable errors. Drivers wrap their native errors so that errors.Is
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
