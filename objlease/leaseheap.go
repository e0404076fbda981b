package objlease

import "time"

// leaseHeap is a min-heap of leases by their renewal or expiry deadline,
// kept beside each lease so that sifting reads no lease.
type leaseHeap struct {
	l      []heapEntry
	expiry bool // by expireAt (else renewAt)
}

type heapEntry struct {
	// at is the deadline. Entries are ordered with Time.Before, which uses
	// the monotonic readings where both times have one: a wall-clock step
	// between two readings of time.Now moves their wall readings (UnixNano)
	// apart but not their order.
	at time.Time
	l  *Lease
}

func (h *leaseHeap) at(i int) time.Time { return h.l[i].l.deadline(h.expiry) }
func (h *leaseHeap) next() (time.Time, bool) {
	if len(h.l) == 0 {
		return time.Time{}, false
	}
	return h.at(0), true
}

func (l *Lease) deadline(expiry bool) time.Time {
	if expiry {
		return l.expireAt
	}
	return l.renewAt
}

func (h *leaseHeap) idx(l *Lease) *int {
	if h.expiry {
		return &l.expireIdx
	}
	return &l.renewIdx
}

func (h *leaseHeap) Len() int           { return len(h.l) }
func (h *leaseHeap) Less(i, j int) bool { return h.l[i].at.Before(h.l[j].at) }
func (h *leaseHeap) Swap(i, j int) {
	h.l[i], h.l[j] = h.l[j], h.l[i]
	*h.idx(h.l[i].l), *h.idx(h.l[j].l) = i, j
}
func (h *leaseHeap) Push(x any) {
	l := x.(*Lease)
	*h.idx(l) = len(h.l)
	h.l = append(h.l, heapEntry{l.deadline(h.expiry), l})
}
func (h *leaseHeap) Pop() any {
	n := len(h.l) - 1
	l := h.l[n].l
	h.l[n] = heapEntry{}
	h.l = h.l[:n]
	*h.idx(l) = -1
	return l
}
