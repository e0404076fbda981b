package clocktest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/objlease/objlease/objlease/clock/clocktest"
)

// GoTime's readings behave as time.Now's do after a wall-clock step: the
// monotonic reading orders them, the wall reading is what UnixNano shows.
func TestGoTimeLayout(t *testing.T) {
	w := time.Date(2026, 12, 2, 5, 0, 0, 123, time.UTC)
	a := clocktest.GoTime(w, time.Minute)
	b := clocktest.GoTime(w.Add(-time.Hour), time.Minute+time.Second) // stepped back an hour, 1 s later
	if !a.Round(0).Equal(w) || a.UnixNano() != w.UnixNano() {
		t.Fatalf("wall reading of %v is not %v", a, w)
	}
	if d := b.Sub(a); d != time.Second || !a.Before(b) || b.Equal(a) {
		t.Fatalf("b - a = %v (Before %v); want the monotonic 1s", d, a.Before(b))
	}
	if d := b.UnixNano() - a.UnixNano(); time.Duration(d) != -time.Hour+0 {
		t.Fatalf("wall difference %v, want -1h", time.Duration(d))
	}
	if !strings.Contains(b.String(), "m=+61.0") {
		t.Fatalf("%v shows no monotonic reading", b)
	}
	if now := time.Now(); !strings.Contains(now.String(), "m=") {
		t.Fatalf("time.Now() %v carries no monotonic reading here", now)
	}
}
