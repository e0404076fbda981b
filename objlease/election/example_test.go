package election_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/election"
	"github.com/objlease/objlease/providers/mem"
)

// A cron-style serverless job: every instance starts at the same minute,
// one becomes leader through the bucket and does the work, the others see
// it held and exit.
func ExampleRunOnce() {
	ctx := context.Background()
	bucket := mem.New() // in production: providers.Open(ctx, "gs://bucket/cron/")

	instance := func(name string) *objlease.Client {
		c, err := objlease.New(bucket, "cron/nightly-report", objlease.Options{TTL: time.Minute, Holder: name})
		if err != nil {
			panic(err)
		}
		return c
	}
	err := election.RunOnce(ctx, instance("instance-a"), func(ctx context.Context, l *objlease.Lease) error {
		fmt.Println("instance-a leads with token", l.Token())
		// A second instance, starting meanwhile, finds the job taken.
		err := election.RunOnce(ctx, instance("instance-b"), func(context.Context, *objlease.Lease) error { return nil })
		var held *objlease.HeldError
		if errors.As(err, &held) {
			fmt.Println("instance-b: already running on", held.Holder)
		}
		return nil
	})
	if err != nil {
		panic(err)
	}
	// Output:
	// instance-a leads with token 1
	// instance-b: already running on instance-a
}
