package gocronlease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/tick"
	"github.com/objlease/objlease/providers"
)

// LockerConfig says which jobs run once per tick, and of which period.
type LockerConfig struct {
	// Prefix is put before a job's name to make its lease's key:
	// "leases/jobs/" gives the job "report" the lease
	// "leases/jobs/report" and the tick mark "leases/jobs/report.tick".
	Prefix string
	// Period is the tick of every job not named in Periods: each job runs
	// at most once per period, aligned to the Unix epoch (see package
	// tick). Zero: such jobs are only kept from running on two schedulers
	// at once, and a fast one may run twice for one scheduled time.
	Period time.Duration
	// Periods gives the period of named jobs (a job's name is its lock
	// key: gocron.WithName, or the function's name). A zero period here
	// exempts the job from Period.
	Periods map[string]time.Duration
}

// Locker is a gocron.Locker: each run of a job takes a lease of its own,
// at LockerConfig.Prefix + the job's name, and releases it when the run
// ends. With a period for the job, a run is refused (ErrTickDone) for a
// tick already done, and its tick is marked done when it ends (see the
// package doc). A Locker is safe for concurrent use; one per scheduler.
type Locker struct {
	store providers.Store
	sess  *objlease.Session
	opts  objlease.Options
	cfg   LockerConfig
	log   *slog.Logger
	ttl   time.Duration

	mu      sync.Mutex
	closed  bool
	clients map[string]*objlease.Client
	running map[string]*run          // job name → its run; nil while Lock is under way
	byCtx   map[context.Context]*run // the job's context → its run, for Wrap
}

var _ gocron.Locker = (*Locker)(nil)

// NewLocker returns a Locker whose leases are in store, taken with opts
// (TTL, Holder...; the lease is renewed in the background for as long as
// the run lasts), on a session of its own made with so (its clock and
// logger; the zero value: the real clock, no logs). It sends no request.
func NewLocker(store providers.Store, so objlease.SessionOptions, opts objlease.Options, cfg LockerConfig) (*Locker, error) {
	if cfg.Period < 0 {
		return nil, fmt.Errorf("%w: gocronlease: period %v is negative", objlease.ErrInvalidOptions, cfg.Period)
	}
	for name, p := range cfg.Periods {
		if p < 0 {
			return nil, fmt.Errorf("%w: gocronlease: period %v of job %q is negative", objlease.ErrInvalidOptions, p, name)
		}
	}
	sess, err := objlease.NewSession(store, so)
	if err != nil {
		return nil, err
	}
	c, err := sess.Client(cfg.Prefix+"job", opts) // validates opts; sends no request
	if err != nil {
		return nil, err
	}
	return &Locker{
		store: store, sess: sess, opts: opts, cfg: cfg,
		log: sess.Logger(), ttl: c.Options().TTL,
		clients: map[string]*objlease.Client{},
		running: map[string]*run{},
		byCtx:   map[context.Context]*run{},
	}, nil
}

// period is the tick period of the job named key (0: none).
func (l *Locker) period(key string) time.Duration {
	if p, ok := l.cfg.Periods[key]; ok {
		return p
	}
	return l.cfg.Period
}

// client returns the client of the job named key, made at its first run:
// with a period, its tokens stay above the token of the job's tick mark
// (tick.Floor), so that a lease record deleted or recreated by hand does
// not start again below the mark, where no run could mark a tick done.
func (l *Locker) client(ctx context.Context, key string) (*objlease.Client, error) {
	l.mu.Lock()
	c := l.clients[key]
	l.mu.Unlock()
	if c != nil {
		return c, nil
	}
	opts := l.opts
	if l.period(key) > 0 {
		floor, err := tick.Floor(ctx, l.store, l.cfg.Prefix+key)
		if err != nil {
			return nil, err
		}
		if floor > 0 && (opts.MinToken == nil || *opts.MinToken < floor) {
			opts.MinToken = &floor
		}
	}
	c, err := l.sess.Client(l.cfg.Prefix+key, opts)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.clients[key] = c
	l.mu.Unlock()
	return c, nil
}

// Lock takes the lease of the job named key for one run, with one attempt
// (objlease.Client.TryAcquire): if another scheduler's run holds it, or
// one of this scheduler's, the error matches objlease.ErrHeld and gocron
// skips the run. A lease left held by a scheduler that died is taken over
// by the first Lock after it has been seen unchanged for its TTL (× (1 +
// DriftBound)): the Locker remembers what it saw from one trigger to the
// next. With a period, Lock then judges the tick by the store's time of
// the acquisition and, if the tick's mark says it is done, releases the
// lease and returns an error matching ErrTickDone.
func (l *Locker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, ErrClosed
	}
	if _, ok := l.running[key]; ok {
		l.mu.Unlock()
		return nil, fmt.Errorf("job %q: %w: a run of it on this scheduler holds it", key, objlease.ErrHeld)
	}
	l.running[key] = nil
	l.mu.Unlock()

	r, err := l.lock(ctx, key)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		delete(l.running, key)
		return nil, err
	}
	l.running[key] = r
	if reflect.TypeOf(ctx).Comparable() {
		l.byCtx[ctx] = r
	}
	return &lock{l: l, key: key, ctx: ctx, r: r}, nil
}

