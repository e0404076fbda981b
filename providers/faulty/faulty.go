// Package faulty is middleware for store drivers: it wraps any
// driver.Driver and injects the failures a real object store produces: latency, refusals before a request reaches the
// store, replies lost after a write was applied, and requests that hang.
// Every decision is drawn from a PCG generator seeded by Config.Seed, so a
// given sequence of requests meets the same faults on every run.
//
// It sits between a driver and the portable Bucket, so that the Bucket's
// checks and metrics run once per request:
//
//	f, err := faulty.New(mem.NewDriver(), faulty.Config{Seed: 1, Default: faulty.Rates{Unknown: 0.1}})
//	store := driver.NewBucket(f)
//
// With Config.CheckThenWrite it is also a test store whose conditional
// writes are not atomic, as some S3-compatible servers' have been: it checks
// the precondition, waits, then writes unconditionally, so that concurrent
// writers can all succeed. probe.Run must call such a store unsafe.
package faulty

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/objlease/objlease/internal/ctxsleep"
	"github.com/objlease/objlease/providers/driver"
)

// ErrInjected marks every error this package makes up, so a test can tell an
// injected fault from a real one with errors.Is.
var ErrInjected = errors.New("injected fault")

// Op is a store operation, named as in driver.Error.Op.
type Op string

// The operations that can be faulted (Get is driver.Driver's Read).
const (
	Get     Op = "get"
	Stat    Op = "stat"
	Create  Op = "create"
	Replace Op = "replace"
	Delete  Op = "delete"
	List    Op = "list"
)

func (op Op) write() bool { return op == Create || op == Replace || op == Delete }

// Rates are the probabilities, each in [0, 1], of the faults one request of
// an operation meets. At most one of the error kinds (Precondition ..
// Stall) is injected per request, so their sum must not exceed 1; Delay is
// drawn independently and may come on top of any of them.
type Rates struct {
	// Precondition, Conflict, Throttled and Unknown refuse the request
	// before it reaches the store: nothing is applied, and the error
	// matches driver.ErrPrecondition, ErrConflict, ErrThrottled or
	// ErrUnknownOutcome (for a read: it failed). Precondition and Conflict
	// apply to writes only.
	Precondition, Conflict, Throttled, Unknown float64
	// LostReply applies a write and then reports driver.ErrUnknownOutcome
	// as if the reply had been lost. Writes only.
	LostReply float64
	// Stall holds the request until its context ends (it then fails
	// without being applied) or Driver.ReleaseStalls lets it through.
	Stall float64
	// Delay adds latency drawn uniformly from [Config.MinDelay,
	// Config.MaxDelay], split at random between the way to the store and
	// the way back.
	Delay float64
}

func (r Rates) sum() float64 {
	return r.Precondition + r.Conflict + r.Throttled + r.Unknown + r.LostReply + r.Stall
}

// Config says which faults to inject.
type Config struct {
	// Seed seeds the generator every decision is drawn from.
	Seed uint64
	// Default applies to operations that Ops does not list.
	Default Rates
	// Ops overrides Default per operation.
	Ops map[Op]Rates
	// MinDelay and MaxDelay bound injected latency.
	MinDelay, MaxDelay time.Duration
	// Sleep waits for d or until ctx ends, returning ctx's error in that
	// case. A simulation passes its own clock's sleep; nil means real time.
	Sleep func(ctx context.Context, d time.Duration) error
	// CheckThenWrite, if positive, makes the store enforce the
	// preconditions of Create, Replace and Delete itself, and not
	// atomically: it reads the object's current version (under a lock),
	// refuses the write with driver.ErrPrecondition if the condition
	// does not hold, releases the lock, waits CheckThenWrite (with Sleep),
	// then writes whatever is there unconditionally (a Delete of an object
	// that is gone by then succeeds, as S3's DELETE does). One request at a
	// time it behaves correctly; concurrent conditional writes on one
	// object can all succeed. A test store for probe.Run: nothing that
	// wants correct writes should set it. The wrapped store must not be
	// written by anything else meanwhile.
	CheckThenWrite time.Duration
}

// Kind is a kind of injected fault, as counted by Driver.Counts.
type Kind int

// Fault kinds.
const (
	KindPrecondition Kind = iota
	KindConflict
	KindThrottled
	KindUnknown
	KindLostReply
	KindStall
	KindDelay
	numKinds
)

var kindNames = [numKinds]string{"precondition", "conflict", "throttled", "unknown-outcome", "lost-reply", "stall", "delay"}

func (k Kind) String() string {
	if k < 0 || k >= numKinds {
		return fmt.Sprintf("Kind(%d)", int(k))
	}
	return kindNames[k]
}

