// Package fence makes the store itself refuse writes from a holder whose
// lease has been taken over: every write carries the writer's fencing token,
// and the check against the highest token seen is one conditional request
// against the version that was checked. Nothing here relies on the writer
// still holding its lease.
//
// Two designs are offered:
//
//   - Put and Delete fence one object in place. The object's metadata
//     remembers the highest token that wrote it. On stores whose versions
//     can repeat when identical bytes are written again (S3 ETags), an
//     in-place check can be fooled (ABA), so Put and Delete refuse such a
//     store with ErrVersionsRepeat unless the caller promises that no two
//     writes to the key carry identical bytes (Options.UniquePayloads).
//     Tombstones are unique by construction. Neither ever replaces or
//     deletes a lease record (ErrLeaseRecord).
//   - Batch guards an output prefix: a job writes objects under a directory
//     of its own token (write-once creates, immune to ABA), then commits a
//     manifest by conditional write. Readers see exactly the committed set.
//     This is safe on every store, S3 included.
//
// docs/fencing.md states what is guaranteed per store and why.
package fence

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/objlease/objlease/internal/entropy"
	"github.com/objlease/objlease/internal/fencemeta"
	"github.com/objlease/objlease/providers"
)

// Metadata keys written on fenced objects.
const (
	TokenKey     = fencemeta.TokenKey
	TombstoneKey = fencemeta.TombstoneKey
)

var (
	// ErrStale: the write carried a token lower than one the object (or
	// prefix) has already accepted. It is a *StaleError.
	ErrStale = errors.New("fenced write refused: stale token")
	// ErrVersionsRepeat: the store's versions can repeat (S3 ETags), so an
	// in-place fenced write cannot be made safe without
	// Options.UniquePayloads. Use a Batch instead, or make payloads unique.
	ErrVersionsRepeat = errors.New("in-place fencing is not safe on a store whose versions repeat")
	// ErrLeaseRecord: the object is a lease record, which a fenced write
	// never replaces or deletes (it would destroy the lease and its token).
	// End a lease with objlease's Release or Break instead.
	ErrLeaseRecord = errors.New("object is a lease record, not a fenced object")
	// ErrReservedKey: the key is in a batch's own directory (it has a
	// "_objlease/" segment), where only a Batch writes; a fenced Put or
	// Delete there would break the prefix's commits.
	ErrReservedKey = errors.New("key is a batch's own")
	// ErrBadManifest: the object at a guarded prefix's manifest key is no
	// objlease manifest (or of another schema); it is never overwritten.
	ErrBadManifest = errors.New("not a valid objlease manifest")
)

// checkKey refuses a key in a batch's own directory.
func checkKey(key string) error {
	if strings.Contains(key, dirName) {
		return fmt.Errorf("%q: %w: only a batch writes under %s, and a write there would break the prefix's commits", key, ErrReservedKey, dirName)
	}
	return nil
}

// StaleError reports a refused fenced write.
type StaleError struct {
	Key     string
	Token   uint64 // the writer's token
	Highest uint64 // the highest token the object has accepted
}

func (e *StaleError) Error() string {
	return fmt.Sprintf("%q: token %d refused: token %d has already written it", e.Key, e.Token, e.Highest)
}

// Unwrap makes errors.Is(err, ErrStale) true.
func (e *StaleError) Unwrap() error { return ErrStale }

// Options qualify in-place fenced writes.
type Options struct {
	// UniquePayloads is the caller's promise that no two writes to the key
	// carry identical bytes (for example, because every payload embeds the
	// token and a write id). Only with it does Put accept a store whose
	// versions repeat: there a newer writer's identical bytes would give
	// the same version, and a stale writer's conditional write would match
	// it.
	UniquePayloads bool
	// Metadata is stored with the object, next to the token.
	Metadata map[string]string
	// LastVersion, if set, is the version this writer's previous Put to the
	// key returned (written with a token no higher than this one). Put then
	// writes against it directly, in one request, and falls back to
	// checking if the object has changed since.
	LastVersion string
}

// Put writes data to key if token is at least the highest token that has
// written key, as one conditional write against the version it checked. It
// returns an error matching ErrStale if the store holds a higher token. It
// costs two requests (stat + write), or one with Options.LastVersion, plus
// a read the first time it writes an object that carries no token (to refuse
// a lease record: ErrLeaseRecord), and retries only when it lost a race to
// another writer. An error matching providers.ErrUnknownOutcome means the
// write may have landed; repeating the same Put is safe.
func Put(ctx context.Context, store providers.Store, key string, token uint64, data []byte, opts Options) (providers.WriteResult, error) {
	return put(ctx, store, key, token, bytesBody(data), opts)
}

