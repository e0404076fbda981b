package gocronlease

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/election"
	"github.com/objlease/objlease/providers"
)

// Elector is a gocron.Elector: the scheduler that holds its lease runs the
// jobs, the others skip them. It campaigns in the background from
// NewElector until Close, and campaigns again after it loses the lease.
type Elector struct {
	el     *election.Elector
	sess   *objlease.Session
	log    *slog.Logger
	retry  time.Duration
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	lease *objlease.Lease // while leading
}

var _ gocron.Elector = (*Elector)(nil)

// NewElector starts campaigning for the lease at key in store, with opts
// (objlease.Options: TTL, Holder...; the same for every scheduler), until
// Close. It runs on a session of its own made with so (its clock and
// logger; the zero value: the real clock, no logs). ctx bounds the
// campaign: once it ends the Elector steps down, as Close does, releasing
// the lease.
func NewElector(ctx context.Context, store providers.Store, so objlease.SessionOptions, key string, opts objlease.Options) (*Elector, error) {
	sess, err := objlease.NewSession(store, so)
	if err != nil {
		return nil, err
	}
	e := &Elector{sess: sess, done: make(chan struct{})}
	e.el, err = election.New(sess, key, opts, election.Config{OnStartedLeading: e.lead})
	if err != nil {
		return nil, err
	}
	c, err := sess.Client(key, opts) // the effective options, defaults filled in
	if err != nil {
		return nil, err
	}
	e.log, e.retry = sess.Logger(), c.Options().TTL
	ctx, e.cancel = context.WithCancel(ctx)
	go e.campaign(ctx)
	return e, nil
}

// campaign runs the election until ctx ends; an error campaigning cannot
// cure (a missing bucket, refused credentials, an object at the key that
// is no lease record) is logged and tried again after a TTL, so that an
// operator can fix it without restarting the scheduler.
func (e *Elector) campaign(ctx context.Context) {
	defer close(e.done)
	for {
		err := e.el.Run(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			e.log.ErrorContext(ctx, "gocronlease: campaign failed; trying again", "retry_in", e.retry, "error", err)
		}
		t := time.NewTimer(e.retry)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// lead holds leadership until ctx ends: then the lease was lost or is to
// be released.
func (e *Elector) lead(ctx context.Context, l *objlease.Lease) {
	e.mu.Lock()
	e.lease = l
	e.mu.Unlock()
	e.log.InfoContext(ctx, "gocronlease: leading", "key", l.Key(), "token", l.Token())
	<-ctx.Done()
	e.mu.Lock()
	e.lease = nil
	e.mu.Unlock()
	e.log.InfoContext(ctx, "gocronlease: stopped leading", "key", l.Key(), "token", l.Token(), "cause", context.Cause(ctx))
}

// valid returns the lease if it is held and valid now, else an error
// matching ErrNotLeader.
func (e *Elector) valid() (*objlease.Lease, error) {
	e.mu.Lock()
	l := e.lease
	e.mu.Unlock()
	switch {
	case l == nil:
		return nil, ErrNotLeader
	case l.Err() != nil:
		return nil, fmt.Errorf("%w: lease %q: %w", ErrNotLeader, l.Key(), l.Err())
	case l.ValidFor() <= 0:
		return nil, fmt.Errorf("%w: lease %q: its validity has ended", ErrNotLeader, l.Key())
	}
	return l, nil
}

// IsLeader returns nil if this scheduler holds the lease and it is valid
// now (objlease.Lease.ValidFor, judged at the call, with no round trip),
// else an error matching ErrNotLeader.
func (e *Elector) IsLeader(context.Context) error {
	_, err := e.valid()
	return err
}

// Token returns the fencing token of this scheduler's term, or 0 if it
// does not lead.
func (e *Elector) Token() uint64 {
	if l, err := e.valid(); err == nil {
		return l.Token()
	}
	return 0
}

// Wrap returns a task function for gocron.NewTask that calls job under the
// Elector's lease: job's context ends when gocron's does or when the lease
// is lost, and carries the lease (TokenFrom, LeaseFrom). If this scheduler
// does not lead when the task starts, job is not called and the task
// returns an error matching ErrNotLeader.
func (e *Elector) Wrap(job func(ctx context.Context) error) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		l, err := e.valid()
		if err != nil {
			return err
		}
		return withLease(ctx, &run{lease: l}, job)
	}
}

// Close stops campaigning and, if this scheduler leads, releases the lease
// (keeping its token), so that another scheduler leads at once. It waits
// for that within ctx. Shut the scheduler down first, so that no job is
// running when leadership ends.
func (e *Elector) Close(ctx context.Context) error {
	e.cancel()
	select {
	case <-e.done:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	return e.sess.Close(ctx)
}
