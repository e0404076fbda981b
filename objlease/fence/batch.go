package fence

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/objlease/objlease/providers"
)

// Layout of a guarded prefix P:
//
//	P_objlease/manifest.json             the committed set (JSON, see Manifest)
//	P_objlease/<token, 20 digits>/NAME   objects written by the job with that token
//
// Objects are created write-once under the writer's own token directory, so
// no writer can overwrite another's; the manifest is the only object ever
// replaced, and each of its versions embeds a unique nonce, so its versions
// never repeat even where the store's versions are content hashes.
const dirName = "_objlease/"

// ManifestSchema is the version of the manifest format.
const ManifestSchema = 1

// maxManifestSize bounds manifest reads.
const maxManifestSize = 16 << 20

// Manifest lists the committed objects of a guarded prefix.
type Manifest struct {
	Schema      int              `json:"objlease_manifest"`
	Prefix      string           `json:"prefix"`
	Token       uint64           `json:"token"`
	Nonce       string           `json:"nonce"`
	CommittedAt time.Time        `json:"committed_at"`
	Objects     map[string]Entry `json:"objects"`
	version     string           // the manifest object's version
	_           struct{}         `json:"-"`
}

// Entry describes one committed object.
type Entry struct {
	Key     string `json:"key"` // the object's full key in the store
	Size    int64  `json:"size"`
	Version string `json:"version"` // the version written; a reader can check it
}

