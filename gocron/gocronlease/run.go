package gocronlease

import (
	"context"
	"errors"

	"github.com/objlease/objlease/objlease"
)

var (
	// ErrNotLeader: the Elector does not hold a valid lease; gocron skips
	// the job.
	ErrNotLeader = errors.New("gocronlease: not the leader")
	// ErrTickDone: the job already ran for this tick, on this scheduler
	// or another; gocron skips the job.
	ErrTickDone = errors.New("gocronlease: job already ran for this tick")
	// ErrNoLease: a task made by Wrap was called without a lease for its
	// run (its job does not take its lock from this Locker, or gocron
	// passed the task a context of the caller's instead of the job's); the
	// job function was not called.
	ErrNoLease = errors.New("gocronlease: no lease for this run")
	// ErrClosed: the Locker or Elector was closed.
	ErrClosed = errors.New("gocronlease: closed")
)

// run is what a job's context carries: the lease it runs under and,
// from a Locker with a period, its tick.
type run struct {
	lease *objlease.Lease
	tick  string
}

type runKey struct{}

// withLease runs job with a context that ends when ctx or the lease ends
// and carries r.
func withLease(ctx context.Context, r *run, job func(context.Context) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	lctx := r.lease.Context()
	stop := context.AfterFunc(lctx, func() { cancel(context.Cause(lctx)) })
	defer stop()
	return job(context.WithValue(ctx, runKey{}, r))
}

func runFrom(ctx context.Context) *run {
	r, _ := ctx.Value(runKey{}).(*run)
	return r
}

// TokenFrom returns the fencing token of the lease a task made by Wrap
// runs under, from the context the job function was given (or one derived
// from it). ok is false for any other context.
func TokenFrom(ctx context.Context) (token uint64, ok bool) {
	if r := runFrom(ctx); r != nil {
		return r.lease.Token(), true
	}
	return 0, false
}

// TickFrom returns the tick a task made by Locker.Wrap runs for, as
// tick.Of names it ("2026-12-07T10:00:00Z/PT1H"). ok is false for a job
// without a period, a task of Elector.Wrap, and any other context.
func TickFrom(ctx context.Context) (tick string, ok bool) {
	if r := runFrom(ctx); r != nil && r.tick != "" {
		return r.tick, true
	}
	return "", false
}

// LeaseFrom returns the lease a task made by Wrap runs under (nil for any
// other context): its Key and Token to fence writes with, its ValidFor to
// check before acting on local state.
func LeaseFrom(ctx context.Context) *objlease.Lease {
	if r := runFrom(ctx); r != nil {
		return r.lease
	}
	return nil
}
