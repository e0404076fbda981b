package clock

import (
	"container/heap"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/objlease/objlease/internal/indexheap"
)

// afterFunc calls f once CLOCK_BOOTTIME has advanced by d. Go's timers
// count CLOCK_MONOTONIC, which stands still while the machine is
// suspended, so a deadline that passed during a suspend would fire late
// by the length of the suspend (a sourceTimer's Recheck cuts that to a
// second). So each call waits twice: on a Go timer, which fires it in the
// common case at the cost of Go's timers, and on a timerfd on
// CLOCK_BOOTTIME, bootSlack later, which fires it as the machine wakes
// from a suspend. Whichever comes first calls f and the other is dropped.
// (The timerfd alone cost five times the CPU: each firing crossed from
// the poller to a goroutine to the timer's reader, waking a thread at
// every hop.) Without a timerfd it waits on Go's timer alone.
func afterFunc(d time.Duration, f func()) func() bool {
	// Go's time reads earlier than the process's start only inside a
	// testing/synctest bubble, whose fake time only Go's timers follow (and
	// whose goroutines the timerfd's reader must not be one of).
	if goTimeIsFake := time.Now().Before(processStart); goTimeIsFake {
		return time.AfterFunc(d, f).Stop // and the queue not made here
	}
	q := bootQueue()
	if q == nil {
		return time.AfterFunc(d, f).Stop
	}
	var called atomic.Bool
	call := func() {
		if called.CompareAndSwap(false, true) {
			f()
		}
	}
	unqueue := q.add(bootTime()+max(d, 0)+bootSlack, call)
	t := time.AfterFunc(d, func() {
		unqueue()
		call()
	})
	return func() bool {
		t.Stop()
		unqueue()
		return called.CompareAndSwap(false, true)
	}
}

// bootSlack is how much later than its Go timer a call's timerfd fires:
// enough that, on a machine that was not suspended, the Go timer fires
// first and takes the call off the timerfd's queue.
const bootSlack = 20 * time.Millisecond

// bootQueue is the process's one timerfd and the calls waiting on it; nil
// if no timerfd could be made.
var bootQueue = sync.OnceValue(func() *bootTimers {
	fd, err := unix.TimerfdCreate(unix.CLOCK_BOOTTIME, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil
	}
	q := &bootTimers{fd: fd, h: indexheap.New(
		func(a, b *bootCall) bool { return a.at < b.at },
		func(c *bootCall, i int) { c.index = i })}
	// A non-blocking descriptor makes os.File wait in the poller, not in
	// a thread of its own.
	go q.run(os.NewFile(uintptr(fd), "timerfd"))
	return q
})

type bootTimers struct {
	fd int
	mu sync.Mutex
	h  indexheap.Heap[*bootCall] // by at
}

type bootCall struct {
	at    time.Duration // CLOCK_BOOTTIME reading
	f     func()
	index int // in h; -1 once fired or stopped
}

// add queues f for at and returns the function that unqueues it.
func (q *bootTimers) add(at time.Duration, f func()) func() bool {
	c := &bootCall{at: at, f: f}
	q.mu.Lock()
	heap.Push(&q.h, c)
	if q.h.Min() == c {
		q.arm()
	}
	q.mu.Unlock()
	return func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		if c.index < 0 {
			return false
		}
		heap.Remove(&q.h, c.index)
		return true // the timerfd may still fire for it: run finds nothing due
	}
}

// arm sets the timerfd to the earliest call (q.mu held). An absolute time
// already past fires it at once.
func (q *bootTimers) arm() {
	if q.h.Len() == 0 {
		return
	}
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(max(int64(q.h.Min().at), 1))}
	if unix.TimerfdSettime(q.fd, unix.TFD_TIMER_ABSTIME, &spec, nil) != nil {
		// Cannot happen with a valid descriptor; never leave a call unfired.
		c := q.h.Min()
		time.AfterFunc(c.at-bootTime(), func() { q.fire() })
	}
}

// run calls what is due each time the timerfd fires.
func (q *bootTimers) run(f *os.File) {
	var buf [8]byte
	for {
		if _, err := f.Read(buf[:]); err != nil {
			return
		}
		q.fire()
	}
}

func (q *bootTimers) fire() {
	q.mu.Lock()
	now := bootTime()
	var due []func()
	for q.h.Len() > 0 && q.h.Min().at <= now {
		due = append(due, heap.Pop(&q.h).(*bootCall).f)
	}
	q.arm()
	q.mu.Unlock()
	// One goroutine for the batch, not one per call: the calls are
	// sourceTimer's, which only take a lock and send on a buffered
	// channel or queue themselves again, and a goroutine each made every
	// firing start and wake a thread (a third of a core at 1,000 timers a
	// second).
	if len(due) > 0 {
		go func() {
			for _, f := range due {
				f()
			}
		}()
	}
}
