// Package faulty wraps any providers.Store and injects the failures a real
// object store produces: latency, refusals before a request reaches the
// store, replies lost after a write was applied, and requests that hang.
// Every decision is drawn from a PCG generator seeded by Config.Seed, so a
// given sequence of requests meets the same faults on every run.
//
// With Config.CheckThenWrite it is also a test store whose conditional
// writes are not atomic, as some S3-compatible servers' have been: it checks
// the precondition, waits, then writes unconditionally, so that concurrent
// writers can all succeed. objlease.Probe must call such a store unsafe.
package faulty

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/objlease/objlease/providers"
)

// ErrInjected marks every error this package makes up, so a test can tell an
// injected fault from a real one with errors.Is.
var ErrInjected = errors.New("injected fault")

// Op is a store operation, named as in providers.Error.Op.
type Op string

// The operations of providers.Store that can be faulted.
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
	// matches providers.ErrPrecondition, ErrConflict, ErrThrottled or
	// ErrUnknownOutcome (for a read: it failed). Precondition and Conflict
	// apply to writes only.
	Precondition, Conflict, Throttled, Unknown float64
	// LostReply applies a write and then reports providers.ErrUnknownOutcome
	// as if the reply had been lost. Writes only.
	LostReply float64
	// Stall holds the request until its context ends (it then fails
	// without being applied) or Store.ReleaseStalls lets it through.
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
	// refuses the write with providers.ErrPrecondition if the condition
	// does not hold, releases the lock, waits CheckThenWrite (with Sleep),
	// then writes whatever is there unconditionally (a Delete of an object
	// that is gone by then succeeds, as S3's DELETE does). One request at a
	// time it behaves correctly; concurrent conditional writes on one
	// object can all succeed. A test store for objlease.Probe: nothing that
	// wants correct writes should set it. The wrapped store must not be
	// written by anything else meanwhile.
	CheckThenWrite time.Duration
}

// Kind is a kind of injected fault, as counted by Store.Counts.
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

// Store is a providers.Store that injects faults into the requests it
// passes on: a *providers.Bucket over a driver that injects them, with the
// fault counters alongside. It is safe for concurrent use.
type Store struct {
	*providers.Bucket
	d *driver
}

// driver draws and injects the faults, then passes requests to inner.
type driver struct {
	inner providers.Store
	cfg   Config

	mu       sync.Mutex
	rnd      *rand.Rand
	counts   Counts
	requests int64
	release  chan struct{} // closed by ReleaseStalls; replaced afterwards

	// wmu orders CheckThenWrite's reads and unconditional writes.
	wmu sync.Mutex
}

// New wraps inner. It returns an error naming the first rate that is out
// of range, or a write-only fault configured for a read.
func New(inner providers.Store, cfg Config) (*Store, error) {
	if inner == nil {
		return nil, errors.New("faulty: nil store")
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
		cfg.Sleep = realSleep
	}
	d := &driver{
		inner:   inner,
		cfg:     cfg,
		rnd:     rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		release: make(chan struct{}),
	}
	return &Store{Bucket: providers.NewBucket(d), d: d}, nil
}

func realSleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Counts returns how many faults of each kind have been injected so far.
func (s *Store) Counts() Counts {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	return s.d.counts
}

// Requests returns how many requests have passed through s.
func (s *Store) Requests() int64 {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	return s.d.requests
}

// ReleaseStalls lets every request stalled so far go on to the store.
func (s *Store) ReleaseStalls() {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	close(s.d.release)
	s.d.release = make(chan struct{})
}

// plan is what happens to one request.
type plan struct {
	fault         Kind // numKinds: no error fault
	before, after time.Duration
	release       chan struct{}
}

