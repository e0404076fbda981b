package objlease

import (
	"context"
	"time"

	"github.com/objlease/objlease/objlease/clock"
)

// sleep blocks for d on clk, or until ctx ends, and then returns ctx's
// cause. It is the one context-aware sleep of the package: lease time
// waits on Options.Clock, network time on goTimers.
func sleep(ctx context.Context, clk clock.Clock, d time.Duration) error {
	t := clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C():
		return nil
	}
}

// goTimers is Go's own timers, for waits that are network time, not lease
// time (they decide nothing about expiry): a synctest bubble fakes them,
// while Options.Clock may be a fake clock that a test never advances.
var goTimers clock.Clock = goClock{}

type goClock struct{}

func (goClock) Now() time.Time                       { return time.Now() }
func (goClock) NewTimer(d time.Duration) clock.Timer { return goTimer{time.NewTimer(d)} }

type goTimer struct{ t *time.Timer }

func (t goTimer) C() <-chan time.Time { return t.t.C }
func (t goTimer) Stop() bool          { return t.t.Stop() }
