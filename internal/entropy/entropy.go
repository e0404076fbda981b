// Package entropy is the source of the randomness that must differ between
// processes whatever their seeds: the salt of every write's nonce. It is
// crypto/rand; the simulation replaces it with a generator seeded from the
// run, so that its runs stay reproducible while every simulated process
// still draws its own values.
package entropy

import (
	"crypto/rand"
	"sync"
)

var (
	mu   sync.Mutex
	read = func(b []byte) { _, _ = rand.Read(b) } // crypto/rand.Read never fails
)

// Read fills b with random bytes.
func Read(b []byte) {
	mu.Lock()
	defer mu.Unlock()
	read(b)
}

// Replace makes Read use fn until the returned function restores the
// previous source. For the simulation only.
func Replace(fn func(b []byte)) (restore func()) {
	mu.Lock()
	defer mu.Unlock()
	prev := read
	read = fn
	return func() {
		mu.Lock()
		defer mu.Unlock()
		read = prev
	}
}
