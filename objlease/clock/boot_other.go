//go:build !linux && !darwin

package clock

import "time"

// bootTime is Go's monotonic reading. On Windows that is the interrupt
// time, which counts sleep and hibernation; elsewhere a suspend may go
// unseen by it, and only a forward step of the wall clock or the store
// reveals it.
func bootTime() time.Duration { return osSource{}.Mono() }
