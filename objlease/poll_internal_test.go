package objlease

import (
	"testing"
	"time"
)

// TestPhaseTrackerNarrowsThenSkipsAndFallsBack: reads of a holder renewing
// exactly every P narrow its phase until each read comes just after a
// renewal;
// a read that finds a renewal missing, a new holder, or a count that went
// back all drop back to plain polling.
func TestPhaseTrackerNarrowsThenSkipsAndFallsBack(t *testing.T) {
	const P = 3 * time.Second
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	phase := 1234 * time.Millisecond // renewal n lands at t0 + phase + n P
	count := func(at time.Time) uint64 {
		if d := at.Sub(t0) - phase; d >= 0 {
			return uint64(d / P)
		}
		t.Fatal("read before the first renewal")
		return 0
	}
	p := phaseTracker{base: t0}
	read := func(at time.Time) {
		p.add(sighting{sent: at.Sub(t0), got: at.Sub(t0), token: 7, count: count(at)}, P)
	}
	now := t0.Add(2 * P)
	read(now)
	if _, ok := p.next(now, 1); ok {
		t.Fatal("a schedule from one read")
	}
	gaps := []time.Duration{}
	for i := 0; i < 20; i++ {
		next, ok := p.next(now, 1)
		if !ok {
			next = now.Add(P * 9 / 10) // plain polling
		}
		gaps = append(gaps, next.Sub(now))
		now = next
		read(now)
	}
	// The tail of the schedule is one read every P, just after a renewal.
	for _, g := range gaps[len(gaps)-5:] {
		if g != P {
			t.Fatalf("gaps %v: want the last ones P apart", gaps)
		}
	}
	if after := now.Sub(t0.Add(phase)) % P; after <= 0 || after > P/32 {
		t.Fatalf("last read %v after a renewal's landing, want within P/32", after)
	}
	a, b := p.bounds()
	if w := b.Sub(a); w > P/32 {
		t.Fatalf("phase window %v, want <= P/32", w)
	}

	// The holder stops: the read two renewals later finds none.
	stopped := p
	stopped.reads = append([]sighting(nil), p.reads...)
	last := stopped.reads[len(stopped.reads)-1]
	at := now.Add(2 * P)
	stopped.add(sighting{sent: at.Sub(t0), got: at.Sub(t0), token: 7, count: last.count}, P)
	if _, ok := stopped.next(at, 1); ok || len(stopped.reads) != 1 {
		t.Fatalf("after a missing renewal: %d reads kept, a schedule %v; want plain polling", len(stopped.reads), ok)
	}

	for name, s := range map[string]sighting{
		"new holder":      {sent: at.Sub(t0), got: at.Sub(t0), token: 8, count: 0},
		"count went back": {sent: at.Sub(t0), got: at.Sub(t0), token: 7, count: last.count - 1},
		"count too far":   {sent: at.Sub(t0), got: at.Sub(t0), token: 7, count: last.count + maxCountSpan(P) + 1},
	} {
		q := p
		q.reads = append([]sighting(nil), p.reads...)
		q.add(s, P)
		if len(q.reads) != 1 {
			t.Errorf("%s: %d reads kept, want 1", name, len(q.reads))
		}
	}
}
