package fence_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/objlease/objlease/objlease/fence"
	"github.com/objlease/objlease/providers/mem"
)

// A pipeline writes its output under a guarded prefix. A stale worker (token
// 4), paused while a newer one (token 5) ran, wakes and tries to commit: the
// store refuses it, and readers see exactly the newer worker's output.
func ExampleBatch() {
	ctx := context.Background()
	store := mem.New()
	const out = "reports/2026-11-29/"

	stale := fence.NewBatch(store, out, 4)
	stale.Put(ctx, "summary.csv", []byte("old numbers"))

	fresh := fence.NewBatch(store, out, 5)
	fresh.Put(ctx, "summary.csv", []byte("new numbers"))
	fresh.Put(ctx, "detail.csv", []byte("..."))
	if _, err := fresh.Commit(ctx, false); err != nil {
		panic(err)
	}

	_, err := stale.Commit(ctx, false)
	fmt.Println("stale commit refused:", errors.Is(err, fence.ErrStale))

	m, _ := fence.ReadCommitted(ctx, store, out)
	obj, _ := store.Get(ctx, m.Objects["summary.csv"].Key, 0)
	fmt.Println("committed by token", m.Token, m.Names(), string(obj.Data))
	// Output:
	// stale commit refused: true
	// committed by token 5 [detail.csv summary.csv] new numbers
}

// A single object fenced in place: the object remembers the highest token
// that wrote it.
func ExamplePut() {
	ctx := context.Background()
	store := mem.New()
	fence.Put(ctx, store, "state.json", 7, []byte(`{"v":7}`), fence.Options{})
	_, err := fence.Put(ctx, store, "state.json", 6, []byte(`{"v":6}`), fence.Options{})
	fmt.Println(err)
	// Output:
	// "state.json": token 6 refused: token 7 has already written it
}
