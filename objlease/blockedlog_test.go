package objlease_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/providers/mem"
)

// blockingHandler is a log sink that blocks every record until released,
// as a full stderr pipe or a stalled log shipper does.
type blockingHandler struct{ release chan struct{} }

func (h blockingHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h blockingHandler) Handle(ctx context.Context, _ slog.Record) error {
	<-h.release
	return nil
}
func (h blockingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h blockingHandler) WithGroup(string) slog.Handler      { return h }

// No log line stands between a deadline and the end of the contexts due at
// it: with a sink that blocks forever and the store cut off, every lease's
// context still ends exactly when its safe validity does. The watcher used
// to write each "lease lost" line itself, so the first blocked write kept
// every later lease alive.
func TestBlockedLogSinkDelaysNoExpiry(t *testing.T) {
	for _, tc := range []struct {
		name string
		ttls []time.Duration
	}{
		{"A 3s and B 10s", []time.Duration{3 * time.Second, 10 * time.Second}},
		{"10000 leases", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ttls := tc.ttls
				if ttls == nil {
					ttls = make([]time.Duration, 10000)
					for i := range ttls {
						ttls[i] = time.Duration(1+i%10) * time.Second
					}
				}
				clk := clock.NewFake(epoch)
				store := newWriteLog(mem.New(), clk)
				sink := blockingHandler{release: make(chan struct{})}
				defer close(sink.release)
				sess, err := objlease.NewSession(store, objlease.SessionOptions{Clock: clk, Logger: slog.New(sink), Rand: rand.New(rand.NewPCG(7, 7))})
				if err != nil {
					t.Fatal(err)
				}
				leases := make([]*objlease.Lease, len(ttls))
				for i, ttl := range ttls {
					c, err := sess.Client(fmt.Sprintf("leases/%05d", i), objlease.Options{
						TTL: ttl, Holder: "h",
					})
					if err != nil {
						t.Fatal(err)
					}
					if leases[i], err = c.TryAcquire(context.Background()); err != nil {
						t.Fatal(err)
					}
				}
				// Cut off from the store: every renewal fails from now on.
				store.fail = func(string, int) bool { return true }
				late := 0
				step(clk, 11*time.Second, func(now time.Duration) {
					for i, l := range leases {
						// Safe validity: TTL × (1 − 1 %) − min(100 ms, TTL/10)
						// after the acquiring write, which was sent at epoch.
						if now >= ttls[i]-ttls[i]/100-min(100*time.Millisecond, ttls[i]/10) && l.Context().Err() == nil {
							late++
						}
					}
				})
				if late > 0 {
					t.Fatalf("%d lease-steps had a live context past their safe validity while the log sink was blocked", late)
				}
			})
		})
	}
}
