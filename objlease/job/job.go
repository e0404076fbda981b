// Package job runs a task under a lease and decides what the task's end
// means: whether the work it did may be committed (a fenced batch, a tick
// marked done), whether it failed, or whether the lease ended under it.
// The objlease command's run, elect and group join use it, and so does
// the simulation (objlease/sim), which runs it against commands that
// misbehave, runners and supervisors that pause, and leases that are lost.
//
// The rule it keeps: a task counts as done only if it exited by itself,
// with status 0, while its lease was still valid at the moment its exit
// was seen. A task that was stopped, at its lease's deadline by whoever
// enforced it or by the runner after a loss or a signal, never counts as
// done, whatever its exit status: a well-behaved command exits 0 on
// SIGTERM with its work half written.
//
// A task's lease ends at two moments that different processes watch: the
// runner (which renews the lease) sees it lost, and a supervisor of the
// task, if there is one, stops the task when the last deadline it was told
// ([Deadlines]) passes without a newer one, so that a stopped runner
// cannot keep the task running past the validity. Either may be paused
// while the other acts: [Task.Terminate] and [Task.Kill] must reach the
// task without going through the supervisor.
package job

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"syscall"
	"time"
)

// Lease is what a job needs of its lease: *objlease.Lease.
type Lease interface {
	Token() uint64
	// ValidFor is how much longer the lease is certainly this holder's;
	// zero or negative once it is not.
	ValidFor() time.Duration
	// Done is closed when the lease is lost or released; Err says why.
	Done() <-chan struct{}
	Err() error
	// Renewed is closed by the next renewal that moves the validity on.
	Renewed() <-chan struct{}
}

// A Task is a started command (or function) run under a lease.
type Task interface {
	// Done is closed once the task has ended (for a command under a
	// supervisor: once the supervisor has seen everything it started end).
	Done() <-chan struct{}
	// Signal passes a signal from the runner's user on to the task.
	Signal(sig os.Signal) error
	// Terminate asks the task to stop (SIGTERM to its process group),
	// directly, not through a supervisor that may be paused.
	Terminate() error
	// Kill ends the task and everything it started at once, directly.
	Kill() error
	// Ended says, once Done is closed, how the task ended.
	Ended() Exit
}

// Exit is how a task ended.
type Exit struct {
	// Status is the shell's: 0 for success, 128+N if killed by signal N.
	Status int
	// How says it in words: "exit status 1", "signal: terminated".
	How string
	// Stopped is set if the task did not end by itself: its supervisor
	// stopped it because the lease's validity ended.
	Stopped bool
	// Err is set if the task was never run: it could not be started, or
	// the validity ended before it could start.
	Err error
}

// Outcome is what a task's end means for the work it did.
type Outcome int

const (
	// Done: the task exited by itself with status 0 while its lease was
	// valid. Its work may be committed; nothing else may be.
	Done Outcome = iota
	// Failed: the task exited by itself with another status while its
	// lease was valid.
	Failed
	// Interrupted: the runner's user signalled the task to stop (SIGINT,
	// SIGTERM, SIGHUP), or the runner was asked to stop it (Job.Stop), and
	// it exited.
	Interrupted
	// Lost: the lease ended, or its validity did, before the task's exit
	// was seen, or the task was stopped at its deadline. Whatever its
	// status, its work is not committed, and an elector campaigns again.
	Lost
	// NotStarted: the task never ran (see Exit.Err).
	NotStarted
)

var outcomeNames = [...]string{"done", "failed", "interrupted", "lost", "not started"}

func (o Outcome) String() string { return outcomeNames[o] }

// Result is how a job ended.
type Result struct {
	Outcome Outcome
	Exit    Exit
	// Cause is why the lease ended, for Lost: the lease's Err, or an
	// error matching ErrValidityEnded.
	Cause error
	// Signal is the user's signal the task was stopped by, for Interrupted
	// (nil if Job.Stop stopped it).
	Signal os.Signal
	// FinishErr is what Finish returned (Done only).
	FinishErr error
	// ReleaseErr is what Release returned.
	ReleaseErr error
}

// ErrValidityEnded is the cause of a Lost job whose lease had not ended
// when its task's exit was seen, but whose validity had.
var ErrValidityEnded = errors.New("the lease's validity ended before the task's exit was seen")

// A Job is a started task and what to do once it ends.
type Job struct {
	Lease Lease
	Task  Task
	// Grace is how long the task has between Terminate and Kill.
	Grace time.Duration
	// Signals from the runner's user are passed on to the task; a SIGINT,
	// SIGTERM or SIGHUP among them makes the end Interrupted.
	Signals <-chan os.Signal
	// Stop, once closed, stops the task although the lease is held (a
	// shard handed over, a worker leaving): SIGTERM, SIGKILL after Grace.
	Stop <-chan struct{}
	// Stopping is told, once, why the runner is stopping the task before
	// it sends SIGTERM: the lease's Err, or nil for Stop; nil: nothing is
	// told.
	Stopping func(cause error)
	// Finish runs only for a task that is Done, before the release: the
	// fenced steps that make its work count (commit a batch, mark a tick).
	Finish func() error
	// Release gives the lease back; it runs last, whatever the outcome.
	Release func() error
	// Logger gets the escalation to SIGKILL; nil: slog.Default().
	Logger *slog.Logger
}

