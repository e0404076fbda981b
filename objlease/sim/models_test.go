package sim

import (
	"bytes"
	"cmp"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/driver"
	"github.com/objlease/objlease/providers/file"
)

// Store models: each behaves like one real store in the ways the protocol
// can notice, and can produce the failure it exists for (models' own tests
// in models_check_test.go show that it does).
//
//	mem    versions never repeat, exact timestamps: the ideal store
//	s3     versions are the MD5 of the bytes (equal bytes give an earlier
//	       version again); Last-Modified and Date at 1 s; a conditional
//	       write (or delete) racing another on the same key gets 409
//	       ConditionalRequestConflict (ErrConflict); If-Match on a missing
//	       key gets 404 NoSuchKey (ErrPrecondition); half the s3 models (odd
//	       seeds) are S3 Express One Zone directory buckets, which list keys
//	       out of lexical order
//	gcs    generations; about one write a second per object, else 429 or,
//	       at times, 410 Gone (both ErrThrottled); Last-Modified at 1 ms,
//	       Date at 1 s
//	azure  ETags that change on every write; If-None-Match: * on an
//	       existing blob is 409 BlobAlreadyExists, which the azblob store
//	       maps to ErrPrecondition; Last-Modified and Date at 1 s
//	file   the real providers/file store, opened at two roots over one
//	       directory (D/ and D/x/), half the processes at each; its
//	       timestamps are replaced by a wall clock that steps
var modelNames = []string{"mem", "s3", "gcs", "azure", "file"}

// auditLog is the ground truth: every write some store model really
// applied, in the order it applied them.
type auditLog struct {
	mu     sync.Mutex
	writes []applied
}

// operatorKey marks a context whose writes are an operator's, not the
// library's: the audit names them with the action.
type operatorKey struct{}

func operatorCtx(ctx context.Context, action string) context.Context {
	return context.WithValue(ctx, operatorKey{}, action)
}

// record appends one applied write; the caller holds the model's own lock,
// so the log's order is the store's.
func (l *auditLog) record(ctx context.Context, op, key, version string, data []byte, md map[string]string) {
	if a, ok := ctx.Value(operatorKey{}).(string); ok {
		op = a
	}
	l.mu.Lock()
	l.writes = append(l.writes, applied{at: time.Now(), op: op, key: key, version: version, data: bytes.Clone(data), metadata: maps.Clone(md)})
	l.mu.Unlock()
}

// model is an in-memory store driver with the quirks of one real store.
type model struct {
	kind  string
	props providers.Properties
	log   *auditLog
	seed  uint64

	mu sync.Mutex
	// keyRnd is each key's own random stream (see keyRand).
	keyRnd    map[string]*rand.Rand
	objects   map[string]*mobject
	last      uint64
	inflight  map[string]bool      // s3: a conditional write to the key is being applied
	lastWrite map[string]time.Time // gcs: when the key was last written
	skew      time.Duration        // the store's clock against real time
	throttle  bool                 // gcs: throttle writes closer than MinWriteInterval
	express   bool                 // s3: a directory bucket, listing out of key order
}

type mobject struct {
	data     []byte
	metadata map[string]string
	version  string
	modified time.Time
}

// keyRand is key's own random stream (m.mu held). The draws for one key
// come in the order of its calls; calls for different keys arriving at
// one simulated instant come in an order Go's scheduler picks, and one
// stream for all of them made a run differ from its rerun (a commit 12 ms
// later at seed 1).
func (m *model) keyRand(key string) *rand.Rand {
	r := m.keyRnd[key]
	if r == nil {
		h := fnv.New64a()
		h.Write([]byte(key))
		r = rand.New(rand.NewPCG(m.seed^0x5707e, h.Sum64()))
		m.keyRnd[key] = r
	}
	return r
}

