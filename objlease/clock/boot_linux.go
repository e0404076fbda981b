package clock

import (
	"time"

	"golang.org/x/sys/unix"
)

// bootTime reads CLOCK_BOOTTIME, which, unlike Go's monotonic reading
// (CLOCK_MONOTONIC), goes on while the machine is suspended.
func bootTime() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts) != nil {
		return osSource{}.Mono()
	}
	return time.Duration(ts.Nano())
}