// Names returns the committed names in order.
func (m *Manifest) Names() []string {
	names := make([]string, 0, len(m.Objects))
	for n := range m.Objects {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func manifestKey(prefix string) string { return prefix + dirName + "manifest.json" }

// TokenDir returns the directory under prefix where the job with token
// writes.
func TokenDir(prefix string, token uint64) string {
	return fmt.Sprintf("%s%s%020d/", prefix, dirName, token)
}

// Batch is one job's output under a guarded prefix.
type Batch struct {
	store   providers.Store
	prefix  string
	token   uint64
	id      string // tells this batch's objects from another batch's of the same token
	objects map[string]Entry
}

// batchKey is the metadata key naming the batch that wrote an object.
const batchKey = "objlease-batch"

// NewBatch starts a batch for the job holding token. Nothing is written
// until Put.
func NewBatch(store providers.Store, prefix string, token uint64) *Batch {
	return &Batch{store: store, prefix: prefix, token: token, objects: map[string]Entry{},
		id: strconv.FormatUint(rand.Uint64(), 36)}
}

// Put writes one object of the batch under the job's token directory. It
// never touches another job's objects. Objects are write-once across
// batches: a name that another batch of the same token already wrote (and
// perhaps committed) is refused, so a committed object never changes
// without a commit. Writing the same name twice in one batch replaces this
// batch's earlier object.
func (b *Batch) Put(ctx context.Context, name string, data []byte) error {
	return b.put(ctx, name, bytesBody(data))
}

// PutFrom is Put with the object's bytes read from body as they are sent
// (see PutFrom of the package).
func (b *Batch) PutFrom(ctx context.Context, name string, body *io.SectionReader) error {
	return b.put(ctx, name, streamBody{body})
}

func (b *Batch) put(ctx context.Context, name string, data body) error {
	if name == "" || strings.HasPrefix(name, "/") {
		return fmt.Errorf("batch %q: %w: object name %q (want a relative name, such as part-0001.csv)", b.prefix, providers.ErrInvalidKey, name)
	}
	key := TokenDir(b.prefix, b.token) + name
	md := map[string]string{TokenKey: strconv.FormatUint(b.token, 10), batchKey: b.id}
	var res providers.WriteResult
	var err error
	if e, mine := b.objects[name]; mine {
		res, err = data.replace(ctx, b.store, key, md, e.Version)
	} else {
		res, err = data.create(ctx, b.store, key, md)
	}
	if errors.Is(err, providers.ErrPrecondition) || errors.Is(err, providers.ErrUnknownOutcome) || errors.Is(err, providers.ErrConflict) {
		// Ours if an earlier attempt of this batch landed; else refused.
		a, serr := b.store.Stat(ctx, key)
		switch {
		case serr != nil:
			return err
		case a.Metadata[batchKey] != b.id:
			return fmt.Errorf("batch %q: %q was already written under token %d by another batch: objects are write-once, use a new name: %w",
				b.prefix, name, b.token, providers.ErrPrecondition)
		}
		res, err = data.replace(ctx, b.store, key, md, a.Version)
	}
	if err != nil {
		return err
	}
	b.objects[name] = Entry{Key: key, Size: data.size(), Version: res.Version}
	return nil
}

// Commit publishes the batch: it replaces the prefix's manifest, by one
// conditional write against the version it read, if and only if no job with
// a higher token has committed. It returns an error matching ErrStale if one
// has. With merge, the new manifest keeps the committed objects of earlier
// batches that this one did not rewrite; without it, the committed set is
// exactly this batch.
func (b *Batch) Commit(ctx context.Context, merge bool) (*Manifest, error) {
	var r raced
	key := manifestKey(b.prefix)
	for {
		cur, err := readManifest(ctx, b.store, b.prefix)
		if err != nil && !errors.Is(err, providers.ErrNotFound) {
			return nil, err
		}
		if cur != nil {
			if err := r.read(ctx, "commit", key, cur.version); err != nil {
				return nil, err
			}
		}
		if cur != nil && cur.Token > b.token {
			return nil, stale("commit", manifestKey(b.prefix), b.token, cur.Token)
		}
		next := &Manifest{Schema: ManifestSchema, Prefix: b.prefix, Token: b.token,
			Nonce:       strconv.FormatUint(rand.Uint64(), 16) + strconv.FormatUint(rand.Uint64(), 16),
			CommittedAt: time.Now().UTC(), Objects: map[string]Entry{}}
		if merge && cur != nil {
			for n, e := range cur.Objects {
				next.Objects[n] = e
			}
		}
		for n, e := range b.objects {
			next.Objects[n] = e
		}
		body, err := json.Marshal(next)
		if err != nil {
			return nil, err
		}
		var res providers.WriteResult
		if cur == nil {
			res, err = b.store.Create(ctx, manifestKey(b.prefix), body, nil)
		} else {
			res, err = b.store.Replace(ctx, manifestKey(b.prefix), body, nil, cur.version)
		}
		switch {
		case err == nil:
			next.version = res.Version
			return next, nil
		case errors.Is(err, providers.ErrPrecondition), errors.Is(err, providers.ErrConflict):
			version := ""
			if cur != nil {
				version = cur.version
			}
			if err := r.lost(ctx, "commit", key, version, err); err != nil {
				return nil, err
			}
			continue // another commit landed: check its token
		case errors.Is(err, providers.ErrUnknownOutcome):
			// Did ours land? The nonce says.
			if m, rerr := readManifest(ctx, b.store, b.prefix); rerr == nil && m.Nonce == next.Nonce {
				return m, nil
			} else if rerr == nil {
				if err := r.lost(ctx, "commit", key, "", err); err != nil {
					return nil, err
				}
				continue
			}
			return nil, err
		default:
			return nil, err
		}
	}
}

// ReadCommitted returns the committed set of a guarded prefix, or an error
// matching providers.ErrNotFound if nothing was ever committed.
func ReadCommitted(ctx context.Context, store providers.Store, prefix string) (*Manifest, error) {
	return readManifest(ctx, store, prefix)
}

func readManifest(ctx context.Context, store providers.Store, prefix string) (*Manifest, error) {
	key := manifestKey(prefix)
	obj, err := store.Get(ctx, key, maxManifestSize)
	if err != nil {
		return nil, err
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(obj.Data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		if tok, ok := leaseRecord(obj.Data); ok {
			return nil, leaseRecordError(key, tok)
		}
		return nil, fmt.Errorf("manifest %q: %w: %v", key, ErrBadManifest, err)
	}
	if m.Schema != ManifestSchema {
		return nil, fmt.Errorf("manifest %q: %w: schema %d, this objlease reads %d", key, ErrBadManifest, m.Schema, ManifestSchema)
	}
	m.version = obj.Version
	return &m, nil
}

// Collect deletes orphaned objects under a guarded prefix: everything in
// token directories below the committed token (jobs that were fenced off or
// never committed), except objects the manifest still lists (kept by merge
// commits). Directories at or above the committed token are left alone: a
// newer job may be writing there. It returns how many objects it deleted.
func Collect(ctx context.Context, store providers.Store, prefix string) (int, error) {
	m, err := readManifest(ctx, store, prefix)
	if err != nil {
		return 0, err
	}
	live := map[string]bool{}
	for _, e := range m.Objects {
		live[e.Key] = true
	}
	deleted := 0
	token := ""
	for {
		page, err := store.List(ctx, prefix+dirName, token, 1000)
		if err != nil {
			return deleted, err
		}
		for _, o := range page.Objects {
			rest := strings.TrimPrefix(o.Key, prefix+dirName)
			dir, _, ok := strings.Cut(rest, "/")
			t, perr := strconv.ParseUint(dir, 10, 64)
			if !ok || perr != nil || t >= m.Token || live[o.Key] {
				continue
			}
			// Deleting by the listed version may, where versions repeat,
			// delete a later object with the same bytes: only an orphan
			// of a token below the committed one can be there, and no
			// later commit can list it.
			switch err := store.Delete(ctx, o.Key, o.Version); {
			case err == nil:
				deleted++
			case !errors.Is(err, providers.ErrPrecondition):
				return deleted, err
			}
		}
		if page.NextToken == "" {
			return deleted, nil
		}
		token = page.NextToken
	}
}

// CommitWritten commits every object found in token's directory under
// prefix, for writers that put objects there by other means than Batch.Put
// (for example one process per object, or the CLI's "batch put"). It costs
// a listing besides the commit.
func CommitWritten(ctx context.Context, store providers.Store, prefix string, token uint64, merge bool) (*Manifest, error) {
	b := NewBatch(store, prefix, token)
	dir := TokenDir(prefix, token)
	page := providers.ListPage{}
	for first := true; first || page.NextToken != ""; first = false {
		var err error
		if page, err = store.List(ctx, dir, page.NextToken, 1000); err != nil {
			return nil, err
		}
		for _, o := range page.Objects {
			b.objects[strings.TrimPrefix(o.Key, dir)] = Entry{Key: o.Key, Size: o.Size, Version: o.Version}
		}
	}
	return b.Commit(ctx, merge)
}
