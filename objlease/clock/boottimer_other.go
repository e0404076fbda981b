//go:build !linux

package clock

import "time"

// afterFunc calls f after d on Go's timers. Where they do not count a
// suspend (macOS), a deadline passed during one is seen within Recheck of
// waking.
func afterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}
