// Package supervise runs the command of run, elect and group join: in a
// process group of its own, with signals passed on to that group, and
// stopped by one sequence, SIGTERM and SIGKILL once a grace period has
// passed.
//
// On Linux the command runs under a supervisor, this binary started again
// as the hidden command [Command] (see [Serve]), which keeps everything the
// command starts from outliving it and stops it on its own clock when the
// lease's validity ends. Elsewhere the command is started directly, and
// only the command itself is waited for.
package supervise

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// Command is the name of the hidden command that runs [Serve].
const Command = "_supervise"

// Why a command could not be run.
var (
	ErrCannotStart = errors.New("command could not be started")
	ErrNotFound    = errors.New("command not found")
)

// Validity is what the supervisor needs of a lease: *objlease.Lease.
type Validity interface {
	ValidFor() time.Duration
	Done() <-chan struct{}
}

// Options say how [Start] runs a command.
type Options struct {
	// Grace is how long the command has between SIGTERM and SIGKILL; on
	// Linux also what it left running once it exited.
	Grace time.Duration
	// TTY gives the command the terminal if this process has it.
	TTY bool
	// Lease is the lease the command runs under: on Linux the supervisor
	// stops the command once its validity ends.
	Lease Validity
	// Args are added to the supervisor's command line (--log-format).
	Args []string
}

// A Task is a started command.
type Task interface {
	Pid() int
	// Done is closed once the command has exited (on Linux: once
	// everything it started has).
	Done() <-chan struct{}
	// Signal passes sig on to the command's process group.
	Signal(sig os.Signal) error
	// Kill kills the command, at once (on Linux: all it started too).
	Kill() error
	// Ended says, once Done is closed, how the command ended: the shell's
	// status and a description, or why it could not be started.
	Ended() (status int, how string, err error)
}

// Start starts cmd (with its Path, Args, Env and standard files set), in a
// process group of its own; on Linux under a supervisor. A command that
// cannot be started is found out before it, or reported by Ended.
func Start(cmd *exec.Cmd, o Options) (Task, error) { return start(cmd, o) }

// Tend waits until t has exited, passing every signal from signals on to
// its process group. Once stop is closed it calls stopping (which says
// why) and stops t as [Stop] does. It reports whether stop closed before
// the command exited.
func Tend(log *slog.Logger, t Task, signals <-chan os.Signal, stop <-chan struct{}, stopping func(), grace time.Duration) bool {
	for {
		select {
		case <-t.Done():
			return false
		case s := <-signals:
			pass(log, t, s)
		case <-stop:
			stopping()
			Stop(log, t, signals, grace)
			return true
		}
	}
}

// Stop sends t SIGTERM, and SIGKILL if it is still running after grace,
// passing the signals from signals on meanwhile; it returns once t has
// exited. It is the one way a command is stopped.
func Stop(log *slog.Logger, t Task, signals <-chan os.Signal, grace time.Duration) {
	signalTask(log, t, syscall.SIGTERM)
	timer := time.NewTimer(grace)
	defer timer.Stop()
	kill := timer.C
	for {
		select {
		case <-t.Done():
			return
		case s := <-signals:
			pass(log, t, s)
		case <-kill:
			kill = nil
			log.Error(fmt.Sprintf("command still running after --grace %v; sending SIGKILL", grace))
			if err := t.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
				log.Warn("cannot kill the command", slog.Any("err", err))
			}
		}
	}
}

func pass(log *slog.Logger, t Task, s os.Signal) {
	log.Debug("passing signal on to the command", slog.String("signal", s.String()))
	signalTask(log, t, s)
}

// signalTask sends sig to the command's process group.
func signalTask(log *slog.Logger, t Task, sig os.Signal) {
	if err := t.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		log.Warn("cannot signal the command", slog.String("signal", sig.String()), slog.Any("err", err))
	}
}

// spawn starts cmd and waits for it on one goroutine locked to its OS
// thread, and returns a channel closed once it has exited. On Linux the
// command gets its parent-death signal when the thread that forked it
// exits (Pdeathsig): locked, that thread is not one the runtime may retire
// while the command runs, so it lives until the command has exited, or
// dies with this process.
func spawn(cmd *exec.Cmd) (<-chan struct{}, error) {
	started := make(chan error, 1)
	exited := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait() // the status is read from cmd.ProcessState
		close(exited)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return exited, nil
}

// exitStatus is the shell's view of how a process ended.
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
