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

// Store is the portable store New returns; the name is kept so that code
// holding a *mem.Store needs no change.
type Store = providers.Bucket

// driver holds objects in memory.
type driver struct {
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
type Option func(*driver)

// WithClock makes the store take LastModified and StoreTime from now instead
// of time.Now.
func WithClock(now func() time.Time) Option { return func(d *driver) { d.now = now } }

// New returns an empty store.
func New(opts ...Option) *Store {
	d := &driver{now: time.Now, objects: map[string]*object{}}
	for _, o := range opts {
		o(d)
	}
	return providers.NewBucket(d)
}

var (
	namedMu sync.Mutex
	named   = map[string]*Store{}
)

func open(_ context.Context, u *url.URL) (*providers.Bucket, string, error) {
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

func (d *driver) attrs(key string, o *object, withMetadata bool) providers.Attrs {
	a := providers.Attrs{
		Key:          key,
		Version:      o.version,
		Size:         int64(len(o.data)),
		LastModified: o.modified,
		StoreTime:    d.now(),
	}
	if withMetadata {
		a.Metadata = maps.Clone(o.metadata)
	}
	return a
}

func (d *driver) Read(_ context.Context, key string, _ int64) (*providers.Reader, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	o := d.objects[key]
	if o == nil {
		return nil, providers.ErrNotFound
	}
	return providers.NewBytesReader(d.attrs(key, o, true), bytes.Clone(o.data)), nil
}

func (d *driver) Stat(_ context.Context, key string) (*providers.Attrs, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	o := d.objects[key]
	if o == nil {
		return nil, providers.ErrNotFound
	}
	a := d.attrs(key, o, true)
	return &a, nil
}

// put stores a new version of key; d.mu must be held.
func (d *driver) put(key string, data []byte, metadata map[string]string) providers.WriteResult {
	d.last++
	now := d.now()
	o := &object{
		data:     bytes.Clone(data),
		version:  strconv.FormatUint(d.last, 10),
		modified: now,
	}
	if len(metadata) > 0 {
		o.metadata = maps.Clone(metadata)
	}
	d.objects[key] = o
	return providers.WriteResult{Version: o.version, LastModified: now, StoreTime: now}
}

func (d *driver) Create(_ context.Context, key string, data []byte, metadata map[string]string) (providers.WriteResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if o := d.objects[key]; o != nil {
		return providers.WriteResult{}, fmt.Errorf("%w: exists at version %s", providers.ErrPrecondition, o.version)
	}
	return d.put(key, data, metadata), nil
}

func (d *driver) Replace(_ context.Context, key string, data []byte, metadata map[string]string, ifVersion string) (providers.WriteResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.match(key, ifVersion); err != nil {
		return providers.WriteResult{}, err
	}
	return d.put(key, data, metadata), nil
}

func (d *driver) Delete(_ context.Context, key string, ifVersion string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.match(key, ifVersion); err != nil {
		return err
	}
	delete(d.objects, key)
	return nil
}

// match reports ErrPrecondition unless key exists at ifVersion; d.mu must be held.
func (d *driver) match(key, ifVersion string) error {
	o := d.objects[key]
	switch {
	case o == nil:
		return fmt.Errorf("%w: no such object", providers.ErrPrecondition)
	case o.version != ifVersion:
		return fmt.Errorf("%w: version is %s, not %q", providers.ErrPrecondition, o.version, ifVersion)
	}
	return nil
}

func (d *driver) List(_ context.Context, prefix, pageToken string, pageSize int) (providers.ListPage, error) {
	if pageSize <= 0 {
		pageSize = 1000
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var keys []string
	for k := range d.objects {
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
		page.Objects = append(page.Objects, d.attrs(k, d.objects[k], false))
	}
	return page, nil
}

// Properties declares nanosecond timestamps and the clouds' key limit, so
// that a key too long for them fails in tests too.
func (d *driver) Properties() providers.Properties {
	return providers.Properties{Name: "mem", TimestampGranularity: time.Nanosecond, MaxKeyBytes: 1024}
}

// As reaches nothing: the Bucket itself answers As(**mem.Store).
func (d *driver) As(any) bool { return false }

// Close does nothing: the objects stay for anyone else holding the store.
func (d *driver) Close() error { return nil }
