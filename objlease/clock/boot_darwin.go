package clock

import "golang.org/x/sys/unix"

// bootClock is CLOCK_MONOTONIC, which on macOS goes on while the machine
// sleeps; Go's monotonic reading (mach_absolute_time) does not.
const bootClock = unix.CLOCK_MONOTONIC