// PutFrom is Put with the object's bytes read from body as they are sent,
// so that they are never all in memory on a store that streams (see
// providers.Bucket.CreateFrom). Each attempt reads body from its start.
func PutFrom(ctx context.Context, store providers.Store, key string, token uint64, body *io.SectionReader, opts Options) (providers.WriteResult, error) {
	return put(ctx, store, key, token, streamBody{body}, opts)
}

func put(ctx context.Context, store providers.Store, key string, token uint64, data body, opts Options) (providers.WriteResult, error) {
	if err := checkStore(store, key, opts); err != nil {
		return providers.WriteResult{}, err
	}
	md := map[string]string{}
	for k, v := range opts.Metadata {
		md[k] = v
	}
	md[TokenKey] = strconv.FormatUint(token, 10)
	if opts.LastVersion != "" {
		res, err := data.replace(ctx, store, key, md, opts.LastVersion)
		if !errors.Is(err, providers.ErrPrecondition) && !errors.Is(err, providers.ErrConflict) {
			return res, err
		}
	}
	return write(ctx, "put", store, key, token, data, md)
}

// Delete removes key's content if token is at least the highest that has
// written it. The object is replaced by a tombstone that keeps the token,
// because deleting it outright would let an older token write it again. Get
// reports a tombstone as providers.ErrNotFound.
//
// Every tombstone's bytes are unique (they carry the token and a random
// nonce): where versions are content hashes (S3 ETags), two empty tombstones
// would have the same version, and a writer that had read the first could
// overwrite the second with its conditional write.
func Delete(ctx context.Context, store providers.Store, key string, token uint64, opts Options) error {
	if err := checkStore(store, key, opts); err != nil {
		return err
	}
	md := map[string]string{TokenKey: strconv.FormatUint(token, 10), TombstoneKey: "true"}
	_, err := write(ctx, "delete", store, key, token, bytesBody(tombstone(token)), md)
	return err
}

// tombstone returns the bytes of a tombstone written by token.
func tombstone(token uint64) []byte {
	if !uniqueTombstones() {
		return nil
	}
	nonce := make([]byte, 16)
	entropy.Read(nonce)
	b, _ := json.Marshal(struct {
		Tombstone bool   `json:"objlease_tombstone"`
		Token     uint64 `json:"token"`
		Nonce     string `json:"nonce"`
	}{true, token, hex.EncodeToString(nonce)})
	return b
}

// maxLeaseRecordSize bounds the read of an object that may be a lease
// record; objlease.MaxRecordSize, which this package cannot import.
const maxLeaseRecordSize = 64 << 10

// leaseRecord reports whether b is a lease record: a JSON object with an
// "objlease" schema field. token is the record's token, if it has one.
func leaseRecord(b []byte) (token uint64, ok bool) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(b, &fields) != nil {
		return 0, false
	}
	if _, ok = fields["objlease"]; ok {
		_ = json.Unmarshal(fields["token"], &token)
	}
	return token, ok
}

func leaseRecordError(key string, token uint64) error {
	return fmt.Errorf("%q: %w (lease token %d): fenced writes never replace or delete a lease; end it with release or break", key, ErrLeaseRecord, token)
}

// unfenced checks an object that carries no fence metadata and returns the
// attributes to write against: it is read once, to refuse a lease record.
// A fenced write to any other object fences it from then on.
func unfenced(ctx context.Context, store providers.Store, key string, a *providers.Attrs) (*providers.Attrs, error) {
	obj, err := store.Get(ctx, key, maxLeaseRecordSize)
	switch {
	case errors.Is(err, providers.ErrTooLarge):
		return a, nil // larger than any lease record
	case err != nil:
		return nil, err
	}
	if tok, ok := leaseRecord(obj.Data); ok {
		return nil, leaseRecordError(key, tok)
	}
	return &obj.Attrs, nil // the version whose bytes were checked
}

// Get reads a fenced object and the token that last wrote it.
func Get(ctx context.Context, store providers.Store, key string, maxBytes int64) (*providers.Object, uint64, error) {
	obj, err := store.Get(ctx, key, maxBytes)
	if err != nil {
		return nil, 0, err
	}
	if obj.Metadata[TombstoneKey] == "true" {
		return nil, 0, providers.Wrap("get", key, providers.ErrNotFound, errors.New("deleted by a fenced delete"))
	}
	tok, err := tokenOf(key, obj.Metadata)
	return obj, tok, err
}

