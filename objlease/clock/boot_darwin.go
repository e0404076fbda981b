package clock

import (
	"time"

	"golang.org/x/sys/unix"
)

// bootTime reads CLOCK_MONOTONIC, which on macOS goes on while the machine
// sleeps; Go's monotonic reading (mach_absolute_time) does not.
func bootTime() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) != nil {
		return osSource{}.Mono()
	}
	return time.Duration(ts.Nano())
}
