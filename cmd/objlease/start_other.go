//go:build !linux

package main

import (
	"context"
	"os/exec"
	"time"
)

// startCommand starts cmd itself: without Linux's parent-death signal and
// child subreapers, a supervisor could not follow what it starts.
func startCommand(cmd *exec.Cmd, _ time.Duration) (task, error) { return startDirect(cmd) }

// superviseCmd is Linux's only.
const superviseCmd = "_supervise"

func (c *cli) superviseCmd(fs *flagSet) action {
	return func(context.Context, []string) error {
		return usagef("%s is run's own helper, on Linux only", superviseCmd)
	}
}