func (l *Locker) lock(ctx context.Context, key string) (*run, error) {
	c, err := l.client(ctx, key)
	if err != nil {
		return nil, err
	}
	lease, err := c.TryAcquire(ctx)
	if err != nil {
		l.log.DebugContext(ctx, "gocronlease: not running the job", "job", key, "error", err)
		return nil, err
	}
	r := &run{lease: lease}
	period := l.period(key)
	if period == 0 {
		return r, nil
	}
	refuse := func(err error) (*run, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.ttl)
		defer cancel()
		if rerr := lease.Release(rctx); rerr != nil {
			l.log.WarnContext(ctx, "gocronlease: could not release the lease; it expires on its own", "job", key, "token", lease.Token(), "error", rerr)
		}
		return nil, err
	}
	at, err := tick.Now(ctx, l.store, lease)
	if err != nil {
		return refuse(err)
	}
	r.tick = tick.Of(at, period)
	marks, err := tick.Read(ctx, l.store, lease.Key())
	if err != nil {
		return refuse(err)
	}
	if done := marks.Find(r.tick); done != nil {
		l.log.DebugContext(ctx, "gocronlease: tick already done", "job", key, "tick", r.tick, "done_by", done.Holder, "done_token", done.Token)
		return refuse(fmt.Errorf("job %q, tick %s: %w (token %d, %s)", key, r.tick, ErrTickDone, done.Token, done.Holder))
	}
	if err := marks.Check(lease); err != nil {
		return refuse(err)
	}
	return r, nil
}

// Wrap returns a task function for gocron.NewTask that calls job under the
// lease Lock took for this run of it: job's context ends when gocron's
// does or when the lease is lost, and carries the lease and the tick
// (TokenFrom, TickFrom, LeaseFrom). It finds the run by the context gocron
// passes both to Lock and to the task, the job's own: a task given a
// context of the caller's (a context.Context among gocron.NewTask's
// parameters) finds none, and returns an error matching ErrNoLease without
// calling job, as does a task whose job is not locked by this Locker.
func (l *Locker) Wrap(job func(ctx context.Context) error) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		var r *run
		if reflect.TypeOf(ctx).Comparable() {
			l.mu.Lock()
			r = l.byCtx[ctx]
			l.mu.Unlock()
		}
		if r == nil {
			return ErrNoLease
		}
		return withLease(ctx, r, job)
	}
}

// Close releases the leases of runs still under way (their contexts end)
// and refuses every Lock from then on. Shut the scheduler down first, so
// that its runs end with their own Unlock.
func (l *Locker) Close(ctx context.Context) error {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	return l.sess.Close(ctx)
}

// lock is one run's hold of its job's lease.
type lock struct {
	l    *Locker
	key  string
	ctx  context.Context
	r    *run
	once sync.Once
}

// Unlock ends the run: with a period, it marks the run's tick done if
// the lease is still held (a write fenced with its token), and then
// releases the lease, keeping its token. A lease lost during the run
// leaves the tick open, and Unlock returns why. It writes even after ctx
// (gocron's job context) has ended, for up to a TTL.
func (k *lock) Unlock(ctx context.Context) error {
	var err error
	k.once.Do(func() { err = k.unlock(ctx) })
	return err
}

func (k *lock) unlock(ctx context.Context) error {
	l, lease := k.l, k.r.lease
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.ttl)
	defer cancel()
	defer func() {
		l.mu.Lock()
		delete(l.running, k.key)
		if l.byCtx[k.ctx] == k.r {
			delete(l.byCtx, k.ctx)
		}
		l.mu.Unlock()
	}()
	var errs []error
	if k.r.tick != "" {
		if err := lease.Err(); err != nil {
			l.log.WarnContext(ctx, "gocronlease: the lease ended during the run; its tick stays open", "job", k.key, "tick", k.r.tick, "token", lease.Token(), "error", err)
			return fmt.Errorf("job %q, tick %s: tick left open: %w", k.key, k.r.tick, err)
		}
		if err := tick.Done(ctx, l.store, lease, k.r.tick); err != nil {
			l.log.WarnContext(ctx, "gocronlease: could not mark the tick done; it stays open", "job", k.key, "tick", k.r.tick, "token", lease.Token(), "error", err)
			errs = append(errs, fmt.Errorf("job %q, tick %s: tick left open: %w", k.key, k.r.tick, err))
		}
	}
	if err := lease.Release(ctx); err != nil && !errors.Is(err, objlease.ErrLeaseLost) {
		l.log.WarnContext(ctx, "gocronlease: could not release the lease; it expires on its own", "job", k.key, "token", lease.Token(), "error", err)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
