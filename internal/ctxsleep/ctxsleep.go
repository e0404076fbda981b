// Package ctxsleep is the one context-aware sleep of the module: wait for a
// duration, or until the context ends, and say which.
package ctxsleep

import (
	"context"
	"time"

	"github.com/objlease/objlease/objlease/clock"
)

// For blocks for d on Go's own timers, or until ctx ends. It returns nil once
// d has passed and ctx's cause if ctx ended first.
func For(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	return until(ctx, t.C)
}

// On is For on clk's timers, for waits that are measured in clk's time
// rather than Go's (a fake clock, the lease clock).
func On(ctx context.Context, clk clock.Clock, d time.Duration) error {
	t := clk.NewTimer(d)
	defer t.Stop()
	return until(ctx, t.C())
}

// until waits for fired or for ctx to end.
func until(ctx context.Context, fired <-chan time.Time) error {
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-fired:
		return nil
	}
}
