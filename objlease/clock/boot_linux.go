package clock

import "golang.org/x/sys/unix"

// bootClock is CLOCK_BOOTTIME, which, unlike Go's monotonic reading
// (CLOCK_MONOTONIC), goes on while the machine is suspended.
const bootClock = unix.CLOCK_BOOTTIME
