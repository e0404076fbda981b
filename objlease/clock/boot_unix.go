//go:build linux || darwin

package clock

import (
	"time"

	"golang.org/x/sys/unix"
)

// bootTime reads bootClock, which goes on while the machine is suspended,
// unlike Go's monotonic reading.
func bootTime() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(bootClock, &ts) != nil {
		return osSource{}.Mono()
	}
	return time.Duration(ts.Nano())
}
