package clock_test

import (
	"testing"
	"time"

	"github.com/objlease/objlease/objlease/clock"
)

func TestFakeFiresInOrderAtDeadlines(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := clock.NewFake(start)
	late := f.NewTimer(3 * time.Second)
	early := f.NewTimer(time.Second)
	stopped := f.NewTimer(2 * time.Second)
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop must report true once, then false")
	}
	f.Advance(500 * time.Millisecond)
	select {
	case <-early.C():
		t.Fatal("fired early")
	default:
	}
	f.Advance(5 * time.Second)
	if got := <-early.C(); !got.Equal(start.Add(time.Second)) {
		t.Fatalf("early fired at %v", got)
	}
	if got := <-late.C(); !got.Equal(start.Add(3 * time.Second)) {
		t.Fatalf("late fired at %v", got)
	}
	select {
	case <-stopped.C():
		t.Fatal("a stopped timer fired")
	default:
	}
	if f.Timers() != 0 || !f.Now().Equal(start.Add(5500*time.Millisecond)) {
		t.Fatalf("timers %d, now %v", f.Timers(), f.Now())
	}
	if zero := f.NewTimer(0); len(zero.C()) != 1 {
		t.Fatal("a zero timer must fire at once")
	}
}
