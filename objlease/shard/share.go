package shard

// This file holds how shards are shared: each member's share, computed from
// the membership alone, and the order in which a worker prefers shards.

import (
	"hash/fnv"
	"slices"
	"sort"
	"strings"
)

// target is this worker's share among the live members of m shards:
// floor(m/n), or the ceiling for the first m mod n members by name. It
// needs no shard's holder, so that a worker learns whether to move from
// the membership listing alone, and every member computes the same
// shares, whatever it last read of the others' shards.
func (w *Worker) target(members []string, m int) int {
	counts := make(map[string]int, len(members))
	for _, n := range members {
		counts[n] = 0
	}
	return Target(w.member, counts, m)
}

// Target returns the number of shards member should own, given how many
// each live member owns now (counts, including member) and the number of
// shards m: floor(m/n) or ceil(m/n). The m mod n members owning the most,
// ties broken by name, are meant to own the ceiling. A Worker counts every
// member at zero, so that the ceiling goes to the first members by name:
// every member then computes the same shares from the membership alone,
// without reading the others' shards.
func Target(member string, counts map[string]int, m int) int {
	n := len(counts)
	if n == 0 {
		return 0
	}
	names := make([]string, 0, n)
	for k := range counts {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		if counts[names[i]] != counts[names[j]] {
			return counts[names[i]] > counts[names[j]]
		}
		return names[i] < names[j]
	})
	t := m / n
	if i := slices.Index(names, member); i >= 0 && i < m%n {
		t++
	}
	return t
}

// cmpScore orders shard ids by their affinity to member (a rendezvous
// hash): a worker keeps the shards it likes best and tries free ones in the
// same order, so that the choice is deterministic and different workers
// rarely race for one shard.
func cmpScore(member, a, b string) int {
	sa, sb := score(member, a), score(member, b)
	switch {
	case sa < sb:
		return -1
	case sa > sb:
		return 1
	}
	return strings.Compare(a, b)
}

func score(member, id string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(member))
	h.Write([]byte{0})
	h.Write([]byte(id))
	return h.Sum64()
}
