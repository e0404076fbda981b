package ctxsleep

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
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
