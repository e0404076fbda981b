package emulator

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// sysProcAttr puts the emulator in its own process group, so Stop can signal
// everything it started, and has the kernel kill it if the test binary dies
// without cleaning up (a panic, a -timeout, SIGKILL). Pdeathsig fires when
// the thread that started the child exits; Go only ends threads that a
// goroutine locked and did not unlock, which nothing here does.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// waitStopped returns once every thread of process pid has stopped (or it
// has exited). SIGSTOP takes effect asynchronously: without this, a request
// sent right after Pause can still be served.
func waitStopped(pid int) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WSTOPPED|unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return
		}
	}
}