func newModel(kind string, seed uint64, log *auditLog) *model {
	m := &model{kind: kind, log: log, seed: seed, keyRnd: map[string]*rand.Rand{},
		objects: map[string]*mobject{}, inflight: map[string]bool{}, lastWrite: map[string]time.Time{}}
	m.skew = time.Duration(rand.New(rand.NewPCG(seed, 0x5707e)).Int64N(int64(2*time.Hour))) - time.Hour
	switch kind {
	case "mem":
		m.props = providers.Properties{Name: "mem", TimestampGranularity: time.Nanosecond}
	case "s3":
		m.props = providers.Properties{Name: "s3", VersionsRepeat: true, TimestampGranularity: time.Second}
		// Decided by the seed, not drawn, so that the draws of every s3
		// model stay as they were.
		m.express = seed%2 == 1
	case "gcs":
		m.props = providers.Properties{Name: "gcs", TimestampGranularity: time.Millisecond, MinWriteInterval: time.Second}
		m.throttle = true
	case "azure":
		m.props = providers.Properties{Name: "azblob", TimestampGranularity: time.Second}
	default:
		panic("unknown store model " + kind)
	}
	return m
}

// storeNow is the store's clock; lastModified and date are what it
// reports of it, at the real store's resolution.
func (m *model) storeNow() time.Time { return time.Now().Add(m.skew) }

func (m *model) stamp(t time.Time) time.Time {
	if m.kind == "mem" {
		return t
	}
	return t.Truncate(m.props.TimestampGranularity)
}

func (m *model) date() time.Time {
	if m.kind == "mem" {
		return m.storeNow()
	}
	return m.storeNow().Truncate(time.Second) // the HTTP Date header
}

func (m *model) version(data []byte) string {
	m.last++
	switch m.kind {
	case "s3":
		sum := md5.Sum(data)
		return hex.EncodeToString(sum[:])
	case "gcs":
		return strconv.FormatUint(1700000000000000+m.last, 10)
	case "azure":
		return fmt.Sprintf("0x8DC%013X", m.last)
	}
	return strconv.FormatUint(m.last, 10)
}

func (m *model) attrs(key string, o *mobject, md bool) providers.Attrs {
	a := providers.Attrs{Key: key, Version: o.version, Size: int64(len(o.data)), LastModified: o.modified, StoreTime: m.date()}
	if md {
		a.Metadata = maps.Clone(o.metadata)
	}
	return a
}