// Kinds lists every fault kind, in a fixed order for reports.
func Kinds() []Kind {
	k := make([]Kind, numKinds)
	for i := range k {
		k[i] = Kind(i)
	}
	return k
}

// Counts is how many faults of each kind were injected.
type Counts [numKinds]int64

// Add returns the element-wise sum of c and o.
func (c Counts) Add(o Counts) Counts {
	for i := range c {
		c[i] += o[i]
	}
	return c
}

// Total is the number of faults injected, latency included.
func (c Counts) Total() int64 {
	var n int64
	for _, v := range c {
		n += v
	}
	return n
}

// Driver is a driver.Driver that injects faults into the requests it
// passes on to the driver it wraps, and counts them. It passes on the
// wrapped driver's key checks (driver.KeyChecker), bucket settings
// (driver.BucketInspector), properties, As and Close. It is safe for concurrent use.
type Driver struct {
	inner driver.Driver
	cfg   Config

	mu       sync.Mutex
	rnd      *rand.Rand
	counts   Counts
	requests int64
	release  chan struct{} // closed by ReleaseStalls; replaced afterwards

	// wmu orders CheckThenWrite's reads and unconditional writes.
	wmu sync.Mutex
}

var (
	_ driver.Driver          = (*Driver)(nil)
	_ driver.KeyChecker      = (*Driver)(nil)
	_ driver.BucketInspector = (*Driver)(nil)
)

// New wraps inner. It returns an error naming the first rate that is out
// of range, or a write-only fault configured for a read.
func New(inner driver.Driver, cfg Config) (*Driver, error) {
	if inner == nil {
		return nil, errors.New("faulty: nil driver")
	}
	check := func(name string, r Rates, write bool) error {
		for _, p := range []float64{r.Precondition, r.Conflict, r.Throttled, r.Unknown, r.LostReply, r.Stall, r.Delay} {
			if !(p >= 0 && p <= 1) { // NaN included
				return fmt.Errorf("faulty: %s: rate %v is not in [0, 1]", name, p)
			}
		}
		if s := r.sum(); s > 1+1e-9 {
			return fmt.Errorf("faulty: %s: error rates add up to %v, more than 1", name, s)
		}
		if !write && (r.Precondition > 0 || r.Conflict > 0 || r.LostReply > 0) {
			return fmt.Errorf("faulty: %s: Precondition, Conflict and LostReply apply to writes only", name)
		}
		return nil
	}
	// Default's write-only rates simply do not apply to reads.
	if err := check("Default", cfg.Default, true); err != nil {
		return nil, err
	}
	for op, r := range cfg.Ops {
		switch op {
		case Get, Stat, Create, Replace, Delete, List:
		default:
			return nil, fmt.Errorf("faulty: unknown operation %q", op)
		}
		if err := check(string(op), r, op.write()); err != nil {
			return nil, err
		}
	}
	if cfg.CheckThenWrite < 0 {
		return nil, fmt.Errorf("faulty: CheckThenWrite %v is negative", cfg.CheckThenWrite)
	}
	if cfg.MinDelay < 0 || cfg.MaxDelay < cfg.MinDelay {
		return nil, fmt.Errorf("faulty: delay bounds [%v, %v] are not an interval of non-negative durations", cfg.MinDelay, cfg.MaxDelay)
	}
	if cfg.Sleep == nil {
		cfg.Sleep = ctxsleep.For
	}
	return &Driver{
		inner:   inner,
		cfg:     cfg,
		rnd:     rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		release: make(chan struct{}),
	}, nil
}

// Counts returns how many faults of each kind have been injected so far.
func (s *Driver) Counts() Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts
}

// Requests returns how many requests have passed through s.
func (s *Driver) Requests() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// ReleaseStalls lets every request stalled so far go on to the store.
func (s *Driver) ReleaseStalls() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.release)
	s.release = make(chan struct{})
}

// plan is what happens to one request.
type plan struct {
	fault         Kind // numKinds: no error fault
	before, after time.Duration
	release       chan struct{}
}

