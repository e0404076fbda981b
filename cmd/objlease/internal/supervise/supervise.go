// Package supervise runs the command of run, elect and group join: in a
// process group of its own, with signals passed on to that group, and
// stopped by one sequence, SIGTERM and SIGKILL once a grace period has
// passed. What a command's end means (done, failed, lost) is package
// job's to judge.
//
// On Linux the command runs under a supervisor, this binary started again
// as the hidden command [Command] (see [Serve]), which keeps everything the
// command starts from outliving it and stops it on its own clock when the
// lease's validity ends. Elsewhere the command is started directly, and
// only the command itself is waited for.
package supervise

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"

	"github.com/objlease/objlease/objlease/job"
)

// Command is the name of the hidden command that runs [Serve].
const Command = "_supervise"

// Why a command could not be run.
var (
	ErrCannotStart = errors.New("command could not be started")
	ErrNotFound    = errors.New("command not found")
)

// Options say how [Start] runs a command.
type Options struct {
	// Grace is how long the command has between SIGTERM and SIGKILL; on
	// Linux also what it left running once it exited.
	Grace time.Duration
	// TTY gives the command the terminal if this process has it.
	TTY bool
	// Lease is the lease the command runs under: on Linux the supervisor
	// stops the command once its validity ends.
	Lease job.Lease
	// Args are added to the supervisor's command line (--log-format).
	Args []string
}

// A Task is a started command.
type Task interface {
	job.Task
	Pid() int
}

// Start starts cmd (with its Path, Args, Env and standard files set), in a
// process group of its own; on Linux under a supervisor. A command that
// cannot be started is found out before it, or reported by Ended.
func Start(cmd *exec.Cmd, o Options) (Task, error) { return start(cmd, o) }

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