func checkStore(store providers.Store, key string, opts Options) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if store.Properties().VersionsRepeat && !opts.UniquePayloads {
		return fmt.Errorf("%q on %s: %w (use fence.Batch, or set UniquePayloads if every payload is unique)", key, store.Properties().Name, ErrVersionsRepeat)
	}
	return nil
}

// tokenOf reads the token an object's metadata records; 0 if none (an
// object never written through a fence).
func tokenOf(key string, md map[string]string) (uint64, error) {
	s, ok := md[TokenKey]
	if !ok {
		return 0, nil
	}
	t, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: metadata %s=%q is not a token: %w", key, TokenKey, s, err)
	}
	return t, nil
}

// body is what a write sends: bytes in memory, or a streamed body.
type body interface {
	create(ctx context.Context, store providers.Store, key string, md map[string]string) (providers.WriteResult, error)
	replace(ctx context.Context, store providers.Store, key string, md map[string]string, ifVersion string) (providers.WriteResult, error)
	size() int64
}

type bytesBody []byte

func (b bytesBody) create(ctx context.Context, store providers.Store, key string, md map[string]string) (providers.WriteResult, error) {
	return store.Create(ctx, key, b, md)
}

func (b bytesBody) replace(ctx context.Context, store providers.Store, key string, md map[string]string, v string) (providers.WriteResult, error) {
	return store.Replace(ctx, key, b, md, v)
}

func (b bytesBody) size() int64 { return int64(len(b)) }

// streamBody is sent through the store's CreateFrom and ReplaceFrom where
// it has them (every *providers.Bucket); otherwise it is read into memory.
type streamBody struct{ r *io.SectionReader }

// streamer is a store that writes from a body as it sends it.
type streamer interface {
	CreateFrom(ctx context.Context, key string, body *io.SectionReader, metadata map[string]string) (providers.WriteResult, error)
	ReplaceFrom(ctx context.Context, key string, body *io.SectionReader, metadata map[string]string, ifVersion string) (providers.WriteResult, error)
}

func (b streamBody) bytes() ([]byte, error) {
	data := make([]byte, b.r.Size())
	if _, err := b.r.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return data, nil
}

func (b streamBody) create(ctx context.Context, store providers.Store, key string, md map[string]string) (providers.WriteResult, error) {
	if s, ok := store.(streamer); ok {
		return s.CreateFrom(ctx, key, b.r, md)
	}
	data, err := b.bytes()
	if err != nil {
		return providers.WriteResult{}, err
	}
	return store.Create(ctx, key, data, md)
}

func (b streamBody) replace(ctx context.Context, store providers.Store, key string, md map[string]string, v string) (providers.WriteResult, error) {
	if s, ok := store.(streamer); ok {
		return s.ReplaceFrom(ctx, key, b.r, md, v)
	}
	data, err := b.bytes()
	if err != nil {
		return providers.WriteResult{}, err
	}
	return store.Replace(ctx, key, data, md, v)
}

func (b streamBody) size() int64 { return b.r.Size() }

func write(ctx context.Context, op string, store providers.Store, key string, token uint64, data body, md map[string]string) (providers.WriteResult, error) {
	var r raced
	for {
		a, err := store.Stat(ctx, key)
		if errors.Is(err, providers.ErrNotFound) {
			res, err := data.create(ctx, store, key, md)
			if errors.Is(err, providers.ErrPrecondition) || errors.Is(err, providers.ErrConflict) {
				if err := r.lost(ctx, op, key, "", err); err != nil {
					return providers.WriteResult{}, err
				}
				continue // created meanwhile: check its token
			}
			return res, err
		}
		if err != nil {
			return providers.WriteResult{}, err
		}
		if err := r.read(ctx, op, key, a.Version); err != nil {
			return providers.WriteResult{}, err
		}
		if _, fenced := a.Metadata[TokenKey]; !fenced {
			a, err = unfenced(ctx, store, key, a)
			if errors.Is(err, providers.ErrNotFound) {
				continue // deleted meanwhile
			}
			if err != nil {
				return providers.WriteResult{}, err
			}
		}
		highest, err := tokenOf(key, a.Metadata)
		if err != nil {
			return providers.WriteResult{}, err
		}
		if token < highest {
			return providers.WriteResult{}, stale(op, key, token, highest)
		}
		res, err := data.replace(ctx, store, key, md, a.Version)
		if errors.Is(err, providers.ErrPrecondition) || errors.Is(err, providers.ErrConflict) {
			if err := r.lost(ctx, op, key, a.Version, err); err != nil {
				return providers.WriteResult{}, err
			}
			continue // someone wrote between our check and our write: check again
		}
		return res, err
	}
}