// decide draws one request's fate. It always draws the same number of
// values, so the n-th request's fate does not depend on earlier outcomes.
func (s *Driver) decide(op Op) plan {
	r, ok := s.cfg.Ops[op]
	if !ok {
		r = s.cfg.Default
	}
	if !op.write() {
		r.Precondition, r.Conflict, r.LostReply = 0, 0, 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	roll, delayRoll, amount, split := s.rnd.Float64(), s.rnd.Float64(), s.rnd.Float64(), s.rnd.Float64()
	p := plan{fault: numKinds, release: s.release}
	for i, rate := range [...]float64{r.Precondition, r.Conflict, r.Throttled, r.Unknown, r.LostReply, r.Stall} {
		if roll < rate {
			p.fault = Kind(i)
			if p.fault != KindLostReply { // counted once the write succeeded
				s.counts[i]++
			}
			break
		}
		roll -= rate
	}
	if delayRoll < r.Delay {
		d := s.cfg.MinDelay + time.Duration(amount*float64(s.cfg.MaxDelay-s.cfg.MinDelay))
		p.before = time.Duration(split * float64(d))
		p.after = d - p.before
		s.counts[KindDelay]++
	}
	return p
}

func injected(sentinel error, what string) error {
	return fmt.Errorf("%w: %w: %s", sentinel, ErrInjected, what)
}

// do runs one request, call, through its plan.
func (s *Driver) do(ctx context.Context, op Op, call func() error) error {
	p := s.decide(op)
	if p.before > 0 {
		if err := s.cfg.Sleep(ctx, p.before); err != nil {
			return s.cut(ctx, op, err)
		}
	}
	switch p.fault {
	case KindPrecondition:
		return injected(driver.ErrPrecondition, "refused before reaching the store")
	case KindConflict:
		return injected(driver.ErrConflict, "refused before reaching the store")
	case KindThrottled:
		return injected(driver.ErrThrottled, "refused before reaching the store")
	case KindUnknown:
		return injected(driver.ErrUnknownOutcome, "request lost before reaching the store")
	case KindStall:
		select {
		case <-ctx.Done():
			return s.cut(ctx, op, context.Cause(ctx))
		case <-p.release:
		}
	}
	err := call()
	if p.after > 0 {
		if serr := s.cfg.Sleep(ctx, p.after); serr != nil && err == nil {
			// The request was applied; only its reply is cut short.
			return s.cut(ctx, op, serr)
		}
	}
	if p.fault == KindLostReply && err == nil {
		s.mu.Lock()
		s.counts[KindLostReply]++
		s.mu.Unlock()
		return injected(driver.ErrUnknownOutcome, "reply lost after the write was applied")
	}
	return err
}

// cut is the error of a request its context ended: a write's outcome is
// unknown to the caller, as with a real store that timed out.
func (s *Driver) cut(ctx context.Context, op Op, cause error) error {
	if cause == nil {
		cause = context.Cause(ctx)
	}
	if op.write() {
		return fmt.Errorf("%w: %w", driver.ErrUnknownOutcome, cause)
	}
	return cause
}

// Read passes a read on as operation Get.
func (s *Driver) Read(ctx context.Context, key string, maxBytes int64) (r *driver.Reader, err error) {
	err = s.do(ctx, Get, func() error { r, err = s.inner.Read(ctx, key, maxBytes); return err })
	if err != nil {
		return nil, err
	}
	return r, nil
}

// Stat passes a Stat on.
func (s *Driver) Stat(ctx context.Context, key string) (a *driver.Attrs, err error) {
	err = s.do(ctx, Stat, func() error { a, err = s.inner.Stat(ctx, key); return err })
	if err != nil {
		return nil, err
	}
	return a, nil
}

// Create passes a Create on, or with CheckThenWrite writes non-atomically.
func (s *Driver) Create(ctx context.Context, key string, data []byte, metadata map[string]string) (res driver.WriteResult, err error) {
	err = s.do(ctx, Create, func() error { res, err = s.create(ctx, key, data, metadata); return err })
	if err != nil {
		return driver.WriteResult{}, err
	}
	return res, nil
}

// Replace passes a Replace on, or with CheckThenWrite writes non-atomically.
func (s *Driver) Replace(ctx context.Context, key string, data []byte, metadata map[string]string, ifVersion string) (res driver.WriteResult, err error) {
	err = s.do(ctx, Replace, func() error { res, err = s.replace(ctx, key, data, metadata, ifVersion); return err })
	if err != nil {
		return driver.WriteResult{}, err
	}
	return res, nil
}

// Delete passes a Delete on, or with CheckThenWrite deletes non-atomically.
func (s *Driver) Delete(ctx context.Context, key string, ifVersion string) error {
	return s.do(ctx, Delete, func() error { return s.delete(ctx, key, ifVersion) })
}

// List passes a List on.
func (s *Driver) List(ctx context.Context, prefix, pageToken string, pageSize int) (page driver.ListPage, err error) {
	err = s.do(ctx, List, func() error { page, err = s.inner.List(ctx, prefix, pageToken, pageSize); return err })
	if err != nil {
		return driver.ListPage{}, err
	}
	return page, nil
}

// Properties reports the wrapped driver's properties.
func (s *Driver) Properties() driver.Properties { return s.inner.Properties() }

// As sets *target to s if target is a **Driver, and otherwise asks the
// wrapped driver.
func (s *Driver) As(target any) bool {
	if p, ok := target.(**Driver); ok {
		*p = s
		return true
	}
	return s.inner.As(target)
}

// Close closes the wrapped driver.
func (s *Driver) Close() error { return s.inner.Close() }

// BucketSettings passes the call to the wrapped driver, if it reads its
// bucket's settings (driver.BucketInspector); otherwise every setting is
// unknown. No fault is injected.
func (s *Driver) BucketSettings(ctx context.Context, prefix string) (driver.BucketSettings, error) {
	if bi, ok := s.inner.(driver.BucketInspector); ok {
		return bi.BucketSettings(ctx, prefix)
	}
	return driver.BucketSettings{Notes: []string{fmt.Sprintf("the %s store reports no bucket settings", s.inner.Properties().Name)}}, nil
}

// NoncurrentRule is the wrapped driver's, or none.
func (s *Driver) NoncurrentRule(prefix string, days int) driver.LifecycleRule {
	if bi, ok := s.inner.(driver.BucketInspector); ok {
		return bi.NoncurrentRule(prefix, days)
	}
	return driver.LifecycleRule{}
}

// CheckKey applies the wrapped driver's own key check, if it has one.
func (s *Driver) CheckKey(key string) error {
	if kc, ok := s.inner.(driver.KeyChecker); ok {
		return kc.CheckKey(key)
	}
	return nil
}

// create, replace and delete pass a write to the wrapped store, or with
// CheckThenWrite check its precondition here and write it non-atomically.
func (s *Driver) create(ctx context.Context, key string, data []byte, metadata map[string]string) (driver.WriteResult, error) {
	if s.cfg.CheckThenWrite <= 0 {
		return s.inner.Create(ctx, key, data, metadata)
	}
	if err := s.check(ctx, key, func(cur string) error {
		if cur != "" {
			return errors.New("the object exists")
		}
		return nil
	}); err != nil {
		return driver.WriteResult{}, err
	}
	return s.put(ctx, key, data, metadata)
}

func (s *Driver) replace(ctx context.Context, key string, data []byte, metadata map[string]string, ifVersion string) (driver.WriteResult, error) {
	if s.cfg.CheckThenWrite <= 0 {
		return s.inner.Replace(ctx, key, data, metadata, ifVersion)
	}
	if err := s.check(ctx, key, matches(ifVersion)); err != nil {
		return driver.WriteResult{}, err
	}
	return s.put(ctx, key, data, metadata)
}

func (s *Driver) delete(ctx context.Context, key, ifVersion string) error {
	if s.cfg.CheckThenWrite <= 0 {
		return s.inner.Delete(ctx, key, ifVersion)
	}
	if err := s.check(ctx, key, matches(ifVersion)); err != nil {
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	cur, err := s.current(ctx, key)
	if err != nil || cur == "" {
		return err
	}
	return s.inner.Delete(ctx, key, cur)
}

func matches(ifVersion string) func(cur string) error {
	return func(cur string) error {
		switch cur {
		case "":
			return errors.New("the object does not exist")
		case ifVersion:
			return nil
		}
		return fmt.Errorf("the object is at version %q, not %q", cur, ifVersion)
	}
}

// check reads the current version under the lock and applies ok to it,
// then waits CheckThenWrite without the lock: the window in which another
// writer's check passes too.
func (s *Driver) check(ctx context.Context, key string, ok func(cur string) error) error {
	s.wmu.Lock()
	cur, err := s.current(ctx, key)
	s.wmu.Unlock()
	if err != nil {
		return err
	}
	if err := ok(cur); err != nil {
		return fmt.Errorf("%w: %w (checked before a non-atomic write)", driver.ErrPrecondition, err)
	}
	return s.cfg.Sleep(ctx, s.cfg.CheckThenWrite)
}

// current is key's version, or "" if there is no object.
func (s *Driver) current(ctx context.Context, key string) (string, error) {
	a, err := s.inner.Stat(ctx, key)
	switch {
	case errors.Is(err, driver.ErrNotFound):
		return "", nil
	case err != nil:
		return "", err
	}
	return a.Version, nil
}

// put writes the object whatever is there.
func (s *Driver) put(ctx context.Context, key string, data []byte, metadata map[string]string) (driver.WriteResult, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	cur, err := s.current(ctx, key)
	if err != nil {
		return driver.WriteResult{}, err
	}
	if cur == "" {
		return s.inner.Create(ctx, key, data, metadata)
	}
	return s.inner.Replace(ctx, key, data, metadata, cur)
}
