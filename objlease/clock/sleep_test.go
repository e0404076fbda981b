package clock_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/objlease/objlease/objlease/clock"
)

var errStop = errors.New("stop")

func TestSleepWaitsOnTheClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clock.NewFake(time.Unix(0, 0))
		done := make(chan error, 1)
		go func() { done <- clock.Sleep(t.Context(), clk, time.Minute) }()
		synctest.Wait()
		clk.Advance(time.Minute - time.Nanosecond)
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("Sleep returned %v before the clock reached the deadline", err)
		default:
		}
		clk.Advance(time.Nanosecond)
		if err := <-done; err != nil {
			t.Fatalf("Sleep = %v, want nil", err)
		}
	})
}

func TestSleepReturnsTheCause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clock.NewFake(time.Unix(0, 0))
		ctx, cancel := context.WithCancelCause(t.Context())
		done := make(chan error, 1)
		go func() { done <- clock.Sleep(ctx, clk, time.Minute) }()
		synctest.Wait()
		cancel(errStop)
		if err := <-done; !errors.Is(err, errStop) {
			t.Fatalf("Sleep = %v, want %v", err, errStop)
		}
		if n := clk.Timers(); n != 0 {
			t.Fatalf("%d timers still pending, want the wait's stopped", n)
		}
	})
}