// Read reads an object whole; the Bucket over the model enforces the
// caller's bound.
func (m *model) Read(ctx context.Context, key string, _ int64) (*driver.Reader, error) {
	if err := ctx.Err(); err != nil {
		return nil, &providers.Error{Op: "get", Key: key, Err: err}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	o := m.objects[key]
	if o == nil {
		return nil, providers.Wrap("get", key, providers.ErrNotFound, nil)
	}
	return driver.NewBytesReader(m.attrs(key, o, true), bytes.Clone(o.data)), nil
}

func (m *model) Stat(ctx context.Context, key string) (*providers.Attrs, error) {
	if err := ctx.Err(); err != nil {
		return nil, &providers.Error{Op: "stat", Key: key, Err: err}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	o := m.objects[key]
	if o == nil {
		return nil, providers.Wrap("stat", key, providers.ErrNotFound, nil)
	}
	a := m.attrs(key, o, true)
	return &a, nil
}

// conditional runs one conditional write: check under the lock decides,
// apply applies. S3 takes a while to apply a conditional write, and a
// second one arriving for the same key meanwhile is refused with 409; GCS
// throttles writes to one object closer than a second apart.
func (m *model) conditional(ctx context.Context, op, key string, check func(o *mobject) error, apply func() string, data []byte, md map[string]string) (providers.WriteResult, error) {
	if err := ctx.Err(); err != nil {
		return providers.WriteResult{}, &providers.Error{Op: op, Key: key, Err: err}
	}
	m.mu.Lock()
	switch m.kind {
	case "s3":
		if m.inflight[key] {
			// The refusal takes a round trip too: a caller retrying at once
			// must not spin while the write it raced is being applied.
			d := 1 + time.Duration(m.keyRand(key).Int64N(int64(time.Millisecond)))
			m.mu.Unlock()
			time.Sleep(d)
			return providers.WriteResult{}, providers.Wrap(op, key, providers.ErrConflict, fmt.Errorf("409 ConditionalRequestConflict"))
		}
		m.inflight[key] = true
		d := 1 + time.Duration(m.keyRand(key).Int64N(int64(30*time.Millisecond)))
		m.mu.Unlock()
		time.Sleep(d)
		m.mu.Lock()
		delete(m.inflight, key)
	case "gcs":
		if last, ok := m.lastWrite[key]; ok && m.throttle && time.Since(last) < time.Second && m.keyRand(key).IntN(2) == 0 {
			answer := "429 rateLimitExceeded"
			if m.last%3 == 0 {
				answer = "410 Gone" // GCS's other answer to the same limit
			}
			m.mu.Unlock()
			return providers.WriteResult{}, providers.Wrap(op, key, providers.ErrThrottled, fmt.Errorf("%s: the object is written more than once a second", answer))
		}
	}
	defer m.mu.Unlock()
	if err := check(m.objects[key]); err != nil {
		return providers.WriteResult{}, err
	}
	m.lastWrite[key] = time.Now()
	if apply == nil { // delete
		delete(m.objects, key)
		m.log.record(ctx, op, key, "", nil, nil)
		return providers.WriteResult{}, nil
	}
	now := m.storeNow()
	o := &mobject{data: bytes.Clone(data), metadata: maps.Clone(md), version: m.version(data), modified: m.stamp(now)}
	m.objects[key] = o
	m.log.record(ctx, op, key, o.version, data, md)
	return providers.WriteResult{Version: o.version, LastModified: o.modified, StoreTime: m.date()}, nil
}

func (m *model) exists(op, key string) func(o *mobject) error {
	return func(o *mobject) error {
		if o != nil {
			if m.kind == "azure" {
				// 409 BlobAlreadyExists, mapped as providers/azblob maps it.
				return providers.Wrap(op, key, providers.ErrPrecondition, fmt.Errorf("409 BlobAlreadyExists"))
			}
			return providers.Wrap(op, key, providers.ErrPrecondition, fmt.Errorf("412: exists at version %s", o.version))
		}
		return nil
	}
}

func (m *model) matches(op, key, ifVersion string) func(o *mobject) error {
	return func(o *mobject) error {
		switch {
		case o == nil && m.kind == "s3":
			return providers.Wrap(op, key, providers.ErrPrecondition, fmt.Errorf("404 NoSuchKey"))
		case o == nil:
			return providers.Wrap(op, key, providers.ErrPrecondition, fmt.Errorf("no such object"))
		case o.version != ifVersion:
			return providers.Wrap(op, key, providers.ErrPrecondition, fmt.Errorf("version is %s, not %s", o.version, ifVersion))
		}
		return nil
	}
}

func (m *model) Create(ctx context.Context, key string, data []byte, md map[string]string) (providers.WriteResult, error) {
	return m.conditional(ctx, "create", key, m.exists("create", key), func() string { return "" }, data, md)
}

func (m *model) Replace(ctx context.Context, key string, data []byte, md map[string]string, ifVersion string) (providers.WriteResult, error) {
	return m.conditional(ctx, "replace", key, m.matches("replace", key, ifVersion), func() string { return "" }, data, md)
}

func (m *model) Delete(ctx context.Context, key, ifVersion string) error {
	_, err := m.conditional(ctx, "delete", key, m.matches("delete", key, ifVersion), nil, nil, nil)
	return err
}

func (m *model) List(ctx context.Context, prefix, token string, n int) (providers.ListPage, error) {
	if err := ctx.Err(); err != nil {
		return providers.ListPage{}, &providers.Error{Op: "list", Key: prefix, Err: err}
	}
	if n <= 0 {
		n = 1000
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var keys []string
	for k := range m.objects {
		if strings.HasPrefix(k, prefix) && (m.express || k > token) {
			keys = append(keys, k)
		}
	}
	if m.express {
		// A directory bucket's order: by a hash of the key, then the key;
		// a page resumes after the token's place in that order.
		slices.SortFunc(keys, expressOrder)
		if token != "" {
			keys = slices.DeleteFunc(keys, func(k string) bool { return expressOrder(k, token) <= 0 })
		}
	} else {
		slices.Sort(keys)
	}
	var page providers.ListPage
	if len(keys) > n {
		keys = keys[:n]
		page.NextToken = keys[n-1]
	}
	for _, k := range keys {
		page.Objects = append(page.Objects, m.attrs(k, m.objects[k], false))
	}
	return page, nil
}

// expressOrder orders keys as the s3 model of a directory bucket lists
// them: not lexically.
func expressOrder(a, b string) int {
	ha, hb := fnv.New32a(), fnv.New32a()
	ha.Write([]byte(a))
	hb.Write([]byte(b))
	if c := cmp.Compare(ha.Sum32(), hb.Sum32()); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

func (m *model) Properties() providers.Properties { return m.props }
func (m *model) As(any) bool                      { return false }
func (m *model) Close() error                     { return nil }

// auditStore records every write the driver under it applied, when the
// call returns. No simulated time passes between the real file store
// committing a write and returning (only its clock, before the commit,
// may take a while), and only one goroutine runs at an instant, so the
// order of returns is the order of commits.
type auditStore struct {
	driver.Driver
	log *auditLog
}

func (a *auditStore) Create(ctx context.Context, key string, data []byte, md map[string]string) (providers.WriteResult, error) {
	res, err := a.Driver.Create(ctx, key, data, md)
	if err == nil {
		a.log.record(ctx, "create", key, res.Version, data, md)
	}
	return res, err
}

func (a *auditStore) Replace(ctx context.Context, key string, data []byte, md map[string]string, v string) (providers.WriteResult, error) {
	res, err := a.Driver.Replace(ctx, key, data, md, v)
	if err == nil {
		a.log.record(ctx, "replace", key, res.Version, data, md)
	}
	return res, err
}

func (a *auditStore) Delete(ctx context.Context, key, v string) error {
	err := a.Driver.Delete(ctx, key, v)
	if err == nil {
		a.log.record(ctx, "delete", key, "", nil, nil)
	}
	return err
}

// subStore shows the keys under prefix of a driver as its own keys: the
// file store opened at D/ seen as if opened at D/x/.
type subStore struct {
	driver.Driver
	prefix string
}

func (s *subStore) Read(ctx context.Context, key string, n int64) (*driver.Reader, error) {
	r, err := s.Driver.Read(ctx, s.prefix+key, n)
	if r != nil {
		r.Key = key
	}
	return r, s.unwrap(err)
}

func (s *subStore) Stat(ctx context.Context, key string) (*providers.Attrs, error) {
	a, err := s.Driver.Stat(ctx, s.prefix+key)
	if a != nil {
		a.Key = key
	}
	return a, s.unwrap(err)
}

func (s *subStore) Create(ctx context.Context, key string, data []byte, md map[string]string) (providers.WriteResult, error) {
	r, err := s.Driver.Create(ctx, s.prefix+key, data, md)
	return r, s.unwrap(err)
}

func (s *subStore) Replace(ctx context.Context, key string, data []byte, md map[string]string, v string) (providers.WriteResult, error) {
	r, err := s.Driver.Replace(ctx, s.prefix+key, data, md, v)
	return r, s.unwrap(err)
}

func (s *subStore) Delete(ctx context.Context, key, v string) error {
	return s.unwrap(s.Driver.Delete(ctx, s.prefix+key, v))
}

func (s *subStore) List(ctx context.Context, prefix, token string, n int) (providers.ListPage, error) {
	if token != "" {
		token = s.prefix + token
	}
	p, err := s.Driver.List(ctx, s.prefix+prefix, token, n)
	for i := range p.Objects {
		p.Objects[i].Key = strings.TrimPrefix(p.Objects[i].Key, s.prefix)
	}
	p.NextToken = strings.TrimPrefix(p.NextToken, s.prefix)
	return p, s.unwrap(err)
}

// unwrap names the key as its caller knows it.
func (s *subStore) unwrap(err error) error {
	if pe, ok := err.(*providers.Error); ok {
		c := *pe
		c.Key = strings.TrimPrefix(c.Key, s.prefix)
		return &c
	}
	return err
}

// wallClock is one machine's wall clock: real time plus an offset that
// steps now and then, as when NTP corrects it or an operator sets it.
type wallClock struct {
	rnd   *rand.Rand
	base  time.Time // real time at which steps[0] starts
	steps []wallStep
}

type wallStep struct {
	from   time.Duration // real offset since base
	offset time.Duration
}

func newWallClock(rnd *rand.Rand, base time.Time, maxStep time.Duration) *wallClock {
	c := &wallClock{rnd: rnd, base: base}
	at := time.Duration(0)
	var off time.Duration
	for at < 24*time.Hour {
		c.steps = append(c.steps, wallStep{at, off})
		at += 5*time.Second + time.Duration(rnd.Int64N(int64(time.Minute)))
		off = time.Duration(rnd.Int64N(int64(2*maxStep))) - maxStep
	}
	return c
}

func (c *wallClock) Now() time.Time { return time.Now().Add(offsetAt(c.steps, time.Since(c.base))) }

// offsetAt is the offset in force at real offset r of steps, which are in
// order of from.
func offsetAt(steps []wallStep, r time.Duration) time.Duration {
	i, _ := slices.BinarySearchFunc(steps, r, func(s wallStep, r time.Duration) int {
		if s.from <= r {
			return -1
		}
		return 1
	})
	return steps[max(i-1, 0)].offset
}

// steppedFile gives the real file store's timestamps from a wall clock
// that steps, where the store reports them at all: the store reads the
// machine's clock (time.Now) and has no other time source.
type steppedFile struct {
	driver.Driver
	wall  *wallClock
	mu    *sync.Mutex
	stamp map[string]time.Time // by version: the wall clock when it was written
}

func (s *steppedFile) attrs(a *providers.Attrs) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !a.LastModified.IsZero() {
		if t, ok := s.stamp[a.Version]; ok {
			a.LastModified = t
		}
	}
	if !a.StoreTime.IsZero() {
		a.StoreTime = s.wall.Now()
	}
}

func (s *steppedFile) result(r providers.WriteResult) providers.WriteResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.wall.Now()
	s.stamp[r.Version] = now
	if !r.LastModified.IsZero() {
		r.LastModified = now
	}
	if !r.StoreTime.IsZero() {
		r.StoreTime = now
	}
	return r
}

func (s *steppedFile) Read(ctx context.Context, key string, n int64) (*driver.Reader, error) {
	r, err := s.Driver.Read(ctx, key, n)
	if r != nil {
		s.attrs(&r.Attrs)
	}
	return r, err
}

func (s *steppedFile) Stat(ctx context.Context, key string) (*providers.Attrs, error) {
	a, err := s.Driver.Stat(ctx, key)
	if a != nil {
		s.attrs(a)
	}
	return a, err
}

func (s *steppedFile) Create(ctx context.Context, key string, data []byte, md map[string]string) (providers.WriteResult, error) {
	r, err := s.Driver.Create(ctx, key, data, md)
	if err == nil {
		r = s.result(r)
	}
	return r, err
}

func (s *steppedFile) Replace(ctx context.Context, key string, data []byte, md map[string]string, v string) (providers.WriteResult, error) {
	r, err := s.Driver.Replace(ctx, key, data, md, v)
	if err == nil {
		r = s.result(r)
	}
	return r, err
}

// fileRoots opens the real file store at dir and at dir/x, each seen with
// the keys of dir/x, under one audit log; the returned stores reach the
// same files. The store stamps each write from its clock between checking
// the version and committing the write; that clock is the stepping wall
// clock, and reading it now and then takes a while (as a write's fsync
// does), so that another write can come between the check and the commit
// of one: the store's lock must keep it out.
func fileRoots(dir string, wall *wallClock, log *auditLog, rnd *rand.Rand) (roots []driver.Driver, err error) {
	var mu sync.Mutex
	slow := func() time.Time {
		mu.Lock()
		d := time.Duration(0)
		// Only while the lock is per store root: with the path lock, a
		// second writer would wait for the first polling the lock at
		// intervals the store jitters from math/rand, which would make
		// the run depend on more than its seed. The file store's own
		// tests cover that lock under contention.
		if rnd != nil && rnd.IntN(3) == 0 && pathLockOff() {
			d = 1 + time.Duration(rnd.Int64N(int64(20*time.Millisecond)))
		}
		mu.Unlock()
		time.Sleep(d)
		return wall.Now()
	}
	outer, err := file.NewDriver(dir, file.WithClock(slow))
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir+"/x", 0o755); err != nil {
		return nil, err
	}
	inner, err := file.NewDriver(dir+"/x", file.WithClock(slow))
	if err != nil {
		return nil, err
	}
	var smu sync.Mutex
	stamp := map[string]time.Time{}
	for _, d := range []driver.Driver{&subStore{Driver: outer, prefix: "x/"}, inner} {
		roots = append(roots, &steppedFile{Driver: &auditStore{Driver: d, log: log}, wall: wall, mu: &smu, stamp: stamp})
	}
	return roots, nil
}
