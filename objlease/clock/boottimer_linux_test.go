package clock

import (
	"math/rand/v2"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// The machine's timers fire every call once, never before its time, and
// a stopped call never: through afterFunc (a Go timer, and the timerfd as
// a safety net), and on the timerfd alone (as after a suspend, when the
// Go timer would come late).
func TestBootTimersFireOnceInTime(t *testing.T) {
	q := bootQueue()
	if q == nil {
		t.Fatal("no CLOCK_BOOTTIME timerfd on this Linux machine")
	}
	t.Run("afterFunc", func(t *testing.T) { fireOnceInTime(t, afterFunc) })
	t.Run("timerfd", func(t *testing.T) {
		fireOnceInTime(t, func(d time.Duration, f func()) func() bool { return q.add(bootTime()+d, f) })
	})
}

func fireOnceInTime(t *testing.T, afterFunc func(time.Duration, func()) func() bool) {
	const n = 2000
	var (
		wg      sync.WaitGroup
		early   atomic.Int32
		fired   [n]atomic.Int32
		stopped [n]bool
		stops   [n]func() bool
	)
	for i := range n {
		d := time.Duration(rand.IntN(50)) * time.Millisecond
		at := bootTime() + d
		wg.Add(1)
		stops[i] = afterFunc(d, func() {
			defer wg.Done()
			if bootTime() < at {
				early.Add(1)
			}
			fired[i].Add(1)
		})
	}
	for i := 0; i < n; i += 3 {
		if stops[i]() {
			stopped[i] = true
			wg.Done()
		}
	}
	wg.Wait()
	time.Sleep(60 * time.Millisecond) // a stopped call that fired would show by now
	for i := range n {
		want := int32(1)
		if stopped[i] {
			want = 0
			if stops[i]() {
				t.Errorf("call %d: a second stop reported it prevented the call", i)
			}
		} else if stops[i]() {
			t.Errorf("call %d: stop after firing reported it prevented the call", i)
		}
		if got := fired[i].Load(); got != want {
			t.Errorf("call %d fired %d times, want %d", i, got, want)
		}
	}
	if e := early.Load(); e > 0 {
		t.Errorf("%d calls fired before their CLOCK_BOOTTIME deadline", e)
	}
}

// Real's timers wait on the timerfd, so that one due during a suspend
// fires as the machine wakes rather than up to Recheck later.
func TestRealTimersWaitOnBootClock(t *testing.T) {
	q := bootQueue()
	queued := func() int {
		q.mu.Lock()
		defer q.mu.Unlock()
		return q.h.Len()
	}
	before := queued()
	tm := Real().NewTimer(time.Hour)
	defer tm.Stop()
	if got := queued(); got != before+1 {
		t.Fatalf("a timer of Real queued %d calls on the boot clock, want 1", got-before)
	}
}

// Inside a testing/synctest bubble the machine's timers are Go's, which follow
// the bubble's fake time: the timerfd's reader, outside the bubble, must
// never call into it (the simulation's bubbled tests hung on that).
func TestMachineTimersInSynctestBubble(t *testing.T) {
	bootQueue() // made outside the bubble, as by any earlier timer
	synctest.Test(t, func(t *testing.T) {
		fired := make(chan struct{})
		osSource{}.AfterFunc(10*time.Millisecond, func() { close(fired) })
		<-fired
	})
}

// The first timer of a process may be made inside a testing/synctest
// bubble (the simulation's tests start so): the timerfd's reader must not
// be started there, where it would block the bubble's time for good. A
// process of its own makes its first timer inside a bubble.
func TestFirstTimerInSynctestBubble(t *testing.T) {
	if os.Getenv("OBJLEASE_FIRST_TIMER_IN_BUBBLE") == "1" {
		synctest.Test(t, func(t *testing.T) {
			tm := Real().NewTimer(time.Hour) // an hour of the bubble's time
			<-tm.C()
		})
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFirstTimerInSynctestBubble$", "-test.timeout=20s")
	cmd.Env = append(os.Environ(), "OBJLEASE_FIRST_TIMER_IN_BUBBLE=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("a first timer inside a synctest bubble: %v\n%s", err, out)
	}
}
