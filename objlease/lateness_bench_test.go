package objlease_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/providers"
)

// BenchmarkCancelLateness measures, on the real clock, how late past its
// safe validity a lease's context ends when every lease of one session
// loses the store at once and ends by its validity: the lateness that the
// holder's allowance for a late end (min(100 ms, TTL/10), see
// docs/protocol.md) must cover. Each lease's validity end is read from
// ValidFor right after acquiring it, so it is early by the time that read
// takes, never late. Run it beside a CPU hog to see a loaded machine:
//
//	go test -run '^$' -bench CancelLateness -benchtime 1x ./objlease
func BenchmarkCancelLateness(b *testing.B) {
	for _, n := range []int{1000, 3000, 10000} {
		b.Run(fmt.Sprintf("leases=%d", n), func(b *testing.B) {
			var worst, p99 time.Duration
			for range b.N {
				w, p := cancelLateness(b, n)
				worst, p99 = max(worst, w), max(p99, p)
			}
			b.ReportMetric(float64(worst)/1e6, "worst-ms")
			b.ReportMetric(float64(p99)/1e6, "p99-ms")
		})
	}
}

func cancelLateness(b *testing.B, n int) (worst, p99 time.Duration) {
	_, hs := newMem()
	sess, err := objlease.NewSession(hs, objlease.SessionOptions{})
	if err != nil {
		b.Fatal(err)
	}
	const ttl = 2 * time.Second
	ends := make([]time.Time, n)
	late := make([]time.Duration, n)
	var wg sync.WaitGroup
	for i := range n {
		c, err := sess.Client(fmt.Sprintf("leases/%05d", i), objlease.Options{TTL: ttl, Holder: "h"})
		if err != nil {
			b.Fatal(err)
		}
		l, err := c.TryAcquire(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		ends[i] = time.Now().Add(l.ValidFor())
		wg.Add(1)
		context.AfterFunc(l.Context(), func() {
			late[i] = time.Since(ends[i])
			wg.Done()
		})
		if i == 0 {
			// The store is cut off from the first lease on: renewals fail.
			hs.setHooks(func(op, key string) error {
				if op == "replace" {
					return providers.Wrap(op, key, providers.ErrUnreachable, nil)
				}
				return nil
			}, nil)
		}
	}
	wg.Wait()
	slices.Sort(late)
	return late[n-1], late[n*99/100]
}
