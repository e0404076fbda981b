//go:build unix && !linux

package supervise

import (
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// startInGroup makes cmd start in a process group of its own, so that
// signals reach whatever it starts too (a shell script's children). Only
// Linux kills a child when its parent dies: a command whose run was
// SIGKILLed keeps running. If tty
// is set and run holds the terminal, the group gets it, so that the command
// can read from it; the returned function takes it back once the command
// has exited.
func startInGroup(cmd *exec.Cmd, tty bool) (giveBack func()) {
	attr := &syscall.SysProcAttr{Setpgid: true}
	giveBack = func() {}
	if fg, err := unix.IoctlGetInt(0, unix.TIOCGPGRP); tty && err == nil && fg == syscall.Getpgrp() {
		attr.Foreground, attr.Ctty = true, 0 // Ctty is the child's fd 0, its stdin
		giveBack = func() {
			// A background process that takes the terminal gets SIGTTOU.
			// Ignored only now: the command would inherit the disposition.
			signal.Ignore(syscall.SIGTTOU)
			_ = unix.IoctlSetPointerInt(0, unix.TIOCSPGRP, syscall.Getpgrp())
		}
	}
	cmd.SysProcAttr = attr
	return giveBack
}

// signalGroup sends sig to the process group of cmd, a started command.
func signalGroup(cmd *exec.Cmd, sig os.Signal) error {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return cmd.Process.Signal(sig)
	}
	err := syscall.Kill(-cmd.Process.Pid, s)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}
