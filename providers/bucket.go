package providers

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/objlease/objlease/providers/driver"
)

// Bucket is the portable store every provider's constructor returns: a
// driver.Driver with the work all stores share done once, here.
//
//   - Keys: refused with ErrInvalidKey before anything is sent if empty,
//     starting with '/', not valid UTF-8, holding a control character,
//     longer than Properties.MaxKeyBytes, or refused by the driver's
//     driver.KeyChecker.
//   - Metadata names written must be lower-case ASCII letters, digits and
//     '-', starting with a letter (ErrInvalidKey otherwise), and come back
//     lower-cased from every store.
//   - Replace and Delete with an empty version fail with ErrPrecondition:
//     an SDK that drops an empty If-Match would make them unconditional.
//   - A context already done fails the call with the context's cause before
//     anything is sent, so a write that was never sent never reports
//     ErrUnknownOutcome.
//   - Get enforces maxBytes, refusing a larger object with ErrTooLarge
//     without reading it whole.
//   - With a request timeout (WithRequestTimeout; the S3, GCS and Azure
//     providers set DefaultRequestTimeout), a request the store has not
//     answered by then is abandoned: a read fails with ErrUnreachable, a
//     write with ErrUnknownOutcome (it may have landed), each saying how
//     long it waited. A write is given one more second per MiB it sends.
//   - Every error is an *Error naming the operation and key.
//   - Every call is counted (see the metrics below).
//
// Metrics go through the OpenTelemetry global MeterProvider and are no-ops
// until a program installs one:
//
//	objlease.store.requests  counter, attributes store (Properties.Name),
//	                         op (get, stat, create, replace, delete, list) and
//	                         outcome (see Outcome)
//
// A Bucket is safe for concurrent use.
type Bucket struct {
	d       driver.Driver
	timeout time.Duration // per request; 0: none
}

// DefaultRequestTimeout bounds each request of a remote store (S3, GCS,
// Azure Blob) unless WithRequestTimeout says otherwise: long enough for a
// slow reply under load, short enough that a store that accepted the
// connection and never answers cannot hold a command or a waiter for
// long. A renewal is bounded sooner, by the lease's own validity.
const DefaultRequestTimeout = 10 * time.Second

// WithRequestTimeout returns a Bucket over the same driver whose every
// request is abandoned after d (plus one second per MiB a write sends); 0
// means no bound but the caller's context.
func (b *Bucket) WithRequestTimeout(d time.Duration) *Bucket {
	c := *b
	c.timeout = max(d, 0)
	return &c
}

// A TimeoutError is in the chain of the error of a request that its
// request timeout abandoned (see WithRequestTimeout); the error also
// matches ErrUnreachable (a read) or ErrUnknownOutcome (a write).
type TimeoutError struct{ After time.Duration }

func (t *TimeoutError) Error() string {
	return fmt.Sprintf("no answer from the store within %v", t.After)
}

// Timeout reports true, as a net.Error that timed out does.
func (t *TimeoutError) Timeout() bool { return true }

// request returns the context of one request sending size bytes, and a
// function that, given the request's error, says it timed out: a read
// becomes ErrUnreachable, a write ErrUnknownOutcome.
func (b *Bucket) request(ctx context.Context, op, key string, size int) (context.Context, func(err error, write bool) error, context.CancelFunc) {
	if b.timeout <= 0 {
		return ctx, func(err error, _ bool) error { return wrap(op, key, err) }, func() {}
	}
	cause := &TimeoutError{After: b.timeout + time.Duration(size>>20)*time.Second}
	rctx, cancel := context.WithTimeoutCause(ctx, cause.After, cause)
	judge := func(err error, write bool) error {
		if context.Cause(rctx) != cause {
			return wrap(op, key, err)
		}
		sentinel := ErrUnreachable
		if write {
			sentinel = ErrUnknownOutcome
		}
		// The driver's context error only echoes the timeout; keeping it
		// would make the error match a deadline of the caller's.
		why := error(cause)
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			why = fmt.Errorf("%w: %w", cause, err)
		}
		if where := b.d.Properties().Where; where != "" {
			why = fmt.Errorf("%s: %w", where, why)
		}
		return Wrap(op, key, sentinel, why)
	}
	return rctx, judge, cancel
}

