// Package mem is an in-process, linearizable store for unit tests and
// simulation.
//
// Importing it registers the URL scheme "mem": mem://name/key opens the
// process-wide store called name (the same name always gives the same store)
// and points at key.
package mem

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/objlease/objlease/providers"
)

func init() { providers.Register("mem", open) }

// Store holds objects in memory. The zero value is not usable; call New.
type Store struct {
	now func() time.Time

	mu      sync.Mutex
	objects map[string]*object
	// last is the last version handed out; versions count up per store so
	// they never repeat, even across delete and re-create.
	last uint64
}

type object struct {
	data     []byte
	metadata map[string]string
	version  string
	modified time.Time
}

// Option configures a Store.
type Option func(*Store)

// WithClock makes the store take LastModified and StoreTime from now instead
// of time.Now.
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// New returns an empty store.
func New(opts ...Option) *Store {
	s := &Store{now: time.Now, objects: map[string]*object{}}
	for _, o := range opts {
		o(s)
	}
	return s
}

var (
	namedMu sync.Mutex
	named   = map[string]*Store{}
)

func open(_ context.Context, u *url.URL) (providers.Store, string, error) {
	if u.Opaque != "" || u.Host == "" {
		return nil, "", fmt.Errorf("%w %q: want mem://name/key", providers.ErrBadURL, u.Redacted())
	}
	if u.RawQuery != "" || u.User != nil {
		return nil, "", fmt.Errorf("%w %q: mem URLs take no user or query", providers.ErrBadURL, u.Redacted())
	}
	namedMu.Lock()
	defer namedMu.Unlock()
	s := named[u.Host]
	if s == nil {
		s = New()
		named[u.Host] = s
	}
	return s, strings.TrimPrefix(u.Path, "/"), nil
}

func checkKey(op, key string) error {
	if key == "" || strings.HasPrefix(key, "/") {
		return providers.Wrap(op, key, fmt.Errorf("%w: want a non-empty key without a leading '/'", providers.ErrInvalidKey), nil)
	}
	return nil
}

// begin checks what every operation on one key checks first.
func begin(ctx context.Context, op, key string) error {
	if err := ctx.Err(); err != nil {
		return &providers.Error{Op: op, Key: key, Err: err}
	}
	return checkKey(op, key)
}

func (s *Store) attrs(key string, o *object, withMetadata bool) providers.Attrs {
	a := providers.Attrs{
		Key:          key,
		Version:      o.version,
		Size:         int64(len(o.data)),
		LastModified: o.modified,
		StoreTime:    s.now(),
	}
	if withMetadata {
		a.Metadata = maps.Clone(o.metadata)
	}
	return a
}

// Get implements providers.Store.
func (s *Store) Get(ctx context.Context, key string, maxBytes int64) (*providers.Object, error) {
	if err := begin(ctx, "get", key); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.objects[key]
	if o == nil {
		return nil, providers.Wrap("get", key, providers.ErrNotFound, nil)
	}
	if maxBytes > 0 && int64(len(o.data)) > maxBytes {
		return nil, providers.Wrap("get", key, fmt.Errorf("%w: %d bytes, bound %d", providers.ErrTooLarge, len(o.data), maxBytes), nil)
	}
	return &providers.Object{Attrs: s.attrs(key, o, true), Data: bytes.Clone(o.data)}, nil
}

// Stat implements providers.Store.
func (s *Store) Stat(ctx context.Context, key string) (*providers.Attrs, error) {
	if err := begin(ctx, "stat", key); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.objects[key]
	if o == nil {
		return nil, providers.Wrap("stat", key, providers.ErrNotFound, nil)
	}
	a := s.attrs(key, o, true)
	return &a, nil
}

// put stores a new version of key; s.mu must be held.
func (s *Store) put(key string, data []byte, metadata map[string]string) providers.WriteResult {
	s.last++
	now := s.now()
	o := &object{
		data:     bytes.Clone(data),
		version:  strconv.FormatUint(s.last, 10),
		modified: now,
	}
	if len(metadata) > 0 {
		o.metadata = maps.Clone(metadata)
	}
	s.objects[key] = o
	return providers.WriteResult{Version: o.version, LastModified: now, StoreTime: now}
}

// Create implements providers.Store.
func (s *Store) Create(ctx context.Context, key string, data []byte, metadata map[string]string) (providers.WriteResult, error) {
	if err := begin(ctx, "create", key); err != nil {
		return providers.WriteResult{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if o := s.objects[key]; o != nil {
		return providers.WriteResult{}, providers.Wrap("create", key, fmt.Errorf("%w: exists at version %s", providers.ErrPrecondition, o.version), nil)
	}
	return s.put(key, data, metadata), nil
}

// Replace implements providers.Store.
func (s *Store) Replace(ctx context.Context, key string, data []byte, metadata map[string]string, ifVersion string) (providers.WriteResult, error) {
	if err := begin(ctx, "replace", key); err != nil {
		return providers.WriteResult{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.match("replace", key, ifVersion); err != nil {
		return providers.WriteResult{}, err
	}
	return s.put(key, data, metadata), nil
}

// Delete implements providers.Store.
func (s *Store) Delete(ctx context.Context, key string, ifVersion string) error {
	if err := begin(ctx, "delete", key); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.match("delete", key, ifVersion); err != nil {
		return err
	}
	delete(s.objects, key)
	return nil
}

// match reports ErrPrecondition unless key exists at ifVersion; s.mu must be held.
func (s *Store) match(op, key, ifVersion string) error {
	o := s.objects[key]
	switch {
	case o == nil:
		return providers.Wrap(op, key, fmt.Errorf("%w: no such object", providers.ErrPrecondition), nil)
	case o.version != ifVersion:
		return providers.Wrap(op, key, fmt.Errorf("%w: version is %s, not %q", providers.ErrPrecondition, o.version, ifVersion), nil)
	}
	return nil
}

// List implements providers.Store.
func (s *Store) List(ctx context.Context, prefix, pageToken string, pageSize int) (providers.ListPage, error) {
	if err := ctx.Err(); err != nil {
		return providers.ListPage{}, &providers.Error{Op: "list", Key: prefix, Err: err}
	}
	if pageSize <= 0 {
		pageSize = 1000
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []string
	for k := range s.objects {
		if strings.HasPrefix(k, prefix) && k > pageToken {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var page providers.ListPage
	if len(keys) > pageSize {
		keys = keys[:pageSize]
		page.NextToken = keys[pageSize-1]
	}
	for _, k := range keys {
		page.Objects = append(page.Objects, s.attrs(k, s.objects[k], false))
	}
	return page, nil
}

// Properties implements providers.Store.
func (s *Store) Properties() providers.Properties {
	return providers.Properties{Name: "mem", TimestampGranularity: time.Nanosecond}
}

// As sets a **Store target to s.
func (s *Store) As(target any) bool {
	p, ok := target.(**Store)
	if ok {
		*p = s
	}
	return ok
}

// Close does nothing: the objects stay for anyone else holding the store.
func (s *Store) Close() error { return nil }
