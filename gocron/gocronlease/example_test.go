package gocronlease_test

import (
	"context"
	"fmt"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/objlease/objlease/gocron/gocronlease"
	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/providers/mem"
)

// A scheduler runs its jobs at most once per minute across every
// scheduler that shares the store, each run under a lease whose fencing
// token the job stamps on what it writes.
func Example() {
	ctx := context.Background()
	stamp := func() time.Time { return time.Date(2026, 12, 7, 10, 0, 10, 0, time.UTC) }
	store := mem.New(mem.WithClock(stamp)) // or providers.Open(ctx, "s3://bucket/leases/")

	locker, err := gocronlease.NewLocker(store, objlease.SessionOptions{}, objlease.Options{TTL: 30 * time.Second, Holder: "scheduler-1"},
		gocronlease.LockerConfig{Prefix: "jobs/", Period: time.Minute})
	if err != nil {
		panic(err)
	}
	defer locker.Close(ctx)
	s, err := gocron.NewScheduler(gocron.WithDistributedLocker(locker))
	if err != nil {
		panic(err)
	}
	done := make(chan struct{})
	_, err = s.NewJob(gocron.OneTimeJob(gocron.OneTimeJobStartImmediately()),
		gocron.NewTask(locker.Wrap(func(ctx context.Context) error {
			defer close(done)
			token, _ := gocronlease.TokenFrom(ctx)
			tick, _ := gocronlease.TickFrom(ctx)
			fmt.Printf("report for %s, token %d\n", tick, token)
			return nil
		})),
		gocron.WithName("report"))
	if err != nil {
		panic(err)
	}
	s.Start()
	<-done
	if err := s.Shutdown(); err != nil {
		panic(err)
	}
	// Output:
	// report for 2026-12-07T10:00:00Z/PT1M, token 1
}
