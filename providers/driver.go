package providers

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
)

// Driver is what a provider implements; NewBucket turns it into a Store.
// Bucket has already done the shared work when a Driver method is called:
// the key passed the portable checks (and the driver's own, see
// KeyChecker), the context was not done, a version is not empty and
// metadata names are portable. A Driver must be safe for concurrent use.
//
// Errors match the portable sentinels of this package with errors.Is where
// one applies, and keep the native error reachable with errors.As. They
// need not name the operation or key: Bucket wraps them in an *Error (an
// *Error a driver returns is passed on unchanged). Each driver turns store
// answers into sentinels in one mapping function.
type Driver interface {
	// Read starts reading an object. maxBytes is the caller's bound (<= 0:
	// none); Bucket enforces it, a driver may use it as a hint.
	Read(ctx context.Context, key string, maxBytes int64) (*Reader, error)
	// Stat reads an object's attributes and metadata.
	Stat(ctx context.Context, key string) (*Attrs, error)
	// Create writes the object only if no object exists under key.
	Create(ctx context.Context, key string, data []byte, metadata map[string]string) (WriteResult, error)
	// Replace writes the object only if its current version is ifVersion.
	Replace(ctx context.Context, key string, data []byte, metadata map[string]string, ifVersion string) (WriteResult, error)
	// Delete removes the object only if its current version is ifVersion.
	Delete(ctx context.Context, key string, ifVersion string) error
	// List returns one page of objects under prefix.
	List(ctx context.Context, prefix, pageToken string, pageSize int) (ListPage, error)
	// Properties reports the store's declared properties.
	Properties() Properties
	// As sets *target to a native type the driver holds and reports
	// whether it could.
	As(target any) bool
	// Close releases what the driver owns.
	Close() error
}

// KeyChecker is implemented by drivers whose store refuses, or would store
// under another name, keys that pass the portable checks. CheckKey says
// why key is refused, or returns nil.
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
