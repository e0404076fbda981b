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
	"github.com/objlease/objlease/providers/driver"
)

func init() {
	if err := providers.Register("mem", open); err != nil {
		panic(err)
	}
}

// store is the driver.Driver that holds objects in memory.
type store struct {
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

// Option configures a memory store.
type Option func(*store)

// WithClock makes the store take LastModified and StoreTime from now instead
// of time.Now.
func WithClock(now func() time.Time) Option { return func(d *store) { d.now = now } }

// New returns an empty store.
func New(opts ...Option) *providers.Bucket { return providers.NewBucket(NewDriver(opts...)) }

// NewDriver returns the driver New wraps, for a caller that puts its own
// layer (such as package faulty) between it and providers.NewBucket.
func NewDriver(opts ...Option) driver.Driver {
	d := &store{now: time.Now, objects: map[string]*object{}}
	for _, o := range opts {
		o(d)
	}
	return d
}

var (
	namedMu sync.Mutex
	named   = map[string]*providers.Bucket{}
)

func open(_ context.Context, u *url.URL, _ providers.OpenOptions) (*providers.Bucket, string, error) {
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

func (d *store) attrs(key string, o *object, withMetadata bool) driver.Attrs {
	a := driver.Attrs{
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

func (d *store) Read(_ context.Context, key string, _ int64) (*driver.Reader, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	o := d.objects[key]
	if o == nil {
		return nil, driver.ErrNotFound
	}
	return driver.NewBytesReader(d.attrs(key, o, true), bytes.Clone(o.data)), nil
}

func (d *store) Stat(_ context.Context, key string) (*driver.Attrs, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	o := d.objects[key]
	if o == nil {
		return nil, driver.ErrNotFound
	}
	a := d.attrs(key, o, true)
	return &a, nil
}

// put stores a new version of key; d.mu must be held.
func (d *store) put(key string, data []byte, metadata map[string]string) driver.WriteResult {
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
	return driver.WriteResult{Version: o.version, LastModified: now, StoreTime: now}
}

func (d *store) Create(_ context.Context, key string, data []byte, metadata map[string]string) (driver.WriteResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if o := d.objects[key]; o != nil {
		return driver.WriteResult{}, fmt.Errorf("%w: exists at version %s", driver.ErrPrecondition, o.version)
	}
	return d.put(key, data, metadata), nil
}

func (d *store) Replace(_ context.Context, key string, data []byte, metadata map[string]string, ifVersion string) (driver.WriteResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.match(key, ifVersion); err != nil {
		return driver.WriteResult{}, err
	}
	return d.put(key, data, metadata), nil
}

func (d *store) Delete(_ context.Context, key string, ifVersion string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.match(key, ifVersion); err != nil {
		return err
	}
	delete(d.objects, key)
	return nil
}

// match reports ErrPrecondition unless key exists at ifVersion; d.mu must be held.
func (d *store) match(key, ifVersion string) error {
	o := d.objects[key]
	switch {
	case o == nil:
		return fmt.Errorf("%w: no such object", driver.ErrPrecondition)
	case o.version != ifVersion:
		return fmt.Errorf("%w: version is %s, not %q", driver.ErrPrecondition, o.version, ifVersion)
	}
	return nil
}

func (d *store) List(_ context.Context, prefix, pageToken string, pageSize int) (driver.ListPage, error) {
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
	var page driver.ListPage
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
func (d *store) Properties() driver.Properties {
	return driver.Properties{Name: "mem", TimestampGranularity: time.Nanosecond, MaxKeyBytes: 1024}
}

// As reaches nothing: the Bucket itself answers As(**providers.Bucket).
func (d *store) As(any) bool { return false }

var _ driver.BucketInspector = (*store)(nil)

// BucketSettings implements driver.BucketInspector: the store keeps
// nothing of an object it overwrites.
func (d *store) BucketSettings(context.Context, string) (driver.BucketSettings, error) {
	return driver.BucketSettings{Versioning: driver.SettingOff, SoftDelete: driver.SettingOff,
		ObjectLock: driver.SettingOff, Lifecycle: driver.SettingOff}, nil
}

// NoncurrentRule implements driver.BucketInspector: there is nothing to
// expire.
func (d *store) NoncurrentRule(string, int) driver.LifecycleRule { return driver.LifecycleRule{} }

// Close does nothing: the objects stay for anyone else holding the store.
func (d *store) Close() error { return nil }
