package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/semaphore"
	"github.com/objlease/objlease/providers/mem"
)

// Two render slots shared by three workers: two hold at once, the third is
// refused until one gives its slot back, and then takes that slot with the
// next token. A resource shared by the workers fences per slot: it keeps
// the highest token it has seen for each slot index.
func Example() {
	ctx := context.Background()
	store := mem.New() // or providers.Open(ctx, "s3://bucket/pools/render")

	worker := func(name string) *semaphore.Semaphore {
		sess, err := objlease.NewSession(store, objlease.SessionOptions{})
		if err != nil {
			panic(err)
		}
		s, err := semaphore.New(sess, "pools/render", 2, objlease.Options{TTL: 30 * time.Second, Holder: name})
		if err != nil {
			panic(err)
		}
		return s
	}
	first, err := worker("worker-1").Acquire(ctx)
	if err != nil {
		panic(err)
	}
	second, err := worker("worker-2").Acquire(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("distinct slots:", first.Index() != second.Index(), "tokens", first.Token(), second.Token())
	// ... work with first.Context(), stamping (first.Index(), first.Token()) on writes ...

	third := worker("worker-3")
	_, err = third.TryAcquire(ctx)
	fmt.Println("third refused:", errors.Is(err, objlease.ErrHeld))

	if err := first.Release(ctx); err != nil {
		panic(err)
	}
	slot, err := third.TryAcquire(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("third took the freed slot:", slot.Index() == first.Index(), "token", slot.Token())
	slot.Release(ctx)
	second.Release(ctx)
	// Output:
	// distinct slots: true tokens 1 1
	// third refused: true
	// third took the freed slot: true token 2
}
