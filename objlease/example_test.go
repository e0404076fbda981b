package objlease_test

import (
	"context"
	"fmt"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/providers/mem"
)

// A process takes a lease, stamps its token on its writes, and releases it.
// The next holder's token is higher, so a resource that remembers the
// highest token it has seen can refuse the first holder if it wakes late.
func Example() {
	ctx := context.Background()
	store := mem.New() // or providers.Open(ctx, "s3://bucket/leases/nightly")

	c, err := objlease.New(store, "leases/nightly", objlease.Options{TTL: 30 * time.Second, Holder: "worker-1"})
	if err != nil {
		panic(err)
	}
	lease, err := c.Acquire(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("token", lease.Token())
	// ... do the work with lease.Context(), stamping lease.Token() on writes ...
	if err := lease.Release(ctx); err != nil {
		panic(err)
	}

	again, _ := c.TryAcquire(ctx)
	fmt.Println("token", again.Token())
	again.Release(ctx)
	// Output:
	// token 1
	// token 2
}
