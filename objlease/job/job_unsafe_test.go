//go:build objlease_unsafe

package job

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/objlease/objlease/internal/safeguards"
)

// With JudgeByValidity off, a task stopped at its deadline that exits 0
// is taken for a task that finished, and its work is finished.
func TestStoppedTaskFinishedWithoutJudgeByValidity(t *testing.T) {
	safeguards.JudgeByValidity.Store(false)
	defer safeguards.JudgeByValidity.Store(true)
	synctest.Test(t, func(t *testing.T) {
		task := newFakeTask(Exit{How: "exit status 0", Stopped: true})
		task.end()
		if res, _ := steps(&Job{Lease: newFakeLease(time.Second), Task: task}); res.Outcome != Done {
			t.Fatalf("outcome %v; the unsafe judge should have said done", res.Outcome)
		}
	})
}

// With DeadlineOnRenewal off, the supervisor learns a renewal up to a
// poll late, so at a 100 ms TTL it holds an end that has already passed.
func TestDeadlineLagsWithoutDeadlineOnRenewal(t *testing.T) {
	safeguards.DeadlineOnRenewal.Store(false)
	defer safeguards.DeadlineOnRenewal.Store(true)
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		now := func() time.Duration { return time.Since(start) }
		l := newFakeLease(100 * time.Millisecond)
		told := make(chan time.Duration, 100)
		stop := make(chan struct{})
		defer close(stop)
		go Deadlines(l, now, 0, func(end time.Duration) bool { told <- end; return true }, stop)
		time.Sleep(40 * time.Millisecond)
		l.renew(100 * time.Millisecond)   // the true end is now 140 ms
		time.Sleep(55 * time.Millisecond) // 95 ms: the poll at 100 ms has not come
		synctest.Wait()
		var last time.Duration
		for len(told) > 0 {
			last = <-told
		}
		if last >= 140*time.Millisecond {
			t.Fatalf("told %v at 95 ms: the poll should have lagged the renewal at 40 ms", last)
		}
	})
}
