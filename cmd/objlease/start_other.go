//go:build !linux

package main

import (
	"context"
	"os/exec"
	"time"
)

// startCommand starts cmd itself: without Linux's parent-death signal and
// child subreapers, a supervisor could not follow what it starts.
func startCommand(cmd *exec.Cmd, _ time.Duration) (task, error) { return startDirect(cmd, true) }

// startTask is startCommand; with tty false the command is never given
// the terminal.
func startTask(cmd *exec.Cmd, _ time.Duration, tty bool) (task, error) { return startDirect(cmd, tty) }

// superviseCmd is Linux's only.
const superviseCmd = "_supervise"

func (c *cli) superviseCmd(fs *flagSet) action {
	return func(context.Context, []string) error {
		return usagef("%s is run's own helper, on Linux only", superviseCmd)
	}
}