var _ Store = (*Bucket)(nil)

// NewBucket returns the portable Bucket over d. It is meant for provider
// packages and for code that puts middleware (such as package faulty)
// between a driver and its Bucket; programs get a Bucket from a provider's
// constructor or from Open.
func NewBucket(d driver.Driver) *Bucket { return &Bucket{d: d} }

// Get reads an object. If it is larger than maxBytes it returns ErrTooLarge
// without reading it whole (maxBytes <= 0: no bound).
func (b *Bucket) Get(ctx context.Context, key string, maxBytes int64) (obj *Object, err error) {
	const op = "get"
	defer b.record(ctx, op, &err)
	if err := b.begin(ctx, op, key); err != nil {
		return nil, err
	}
	ctx, judge, cancel := b.request(ctx, op, key, 0)
	defer cancel()
	r, err := b.d.Read(ctx, key, maxBytes)
	if err != nil {
		return nil, judge(err, false)
	}
	defer r.Body.Close()
	if maxBytes > 0 && r.Size > maxBytes {
		return nil, Wrap(op, key, ErrTooLarge, fmt.Errorf("object has %d bytes, bound is %d", r.Size, maxBytes))
	}
	body := io.Reader(r.Body)
	if maxBytes > 0 {
		// The length may be undeclared; never read past the bound.
		body = io.LimitReader(body, maxBytes+1)
	}
	data, err := io.ReadAll(body)
	if err != nil {
		return nil, judge(fmt.Errorf("reading body: %w", err), false)
	}
	if maxBytes > 0 && int64(len(data)) > maxBytes {
		return nil, Wrap(op, key, ErrTooLarge, fmt.Errorf("object has more than %d bytes", maxBytes))
	}
	if r.Size >= 0 && int64(len(data)) != r.Size {
		return nil, &Error{Op: op, Key: key, Err: fmt.Errorf("store declared %d bytes and sent %d", r.Size, len(data))}
	}
	a := r.Attrs
	a.Key, a.Size, a.Metadata = key, int64(len(data)), lowerKeys(a.Metadata)
	return &Object{Attrs: a, Data: data}, nil
}

// Stat reads an object's attributes and metadata, not its bytes.
func (b *Bucket) Stat(ctx context.Context, key string) (a *Attrs, err error) {
	const op = "stat"
	defer b.record(ctx, op, &err)
	if err := b.begin(ctx, op, key); err != nil {
		return nil, err
	}
	ctx, judge, cancel := b.request(ctx, op, key, 0)
	defer cancel()
	a, err = b.d.Stat(ctx, key)
	if err != nil {
		return nil, judge(err, false)
	}
	a.Key, a.Metadata = key, lowerKeys(a.Metadata)
	return a, nil
}

// Create writes the object only if no object exists under key; otherwise
// ErrPrecondition.
func (b *Bucket) Create(ctx context.Context, key string, data []byte, metadata map[string]string) (res WriteResult, err error) {
	const op = "create"
	defer b.record(ctx, op, &err)
	if err := b.beginWrite(ctx, op, key, metadata); err != nil {
		return WriteResult{}, err
	}
	ctx, judge, cancel := b.request(ctx, op, key, len(data))
	defer cancel()
	res, err = b.d.Create(ctx, key, data, metadata)
	if err != nil {
		return WriteResult{}, judge(err, true)
	}
	return res, nil
}

// Replace writes the object only if its current version is ifVersion;
// otherwise (including when it is absent) ErrPrecondition.
func (b *Bucket) Replace(ctx context.Context, key string, data []byte, metadata map[string]string, ifVersion string) (res WriteResult, err error) {
	const op = "replace"
	defer b.record(ctx, op, &err)
	if err := b.beginWrite(ctx, op, key, metadata); err != nil {
		return WriteResult{}, err
	}
	if ifVersion == "" {
		return WriteResult{}, Wrap(op, key, ErrPrecondition, errors.New("empty version"))
	}
	ctx, judge, cancel := b.request(ctx, op, key, len(data))
	defer cancel()
	res, err = b.d.Replace(ctx, key, data, metadata, ifVersion)
	if err != nil {
		return WriteResult{}, judge(err, true)
	}
	return res, nil
}

