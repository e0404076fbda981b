package clock

import (
	"context"
	"time"
)

// Sleep blocks for d on c's timers, or until ctx ends: a wait measured in
// c's time rather than Go's (a fake clock, the lease clock). It returns
// nil once d has passed and ctx's cause if ctx ended first. (A wait on
// Go's own timers is internal/ctxsleep.For.)
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C():
		return nil
	}
}