// decide draws one request's fate. It always draws the same number of
// values, so the n-th request's fate does not depend on earlier outcomes.
func (s *driver) decide(op Op) plan {
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
func (s *driver) do(ctx context.Context, op Op, call func() error) error {
	p := s.decide(op)
	if p.before > 0 {
		if err := s.cfg.Sleep(ctx, p.before); err != nil {
			return s.cut(ctx, op, err)
		}
	}
	switch p.fault {
	case KindPrecondition:
		return injected(providers.ErrPrecondition, "refused before reaching the store")
	case KindConflict:
		return injected(providers.ErrConflict, "refused before reaching the store")
	case KindThrottled:
		return injected(providers.ErrThrottled, "refused before reaching the store")
	case KindUnknown:
		return injected(providers.ErrUnknownOutcome, "request lost before reaching the store")
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
		return injected(providers.ErrUnknownOutcome, "reply lost after the write was applied")
	}
	return err
}

// cut is the error of a request its context ended: a write's outcome is
// unknown to the caller, as with a real store that timed out.
func (s *driver) cut(ctx context.Context, op Op, cause error) error {
	if cause == nil {
		cause = ctx.Err()
	}
	if op.write() {
		return fmt.Errorf("%w: %w", providers.ErrUnknownOutcome, cause)
	}
	return cause
}

func (s *driver) Read(ctx context.Context, key string, maxBytes int64) (r *providers.Reader, err error) {
	err = s.do(ctx, Get, func() error {
		o, err := s.inner.Get(ctx, key, maxBytes)
		if err == nil {
			r = providers.NewBytesReader(o.Attrs, o.Data)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (s *driver) Stat(ctx context.Context, key string) (a *providers.Attrs, err error) {
	err = s.do(ctx, Stat, func() error { a, err = s.inner.Stat(ctx, key); return err })
	if err != nil {
		return nil, err
	}
	return a, nil
}

func (s *driver) Create(ctx context.Context, key string, data []byte, metadata map[string]string) (res providers.WriteResult, err error) {
	err = s.do(ctx, Create, func() error { res, err = s.create(ctx, key, data, metadata); return err })
	if err != nil {
		return providers.WriteResult{}, err
	}
	return res, nil
}

func (s *driver) Replace(ctx context.Context, key string, data []byte, metadata map[string]string, ifVersion string) (res providers.WriteResult, err error) {
	err = s.do(ctx, Replace, func() error { res, err = s.replace(ctx, key, data, metadata, ifVersion); return err })
	if err != nil {
		return providers.WriteResult{}, err
	}
	return res, nil
}

func (s *driver) Delete(ctx context.Context, key string, ifVersion string) error {
	return s.do(ctx, Delete, func() error { return s.delete(ctx, key, ifVersion) })
}

func (s *driver) List(ctx context.Context, prefix, pageToken string, pageSize int) (page providers.ListPage, err error) {
	err = s.do(ctx, List, func() error { page, err = s.inner.List(ctx, prefix, pageToken, pageSize); return err })
	if err != nil {
		return providers.ListPage{}, err
	}
	return page, nil
}

// Properties reports the wrapped store's properties.
func (s *driver) Properties() providers.Properties { return s.inner.Properties() }

// As reaches the wrapped store's client.
func (s *driver) As(target any) bool { return s.inner.As(target) }

// Close closes the wrapped store.
func (s *driver) Close() error { return s.inner.Close() }

// create, replace and delete pass a write to the wrapped store, or with
// CheckThenWrite check its precondition here and write it non-atomically.
func (s *driver) create(ctx context.Context, key string, data []byte, metadata map[string]string) (providers.WriteResult, error) {
	if s.cfg.CheckThenWrite <= 0 {
		return s.inner.Create(ctx, key, data, metadata)
	}
	if err := s.check(ctx, key, func(cur string) error {
		if cur != "" {
			return errors.New("the object exists")
		}
		return nil
	}); err != nil {
		return providers.WriteResult{}, err
	}
	return s.put(ctx, key, data, metadata)
}

func (s *driver) replace(ctx context.Context, key string, data []byte, metadata map[string]string, ifVersion string) (providers.WriteResult, error) {
	if s.cfg.CheckThenWrite <= 0 {
		return s.inner.Replace(ctx, key, data, metadata, ifVersion)
	}
	if err := s.check(ctx, key, matches(ifVersion)); err != nil {
		return providers.WriteResult{}, err
	}
	return s.put(ctx, key, data, metadata)
}

func (s *driver) delete(ctx context.Context, key, ifVersion string) error {
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
func (s *driver) check(ctx context.Context, key string, ok func(cur string) error) error {
	s.wmu.Lock()
	cur, err := s.current(ctx, key)
	s.wmu.Unlock()
	if err != nil {
		return err
	}
	if err := ok(cur); err != nil {
		return fmt.Errorf("%w: %w (checked before a non-atomic write)", providers.ErrPrecondition, err)
	}
	return s.cfg.Sleep(ctx, s.cfg.CheckThenWrite)
}

// current is key's version, or "" if there is no object.
func (s *driver) current(ctx context.Context, key string) (string, error) {
	a, err := s.inner.Stat(ctx, key)
	switch {
	case errors.Is(err, providers.ErrNotFound):
		return "", nil
	case err != nil:
		return "", err
	}
	return a.Version, nil
}

// put writes the object whatever is there.
func (s *driver) put(ctx context.Context, key string, data []byte, metadata map[string]string) (providers.WriteResult, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	cur, err := s.current(ctx, key)
	if err != nil {
		return providers.WriteResult{}, err
	}
	if cur == "" {
		return s.inner.Create(ctx, key, data, metadata)
	}
	return s.inner.Replace(ctx, key, data, metadata, cur)
}