// CreateFrom is Create with the object's bytes read from body while they
// are sent, on a store whose driver streams (driver.StreamWriter: the file
// store, S3, GCS and Azure Blob), so that they are never all in memory;
// elsewhere (mem) they are read into memory first. A retried request reads
// body again from its start.
func (b *Bucket) CreateFrom(ctx context.Context, key string, body *io.SectionReader, metadata map[string]string) (res WriteResult, err error) {
	return b.writeFrom(ctx, "create", key, body, metadata, "")
}

// ReplaceFrom is Replace with the object's bytes read from body, as
// CreateFrom.
func (b *Bucket) ReplaceFrom(ctx context.Context, key string, body *io.SectionReader, metadata map[string]string, ifVersion string) (res WriteResult, err error) {
	if ifVersion == "" {
		return WriteResult{}, Wrap("replace", key, ErrPrecondition, errors.New("empty version"))
	}
	return b.writeFrom(ctx, "replace", key, body, metadata, ifVersion)
}

func (b *Bucket) writeFrom(ctx context.Context, op, key string, body *io.SectionReader, metadata map[string]string, ifVersion string) (res WriteResult, err error) {
	sw, ok := b.d.(driver.StreamWriter)
	if !ok {
		data := make([]byte, body.Size())
		if _, err := body.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
			return WriteResult{}, &Error{Op: op, Key: key, Err: err}
		}
		if op == "create" {
			return b.Create(ctx, key, data, metadata)
		}
		return b.Replace(ctx, key, data, metadata, ifVersion)
	}
	defer b.record(ctx, op, &err)
	if err := b.beginWrite(ctx, op, key, metadata); err != nil {
		return WriteResult{}, err
	}
	ctx, judge, cancel := b.request(ctx, op, key, int(min(body.Size(), math.MaxInt32)))
	defer cancel()
	if op == "create" {
		res, err = sw.CreateFrom(ctx, key, body, metadata)
	} else {
		res, err = sw.ReplaceFrom(ctx, key, body, metadata, ifVersion)
	}
	if err != nil {
		return WriteResult{}, judge(err, true)
	}
	return res, nil
}

// Delete removes the object only if its current version is ifVersion;
// otherwise (including when it is absent) ErrPrecondition.
func (b *Bucket) Delete(ctx context.Context, key string, ifVersion string) (err error) {
	const op = "delete"
	defer b.record(ctx, op, &err)
	if err := b.begin(ctx, op, key); err != nil {
		return err
	}
	if ifVersion == "" {
		return Wrap(op, key, ErrPrecondition, errors.New("empty version"))
	}
	ctx, judge, cancel := b.request(ctx, op, key, 0)
	defer cancel()
	if err := b.d.Delete(ctx, key, ifVersion); err != nil {
		return judge(err, true)
	}
	return nil
}

// List returns up to pageSize objects whose keys start with prefix, after
// the position named by pageToken ("" for the first page). Errors name the
// prefix as their key.
func (b *Bucket) List(ctx context.Context, prefix, pageToken string, pageSize int) (page ListPage, err error) {
	const op = "list"
	defer b.record(ctx, op, &err)
	if ctx.Err() != nil {
		return ListPage{}, &Error{Op: op, Key: prefix, Err: context.Cause(ctx)}
	}
	ctx, judge, cancel := b.request(ctx, op, prefix, 0)
	defer cancel()
	page, err = b.d.List(ctx, prefix, pageToken, pageSize)
	if err != nil {
		return ListPage{}, judge(err, false)
	}
	for i := range page.Objects {
		page.Objects[i].Metadata = lowerKeys(page.Objects[i].Metadata)
	}
	return page, nil
}

// Properties reports the driver's declared properties.
func (b *Bucket) Properties() Properties { return b.d.Properties() }

// As sets *target to b if target is a **Bucket, and otherwise asks the
// driver for its native client (see each provider's documentation).
func (b *Bucket) As(target any) bool {
	if p, ok := target.(**Bucket); ok {
		*p = b
		return true
	}
	return b.d.As(target)
}

