package shard_test

import (
	"context"
	"fmt"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/shard"
	"github.com/objlease/objlease/providers/mem"
)

// A worker joins the group at "pipeline" and is handed shards to own, each
// with its fencing token and a context that ends before anyone else can
// own it.
func Example() {
	store := mem.New()
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan string, 4)
	sess, err := objlease.NewSession(store, objlease.SessionOptions{})
	if err != nil {
		panic(err)
	}
	w, err := shard.New(sess, "pipeline", objlease.Options{TTL: 10 * time.Second}, shard.Config{
		Member: "worker-1",
		Shards: []string{"tenant-a", "tenant-b"},
		Work: func(ctx context.Context, s *shard.Shard) {
			// Stamp s.Token() on every write of the shard's output
			// (fence.Put, fence.Batch), and stop when ctx ends.
			started <- fmt.Sprintf("%s token %d", s.ID, s.Token())
			<-ctx.Done()
		},
	})
	if err != nil {
		panic(err)
	}
	done := make(chan error)
	go func() { done <- w.Run(ctx) }()
	got := []string{<-started, <-started}
	if got[0] > got[1] {
		got[0], got[1] = got[1], got[0]
	}
	fmt.Println(got[0])
	fmt.Println(got[1])
	cancel() // hands the shards back and leaves the group
	<-done
	// Output:
	// tenant-a token 1
	// tenant-b token 1
}
