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
		// The mark's token is a floor for the lease's: a lease record
		// deleted by hand cannot start the tokens again below it.
		floor, err := tick.Floor(ctx, store, "jobs/hourly")
		if err != nil {
			panic(err)
		}
		c, err := objlease.New(store, "jobs/hourly", objlease.Options{TTL: 30 * time.Second, Holder: delivery, MinToken: &floor})
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
		id := tick.Of(at, time.Hour) // "2026-12-04T03:00:00Z/PT1H"
		ran, done, err := tick.Once(ctx, store, l, id, func(ctx context.Context) error {
			fmt.Printf("%s delivery: running the job for %s with token %d\n", delivery, id, l.Token())
			return nil
		})
		if err != nil {
			panic(err)
		}
		if !ran {
			fmt.Printf("%s delivery: %s was done by token %d\n", delivery, id, done.Token)
		}
		l.Release(ctx)
	}
	// Output:
	// first delivery: running the job for 2026-12-04T03:00:00Z/PT1H with token 1
	// second delivery: 2026-12-04T03:00:00Z/PT1H was done by token 1
}
