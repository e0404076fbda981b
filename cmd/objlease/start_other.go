//go:build !linux

package main

import (
	"context"
	"os/exec"
	"time"
)

// startCommand starts cmd itself: without Linux's parent-death signal and
// child subreapers, a supervisor could not follow what it starts.
// Nothing stops the command on its own clock if run is stopped: see
// docs/cli.md.
func startCommand(cmd *exec.Cmd, _ time.Duration, _ validity) (task, error) {
	return startDirect(cmd, true)
}

// startTask is startCommand; with tty false the command is never given
// the terminal.
func startTask(cmd *exec.Cmd, _ time.Duration, tty bool, _ validity) (task, error) {
	return startDirect(cmd, tty)
}

// validity is what a supervisor would need of a lease: *objlease.Lease.
type validity interface {
	ValidFor() time.Duration
	Done() <-chan struct{}
}

// superviseCmd is Linux's only.
const superviseCmd = "_supervise"

func (c *cli) superviseCmd(fs *flagSet) action {
	return func(context.Context, []string) error {
		return usagef("%s is run's own helper, on Linux only", superviseCmd)
	}
}
