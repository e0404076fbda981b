package tick_test

import (
	"context"
	"fmt"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/tick"
	"github.com/objlease/objlease/providers/mem"
)

// A scheduled job whose trigger came twice for one hour: the second
// delivery finds the hour done and does not run the job.
func Example() {
	ctx := context.Background()
	hour := time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC)
	store := mem.New(mem.WithClock(func() time.Time { hour = hour.Add(time.Second); return hour }))
	for _, delivery := range []string{"first", "second"} {
		c, err := objlease.New(store, "jobs/hourly", objlease.Options{TTL: 30 * time.Second, Holder: delivery})
		if err != nil {
			panic(err)
		}
		l, err := c.Acquire(ctx)
		if err != nil {
			panic(err)
		}
		at, err := tick.Now(ctx, store, l) // the store's clock decides the hour
		if err != nil {
			panic(err)
		}
		ran, prev, err := tick.Once(ctx, store, l, tick.Of(at, time.Hour), func(ctx context.Context) error {
			fmt.Printf("%s delivery: running the job with token %d\n", delivery, l.Token())
			return nil
		})
		if err != nil {
			panic(err)
		}
		if !ran {
			fmt.Printf("%s delivery: the hour was done by token %d\n", delivery, prev.Token)
		}
		l.Release(ctx)
	}
	// Output:
	// first delivery: running the job with token 1
	// second delivery: the hour was done by token 1
}
