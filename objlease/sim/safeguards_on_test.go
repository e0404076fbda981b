//go:build !objlease_unsafe

package sim

import "sync/atomic"

// A normal build has no switches: every safety measure is a constant that
// is always on. The safeguards-off table (TestCheckerFindsViolations) and
// -sim.off with a switch need -tags objlease_unsafe (checker_unsafe_test.go).

// safeguardSwitch returns nil: no switch is built in.
func safeguardSwitch(string) *atomic.Bool { return nil }

// switchesHint completes the message for an unknown safeguard.
const switchesHint = " (the switches of internal/safeguards need -tags objlease_unsafe)"

// pathLockOff reports whether the file store's PathLock safeguard is off.
func pathLockOff() bool { return false }

// stopTaskDirectly reports whether a runner stops its command directly
// rather than through its supervisor (cmd/objlease/internal/supervise).
func stopTaskDirectly() bool { return true }
