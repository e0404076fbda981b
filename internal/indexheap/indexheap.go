// Package indexheap is a min-heap, for container/heap, of items that keep
// their own index in it, so that one can be taken out where it stands
// (heap.Remove) or moved after its key changed (heap.Fix).
package indexheap

// Heap orders its items by less, first the least. place is told each
// item's index as the item moves, and -1 once it leaves. A Heap is used
// through container/heap; make one with New.
type Heap[T any] struct {
	items []T
	less  func(a, b T) bool
	place func(x T, i int)
}

// New returns an empty heap ordered by less that tells place where its
// items stand.
func New[T any](less func(a, b T) bool, place func(x T, i int)) Heap[T] {
	return Heap[T]{less: less, place: place}
}

// Min returns the least item, which must exist.
func (h *Heap[T]) Min() T { return h.items[0] }

// Len, Less, Swap, Push and Pop are heap.Interface's.

func (h *Heap[T]) Len() int           { return len(h.items) }
func (h *Heap[T]) Less(i, j int) bool { return h.less(h.items[i], h.items[j]) }
func (h *Heap[T]) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.place(h.items[i], i)
	h.place(h.items[j], j)
}
func (h *Heap[T]) Push(x any) {
	t := x.(T)
	h.place(t, len(h.items))
	h.items = append(h.items, t)
}
func (h *Heap[T]) Pop() any {
	n := len(h.items) - 1
	t := h.items[n]
	var zero T
	h.items[n] = zero // no reference kept past the end
	h.items = h.items[:n]
	h.place(t, -1)
	return t
}