// Close releases what the driver owns.
func (b *Bucket) Close() error { return b.d.Close() }

// begin checks what every call on one key checks before sending anything.
func (b *Bucket) begin(ctx context.Context, op, key string) error {
	if why := b.checkKey(key); why != nil {
		return Wrap(op, key, ErrInvalidKey, why)
	}
	if ctx.Err() != nil {
		// Nothing was sent, so even a write's outcome is known. The
		// cause, not context.Canceled: it says why (a lost lease, a
		// signal, the caller's deadline).
		return &Error{Op: op, Key: key, Err: context.Cause(ctx)}
	}
	return nil
}

func (b *Bucket) beginWrite(ctx context.Context, op, key string, metadata map[string]string) error {
	for k := range metadata {
		if why := checkMetadataName(k); why != nil {
			return Wrap(op, key, ErrInvalidKey, why)
		}
	}
	return b.begin(ctx, op, key)
}

// checkKey applies the portable rules, then the store's limit and its own.
func (b *Bucket) checkKey(key string) error {
	switch {
	case key == "":
		return errors.New("empty key")
	case strings.HasPrefix(key, "/"):
		return errors.New("key starts with '/'")
	case !utf8.ValidString(key):
		return errors.New("key is not valid UTF-8")
	case strings.ContainsFunc(key, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		// S3 listings could not return it in XML; GCS refuses CR and LF.
		return errors.New("key contains a control character")
	}
	// One rule for every store: a key is used as given, or refused. The
	// S3 SDK cleans "a//b" and "a/../b" into other keys; a file store's
	// path would climb or collapse.
	for seg := range strings.SplitSeq(key, "/") {
		switch seg {
		case "":
			return errors.New(`key has an empty path segment ("//" or a trailing "/"), which a store could turn into another key`)
		case ".", "..":
			return fmt.Errorf("key has a %q path segment, which a store could resolve into another key", seg)
		}
	}
	if p := b.d.Properties(); p.MaxKeyBytes > 0 && len(key) > p.MaxKeyBytes {
		return fmt.Errorf("key is %d bytes, %s allows %d", len(key), p.Name, p.MaxKeyBytes)
	}
	if kc, ok := b.d.(driver.KeyChecker); ok {
		return kc.CheckKey(key)
	}
	return nil
}

// checkMetadataName accepts the names every store keeps as given (Azure
// wants identifiers, S3 and Azure fold case).
func checkMetadataName(k string) error {
	if k == "" || k[0] < 'a' || k[0] > 'z' {
		return fmt.Errorf("metadata name %q: must start with a lower-case letter", k)
	}
	for _, c := range k {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return fmt.Errorf("metadata name %q: only a-z, 0-9 and '-' are portable", k)
		}
	}
	return nil
}

// wrap names op and key in a driver's error, unless the driver did already.
// A message that spans lines (some SDKs append the reply body) is put on
// one, so that logs and the CLI show one line per failure.
func wrap(op, key string, err error) error {
	var rec tls.RecordHeaderError
	if noTLS := errors.Is(err, http.ErrSchemeMismatch); noTLS || errors.As(err, &rec) {
		// A TLS handshake answered with no TLS (most often plain HTTP):
		// the URL's mistake, not the network's. The cause alone is kept:
		// the driver's error may have called it unreachable.
		cause := error(rec)
		if noTLS {
			cause = http.ErrSchemeMismatch
		}
		return Wrap(op, key, fmt.Errorf("%w: it does not speak TLS, but the endpoint is https:// (an http:// endpoint?)", ErrWrongEndpoint), cause)
	}
	if pe, ok := err.(*Error); ok {
		return pe
	}
	if msg := err.Error(); strings.ContainsAny(msg, "\r\n") {
		err = driver.Native(strings.Join(strings.Fields(msg), " "), err)
	}
	return &Error{Op: op, Key: key, Err: err}
}

// lowerKeys returns m with lower-case keys (nil for nil).
func lowerKeys(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[strings.ToLower(k)] = v
	}
	return out
}
