package main

import (
	"context"
	"os"
	"syscall"
	"time"

	"github.com/objlease/objlease/cmd/objlease/internal/supervise"
)

// superviseCmd is the hidden command that runs the supervisor of run's,
// elect's and group join's commands (see package supervise); Linux's only.
func (c *cli) superviseCmd(fs *flagSet) action {
	if !supervise.Supported {
		return func(context.Context, []string) error {
			return usagef("%s is run's own helper, on Linux only", supervise.Command)
		}
	}
	grace := fs.Duration("grace", 10*time.Second, "how long what COMMAND left running has between SIGTERM and SIGKILL")
	parent := fs.Int("parent", 0, "pid of the run that started this supervisor")
	tty := fs.Int("tty", 0, "process group to give the terminal back to; 0: the terminal is not run's")
	return func(ctx context.Context, pos []string) error {
		if len(pos) < 2 {
			return usagef("%s is run's own helper: %s --parent PID -- PATH ARGV...", supervise.Command, supervise.Command)
		}
		report, deadlines := os.NewFile(3, "status"), os.NewFile(4, "deadlines")
		if report == nil || deadlines == nil {
			return usagef("%s is run's own helper: it reports on file descriptor 3 and reads deadlines on 4", supervise.Command)
		}
		syscall.CloseOnExec(3)
		syscall.CloseOnExec(4)
		os.Exit(supervise.Serve(c.log, c.signals, report, deadlines, *grace, *parent, *tty, pos[0], pos[1:]))
		return nil
	}
}

// supervisorArgs are the flags of this process that the supervisor it
// starts takes too: --log-format.
func supervisorArgs() []string {
	if logFormatArg == "" {
		return nil
	}
	return []string{logFormatArg}
}
