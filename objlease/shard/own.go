package shard

// This file holds a worker's own shards: taking one and starting its Work,
// forgetting one whose lease was lost, and handing one over.

import (
	"context"
	"errors"
	"log/slog"

	"github.com/objlease/objlease/objlease"
)

// take tries once to take shard id and starts its Work.
func (w *Worker) take(ctx context.Context, id string) bool {
	ws, err := w.watch(id)
	if err != nil {
		return false
	}
	l, err := ws.c.TryAcquire(ctx)
	if err != nil {
		if !errors.Is(err, objlease.ErrHeld) && ctx.Err() == nil {
			w.log.Warn("cannot take shard", slog.String("shard", id), slog.Any("err", err))
		}
		return false
	}
	if l.ValidFor() <= 0 {
		// Granted already expired (the reply came late, the process was
		// paused): someone else may own the shard by now, and the lease's
		// context has not ended yet, so Work must not start. There is
		// nothing left to hand over: the release only stops the lease's
		// goroutines, and gives up when the worker stops.
		_ = l.Release(ctx)
		w.log.Warn("shard taken too late: its lease had expired", slog.String("shard", id), slog.Uint64("token", l.Token()))
		return false
	}
	s := &Shard{ID: id, Lease: l}
	cbCtx, cancel := context.WithCancelCause(l.Context())
	o := &owned{shard: s, cancel: cancel, done: make(chan struct{})}
	w.mu.Lock()
	w.owned[id] = o
	w.mu.Unlock()
	w.log.Info("shard taken", slog.String("shard", id), slog.Uint64("token", l.Token()))
	go func() {
		defer close(o.done)
		w.cfg.Work(cbCtx, s)
	}()
	return true
}

// reap forgets the shards whose leases were lost, once their Work returned.
func (w *Worker) reap() {
	for _, o := range w.snapshot() {
		if o.shard.Lease.Err() == nil {
			continue
		}
		select {
		case <-o.done:
		default:
			continue // Work has not returned yet; the shard is not ours, nor free to take again
		}
		o.cancel(nil)
		w.mu.Lock()
		delete(w.owned, o.shard.ID)
		w.mu.Unlock()
		w.log.Warn("shard lost", slog.String("shard", o.shard.ID), slog.Any("err", o.shard.Lease.Err()))
	}
}

func (w *Worker) releaseID(ctx context.Context, id string) {
	w.mu.Lock()
	o := w.owned[id]
	w.mu.Unlock()
	if o != nil {
		w.release(context.WithoutCancel(ctx), o)
	}
}

// release hands a shard over: Work's context ends, Work returns, and only
// then is the lease released, so that the next owner's Work cannot start
// while this one's runs.
func (w *Worker) release(ctx context.Context, o *owned) {
	l := o.shard.Lease
	// A release that cannot reach the store gives up after a TTL: by then
	// the lease has expired and the shard is free to take anyway, and a
	// worker must not hang in it (ctx is not cancelled while handing over).
	ctx, cancel := context.WithTimeout(ctx, w.opts.TTL)
	defer cancel()
	var err error
	if callbackBeforeRelease() {
		o.cancel(errHandingOver)
		<-o.done
		err = l.Release(ctx)
	} else {
		err = l.Release(ctx)
		o.cancel(errHandingOver)
		<-o.done
	}
	if err != nil && !errors.Is(err, objlease.ErrLeaseLost) {
		w.log.Warn("releasing shard failed; it will expire", slog.String("shard", o.shard.ID), slog.Any("err", err))
	}
	w.mu.Lock()
	delete(w.owned, o.shard.ID)
	w.mu.Unlock()
	w.log.Info("shard released", slog.String("shard", o.shard.ID), slog.Uint64("token", l.Token()))
}
