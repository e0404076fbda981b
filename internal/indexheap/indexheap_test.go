package indexheap

import (
	"container/heap"
	"math/rand/v2"
	"slices"
	"testing"
)

type item struct {
	key, idx int
}

func newHeap() Heap[*item] {
	return New(func(a, b *item) bool { return a.key < b.key }, func(x *item, i int) { x.idx = i })
}

// checkPlaces fails unless every queued item's idx is its index.
func checkPlaces(t *testing.T, h *Heap[*item]) {
	t.Helper()
	for i, it := range h.items {
		if it.idx != i {
			t.Fatalf("item %d at index %d says it is at %d", it.key, i, it.idx)
		}
	}
}

func TestPopsInOrderAndRemovesWhereTheItemStands(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	h := newHeap()
	var all []*item
	for range 200 {
		it := &item{key: rnd.IntN(1000)}
		all = append(all, it)
		heap.Push(&h, it)
		checkPlaces(t, &h)
	}
	removed := map[*item]bool{}
	for _, it := range all[:50] {
		heap.Remove(&h, it.idx)
		if it.idx != -1 {
			t.Fatalf("removed item says it is at %d, want -1", it.idx)
		}
		removed[it] = true
		checkPlaces(t, &h)
	}
	var want []int
	for _, it := range all {
		if !removed[it] {
			want = append(want, it.key)
		}
	}
	slices.Sort(want)
	var got []int
	for h.Len() > 0 {
		first := h.Min()
		it := heap.Pop(&h).(*item)
		if it != first || it.idx != -1 {
			t.Fatalf("popped %+v, want the least, %+v, at -1", it, first)
		}
		got = append(got, it.key)
		checkPlaces(t, &h)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("popped %v, want %v", got, want)
	}
}
