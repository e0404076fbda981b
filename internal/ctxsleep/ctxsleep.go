// Package ctxsleep is the one context-aware sleep on Go's own timers: wait
// for a duration, or until the context ends, and say which. A wait on a
// lease clock is objlease/clock.Sleep.
package ctxsleep

import (
	"context"
	"time"
)

// For blocks for d on Go's own timers, or until ctx ends. It returns nil once
// d has passed and ctx's cause if ctx ended first.
func For(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}
