package objlease

import (
	"log/slog"
	"sync"
)

// maxReportsQueued bounds the lines waiting for a slow sink; later ones
// are counted, and the count told once the sink moves again.
const maxReportsQueued = 1024

// A reporter writes the log lines of a session's background work (a lease
// ended, a renewal failed) off the goroutines that do that work, so that a
// slow or blocked sink (a full stderr pipe, a stalled log shipper) never
// stands between a deadline and the end of the contexts due at it, nor
// delays a renewal. One
// goroutine drains the queue while it holds anything, none while it is
// empty: a sink blocked forever holds that one goroutine and at most
// maxReportsQueued lines.
type reporter struct {
	log *slog.Logger // says how many reports were dropped

	mu      sync.Mutex
	queue   []func()
	running bool
	dropped int
}

// post queues f; it never blocks.
func (r *reporter) post(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.queue) >= maxReportsQueued {
		r.dropped++
		return
	}
	r.queue = append(r.queue, f)
	if !r.running {
		r.running = true
		go r.drain()
	}
}

func (r *reporter) drain() {
	for {
		r.mu.Lock()
		if len(r.queue) == 0 && r.dropped > 0 {
			n := r.dropped
			r.dropped = 0
			r.queue = append(r.queue, func() {
				r.log.Warn("log lines dropped while the log sink was slow", slog.Int("dropped", n))
			})
		}
		if len(r.queue) == 0 {
			r.running = false
			r.queue = nil
			r.mu.Unlock()
			return
		}
		f := r.queue[0]
		r.queue[0] = nil
		r.queue = r.queue[1:]
		r.mu.Unlock()
		f()
	}
}
