package objlease_test

import (
	"context"
	"errors"
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

// A process that waits for many leases at once, here one per tenant, hands
// each to its callback when it is free, with no goroutine of its own per
// lease while it waits.
func ExampleClient_AcquireFunc() {
	ctx := context.Background()
	store := mem.New()
	tenants := []string{"acme", "globex", "initech"}
	given := make(chan string, len(tenants))
	for _, tenant := range tenants {
		c, err := objlease.New(store, "leases/tenant-"+tenant, objlease.Options{TTL: 30 * time.Second})
		if err != nil {
			panic(err)
		}
		c.AcquireFunc(ctx, func(l *objlease.Lease, err error) {
			if err != nil {
				given <- tenant + ": " + err.Error()
				return
			}
			defer l.Release(ctx)
			// ... serve the tenant with l.Context(), stamping l.Token() ...
			given <- fmt.Sprintf("%s: token %d", tenant, l.Token())
		})
	}
	got := map[string]bool{}
	for range tenants {
		got[<-given] = true
	}
	fmt.Println(got["acme: token 1"], got["globex: token 1"], got["initech: token 1"])
	// Output: true true true
}

// An observer follows a lease without taking it, reading on the holder's
// renewal phase while it is held: here it stops at the first read that
// finds it held.
func ExampleClient_Watch() {
	ctx := context.Background()
	store := mem.New()
	holder, err := objlease.New(store, "leases/nightly", objlease.Options{Holder: "worker-1"})
	if err != nil {
		panic(err)
	}
	lease, err := holder.Acquire(ctx)
	if err != nil {
		panic(err)
	}
	defer lease.Release(ctx)
	observer, err := objlease.New(store, "leases/nightly", objlease.Options{Holder: "dashboard"})
	if err != nil {
		panic(err)
	}
	errSeen := errors.New("seen")
	err = observer.Watch(ctx, func(st *objlease.Status) error {
		if r := st.Record; r != nil && r.State == objlease.StateHeld && !st.Expired {
			fmt.Printf("held by %s with token %d\n", r.Holder, r.Token)
			return errSeen
		}
		return nil
	})
	fmt.Println(errors.Is(err, errSeen))
	// Output:
	// held by worker-1 with token 1
	// true
}
