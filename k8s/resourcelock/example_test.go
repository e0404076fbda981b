package resourcelock_test

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/tools/leaderelection"

	"github.com/objlease/objlease/k8s/resourcelock"
	"github.com/objlease/objlease/providers/mem"
)

// A controller elects itself leader through a store with client-go's
// leaderelection package and stamps its fencing token on what it writes
// while it leads.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := mem.New() // or providers.Open(ctx, "s3://bucket/leases/")

	lock, err := resourcelock.New(store, "leases/controller", "controller-1")
	if err != nil {
		panic(err)
	}
	leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   15 * time.Second,
		RenewDeadline:   10 * time.Second,
		RetryPeriod:     2 * time.Second,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				fmt.Printf("%s leads with token %d\n", lock.Identity(), lock.Token())
				cancel() // done: step down
			},
			OnStoppedLeading: func() { fmt.Println("stopped leading") },
		},
	})
	// Output:
	// controller-1 leads with token 1
	// stopped leading
}
