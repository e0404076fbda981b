// Package clocktest makes clock readings for tests: readings that carry
// both a wall and a monotonic reading, as time.Now's do, on a machine whose
// wall clock can be stepped and which can be suspended. A real clock cannot
// be stepped or suspended in a test; code that orders or compares readings
// by their wall reading (UnixNano, Round(0), a Time rebuilt from its parts)
// goes wrong only with such readings.
package clocktest

import (
	"fmt"
	"time"
	"unsafe"
)

// Go's time.Time layout (src/time/time.go): with hasMonotonic set in wall,
// wall holds 33 bits of seconds since 1885 and 30 bits of nanoseconds, and
// ext the monotonic reading. TestGoTimeLayout checks it against the
// running Go, so that a change of layout fails a test, not a simulation.
type timeLayout struct {
	wall uint64
	ext  int64
	loc  *time.Location
}

const (
	hasMonotonic   = 1 << 63
	nsecShift      = 30
	secondsPerDay  = 86400
	wallToInternal = (1884*365 + 1884/4 - 1884/100 + 1884/400) * secondsPerDay
	unixToInternal = (1969*365 + 1969/4 - 1969/100 + 1969/400) * secondsPerDay
)

// GoTime returns what time.Now returns on a machine whose wall clock reads
// wall and whose monotonic clock reads mono: Sub, Before, After and Equal
// between two such readings use mono; UnixNano, Round(0) and formatting
// use wall. wall must lie in 1885–2157, which time.Now's readings do.
func GoTime(wall time.Time, mono time.Duration) time.Time {
	sec := wall.Unix() + unixToInternal - wallToInternal
	if sec < 0 || sec >= 1<<33 {
		panic(fmt.Sprintf("clocktest: wall reading %v outside 1885–2157", wall))
	}
	var t time.Time
	*(*timeLayout)(unsafe.Pointer(&t)) = timeLayout{
		wall: hasMonotonic | uint64(sec)<<nsecShift | uint64(wall.Nanosecond()),
		ext:  int64(mono),
	}
	return t
}
