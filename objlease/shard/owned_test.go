package shard_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/objlease/objlease/objlease/shard"
	"github.com/objlease/objlease/providers/mem"
)

// joinWith adds a member whose Work is work, not the checker's.
func (g *group) joinWith(name string, work func(ctx context.Context, s *shard.Shard)) *node {
	g.t.Helper()
	ks := &killable{Store: g.store, clk: g.clk, sent: map[string]time.Time{}, sp: shard.ShardsPrefix(g.prefix)}
	w, err := newWorker(ks, g.clk, g.prefix, g.options(), shard.Config{Member: name, Shards: g.ids, Work: work})
	if err != nil {
		g.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &node{w: w, store: ks, cancel: cancel, done: make(chan struct{})}
	go func() { defer close(n.done); w.Run(ctx) }()
	g.nodes[name] = n
	return n
}

// A shard whose lease was lost is not owned, even while its Work, which
// ignores its context, has not returned: Owned used to list it until then
// (for a command's whole --grace), beside the member that took it over.
func TestOwnedEndsWithTheLeaseNotWithWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, mem.New(), 1)
		release := make(chan struct{})
		let := sync.OnceFunc(func() { close(release) })
		t.Cleanup(let) // before the group's cleanup, which waits for Work
		slow := g.joinWith("w1", func(ctx context.Context, s *shard.Shard) {
			<-ctx.Done()
			<-release // Work that goes on after its context ended
		})
		g.drive("w1 owns the shard", func() bool { return len(slow.w.Owned()) == 1 })
		// w1 is cut off: its lease on s00 runs out, and w2 takes the shard.
		slow.store.dead.Store(true)
		g.join("w2")
		both := 0
		g.drive("w2 owns the shard", func() bool {
			if len(slow.w.Owned()) > 0 && len(g.nodes["w2"].w.Owned()) > 0 {
				both++
			}
			return len(g.nodes["w2"].w.Owned()) == 1
		})
		if both > 0 || len(slow.w.Owned()) > 0 {
			t.Fatalf("w1, cut off, still owns %v while w2 owns %v (both listed it in %d steps)", slow.w.Owned(), g.nodes["w2"].w.Owned(), both)
		}
		if s := slow.w.Stopping(); !slices.Equal(s, []string{"s00"}) {
			t.Fatalf("w1's shards stopping: %v, want [s00] (its Work has not returned)", s)
		}
		let()
		slow.store.dead.Store(false) // back: the group rebalances as usual
		g.drive("the shard settled on one owner", func() bool {
			return len(slow.w.Stopping()) == 0 && len(slow.w.Owned())+len(g.nodes["w2"].w.Owned()) == 1
		})
	})
}
