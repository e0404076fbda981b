package main

import "syscall"

// setDeathSignal makes the kernel kill the command when the thread that
// started it exits; spawn keeps that thread alive while the command runs.
func setDeathSignal(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGKILL }
