//go:build unix && !linux

package emulator

import "syscall"

// sysProcAttr puts the emulator in its own process group, so Stop can signal
// everything it started. Only Linux can also tie the emulator's life to the
// test binary's; elsewhere TestMain's StopAll is all there is.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// waitStopped cannot tell here when SIGSTOP has taken effect.
func waitStopped(pid int) {}
