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

// An elector made in a session campaigns for the lease at a key; Run
// campaigns again, with the same client, after a Resign ended it.
func ExampleElector() {
	ctx := context.Background()
	sess, err := objlease.NewSession(mem.New(), objlease.SessionOptions{}) // in production: a store from providers.Open
	if err != nil {
		panic(err)
	}
	var e *election.Elector
	e, err = election.New(sess, "leaders/api", objlease.Options{TTL: 10 * time.Second, Holder: "node-a", Data: []byte("10.0.0.1:8080")},
		election.Config{
			OnStartedLeading: func(ctx context.Context, l *objlease.Lease) {
				fmt.Println("leading with token", l.Token())
				e.Resign() // e.g. handing over before a restart
				<-ctx.Done()
			},
		})
	if err != nil {
		panic(err)
	}
	for range 2 {
		if err := e.Run(ctx); err != nil {
			panic(err)
		}
	}
	// Output:
	// leading with token 1
	// leading with token 2
}

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
		var held *objlease.Error
		if errors.Is(err, objlease.ErrHeld) && errors.As(err, &held) {
			fmt.Println("instance-b: already running on", held.Record.Holder)
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

// An observer that never campaigns is told who leads, at once and then at
// each change of leader.
func ExampleWatch() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	store := mem.New()
	holder, err := objlease.New(store, "leader", objlease.Options{Holder: "node-a", Data: []byte("10.0.0.7:8080")})
	if err != nil {
		panic(err)
	}
	lease, err := holder.Acquire(ctx)
	if err != nil {
		panic(err)
	}
	defer lease.Release(context.Background())
	observer, err := objlease.New(store, "leader", objlease.Options{Holder: "dashboard"})
	if err != nil {
		panic(err)
	}
	err = election.Watch(ctx, observer, func(l election.Leader, ok bool) error {
		if ok {
			fmt.Printf("leader %s at %s (token %d)\n", l.Holder, l.Data, l.Token)
			stop() // seen enough: Watch returns nil once ctx ends
		}
		return nil
	})
	fmt.Println(err)
	// Output:
	// leader node-a at 10.0.0.7:8080 (token 1)
	// <nil>
}
