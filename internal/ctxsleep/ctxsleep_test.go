package ctxsleep

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/objlease/objlease/objlease/clock"
)

var errStop = errors.New("stop")

func TestForWaitsTheWholeDuration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if err := For(t.Context(), time.Minute); err != nil {
			t.Fatalf("For = %v, want nil", err)
		}
		if got := time.Since(start); got != time.Minute {
			t.Fatalf("For returned after %v, want %v", got, time.Minute)
		}
	})
}

func TestForReturnsTheCause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancelCause(t.Context())
		time.AfterFunc(time.Second, func() { cancel(errStop) })
		start := time.Now()
		if err := For(ctx, time.Minute); !errors.Is(err, errStop) {
			t.Fatalf("For = %v, want %v", err, errStop)
		}
		if got := time.Since(start); got != time.Second {
			t.Fatalf("For returned after %v, want %v", got, time.Second)
		}
	})
}

func TestOnWaitsOnTheClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clock.NewFake(time.Unix(0, 0))
		done := make(chan error, 1)
		go func() { done <- On(t.Context(), clk, time.Minute) }()
		synctest.Wait()
		clk.Advance(time.Minute - time.Nanosecond)
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("On returned %v before the clock reached the deadline", err)
		default:
		}
		clk.Advance(time.Nanosecond)
		if err := <-done; err != nil {
			t.Fatalf("On = %v, want nil", err)
		}
	})
}

func TestOnReturnsTheCause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clock.NewFake(time.Unix(0, 0))
		ctx, cancel := context.WithCancelCause(t.Context())
		done := make(chan error, 1)
		go func() { done <- On(ctx, clk, time.Minute) }()
		synctest.Wait()
		cancel(errStop)
		if err := <-done; !errors.Is(err, errStop) {
			t.Fatalf("On = %v, want %v", err, errStop)
		}
		if n := clk.Timers(); n != 0 {
			t.Fatalf("%d timers still pending, want the wait's stopped", n)
		}
	})
}
