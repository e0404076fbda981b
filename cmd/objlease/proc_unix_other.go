//go:build unix && !linux

package main

import "syscall"

// setDeathSignal does nothing: only Linux kills a child when its parent
// dies. A command whose run was SIGKILLed keeps running.
func setDeathSignal(*syscall.SysProcAttr) {}