// Run supervises the task until it ends, stopping it if the lease ends
// first (SIGTERM, SIGKILL after Grace), then judges its end, runs Finish
// if it is Done, and Release.
func (j *Job) Run() Result {
	log := j.Logger
	if log == nil {
		log = slog.Default()
	}
	var sig os.Signal
	lossSeen, asked := false, false
	lost, stop := j.Lease.Done(), j.Stop
	var kill <-chan time.Time
	terminate := func(cause error) {
		lost, stop = nil, nil
		if j.Stopping != nil {
			j.Stopping(cause)
		}
		if err := j.Task.Terminate(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			log.Warn("cannot signal the command", slog.Any("err", err))
		}
		kill = time.After(j.Grace)
	}
	for ended := false; !ended; {
		select {
		case <-j.Task.Done():
			ended = true
		case s := <-j.Signals:
			if terminating(s) {
				sig = s
			}
			if err := j.Task.Signal(s); err != nil && !errors.Is(err, os.ErrProcessDone) {
				log.Warn("cannot pass the signal on to the command", slog.String("signal", s.String()), slog.Any("err", err))
			}
		case <-lost:
			lossSeen = true
			terminate(j.Lease.Err())
		case <-stop:
			asked = true
			terminate(nil)
		case <-kill:
			kill = nil
			log.Error("command still running after --grace " + j.Grace.String() + "; sending SIGKILL")
			if err := j.Task.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
				log.Warn("cannot kill the command", slog.Any("err", err))
			}
		}
	}
	res := judge(j.Lease, j.Task.Ended(), lossSeen, asked, sig)
	if res.Outcome == Done && j.Finish != nil {
		res.FinishErr = j.Finish()
	}
	if j.Release != nil {
		res.ReleaseErr = j.Release()
	}
	return res
}

// judge decides what a task's end means. The lease's validity is read
// now, when the exit has been seen: a runner that was paused while the
// task ended (or was stopped) finds the validity over, and the task's
// status then counts for nothing.
func judge(l Lease, exit Exit, lossSeen, asked bool, sig os.Signal) Result {
	res := Result{Exit: exit}
	valid := l.ValidFor() > 0
	if !judgeByValidity() {
		// Unsafe builds only: what the runner believed, not the lease.
		exit.Stopped, valid = false, true
	}
	switch {
	case exit.Err != nil:
		res.Outcome = NotStarted
	case lossSeen || exit.Stopped || !valid:
		res.Outcome, res.Cause = Lost, l.Err()
		if res.Cause == nil {
			res.Cause = ErrValidityEnded
		}
	case sig != nil || asked:
		res.Outcome, res.Signal = Interrupted, sig
	case exit.Status != 0:
		res.Outcome = Failed
	default:
		res.Outcome = Done
	}
	return res
}

// terminating reports whether a user's signal asks the task to stop.
func terminating(s os.Signal) bool {
	return s == os.Interrupt || s == syscall.SIGTERM || s == syscall.SIGHUP
}

// Deadlines tells each later end of l's validity, as a reading of now, as
// soon as a renewal moves it, until l ends or stop is closed; told is the
// end already told. now is read before ValidFor, so the end told is never
// later than the true one. tell returning false ends it.
func Deadlines(l Lease, now func() time.Duration, told time.Duration, tell func(end time.Duration) bool, stop <-chan struct{}) {
	var poll <-chan time.Time
	if !deadlineOnRenewal() {
		// Unsafe builds only: a poll, which lags each renewal.
		t := time.NewTicker(deadlinePoll)
		defer t.Stop()
		poll = t.C
	}
	for {
		renewed := l.Renewed() // before ValidFor: a renewal after it closes this
		if poll != nil {
			renewed = nil
		}
		at := now()
		if v := l.ValidFor(); v > 0 && at+v > told {
			if !tell(at + v) {
				return
			}
			told = at + v
		}
		select {
		case <-renewed:
		case <-poll:
		case <-l.Done():
			return
		case <-stop:
			return
		}
	}
}

// deadlinePoll is how often Deadlines read the validity before it woke on
// each renewal (unsafe builds only).
const deadlinePoll = 100 * time.Millisecond

// Func starts f as a task: work done in this process, under ctx. Asking
// the task to stop (Terminate, Kill) ends f's context, and f must return
// then: a goroutine cannot be killed. f returning nil is an exit with
// status 0; an error, status 1, which Exit.How names.
func Func(ctx context.Context, f func(ctx context.Context) error) Task {
	ctx, cancel := context.WithCancel(ctx)
	t := &funcTask{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(t.done)
		defer cancel()
		if err := f(ctx); err != nil {
			t.exit = Exit{Status: 1, How: err.Error()}
			return
		}
		t.exit = Exit{How: "returned"}
	}()
	return t
}

type funcTask struct {
	cancel context.CancelFunc
	done   chan struct{}
	exit   Exit // set before done is closed
}

func (t *funcTask) Done() <-chan struct{}  { return t.done }
func (t *funcTask) Signal(os.Signal) error { return nil }
func (t *funcTask) Terminate() error       { t.cancel(); return nil }
func (t *funcTask) Kill() error            { t.cancel(); return nil }
func (t *funcTask) Ended() Exit            { <-t.done; return t.exit }
