//go:build !unix

package supervise

import (
	"os"
	"os/exec"
)

// startInGroup starts cmd as is: there are no process groups to use.
func startInGroup(cmd *exec.Cmd, tty bool) (giveBack func()) { return func() {} }

// signalGroup stops cmd: without Unix signals, every signal kills.
func signalGroup(cmd *exec.Cmd, sig os.Signal) error { return cmd.Process.Kill() }
