//go:build !linux

package supervise

import (
	"log/slog"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/objlease/objlease/objlease/job"
)

// Supported reports whether this platform has the supervisor: only Linux
// has the parent-death signal and child subreapers it needs to follow what
// it starts. Elsewhere the command is started directly, and nothing stops
// it on its own clock if run is stopped: see docs/cli.md.
const Supported = false

// start starts cmd itself, in a process group of its own, given the
// terminal if this process has it and o.TTY is set.
func start(cmd *exec.Cmd, o Options) (Task, error) {
	giveBack := startInGroup(cmd, o.TTY)
	exited, err := spawn(cmd)
	if err != nil {
		giveBack() // the child may have taken it before exec failed
		return nil, err
	}
	return &direct{cmd: cmd, exited: exited, giveBack: giveBack}, nil
}

// direct is a command started directly, in a process group of its own.
type direct struct {
	cmd      *exec.Cmd
	exited   <-chan struct{}
	giveBack func()
}

func (d *direct) Pid() int                   { return d.cmd.Process.Pid }
func (d *direct) Done() <-chan struct{}      { return d.exited }
func (d *direct) Signal(sig os.Signal) error { return signalGroup(d.cmd, sig) }
func (d *direct) Terminate() error           { return signalGroup(d.cmd, syscall.SIGTERM) }
func (d *direct) Kill() error                { return signalGroup(d.cmd, syscall.SIGKILL) }

func (d *direct) Ended() job.Exit {
	d.giveBack()
	return job.Exit{Status: exitStatus(d.cmd.ProcessState), How: d.cmd.ProcessState.String()}
}

// Serve is Linux's only: it returns 1 at once.
func Serve(*slog.Logger, <-chan os.Signal, *os.File, *os.File, time.Duration, int, int, string, []string) int {
	return 1
}
