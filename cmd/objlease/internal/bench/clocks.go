package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/objlease/objlease/internal/ctxsleep"
	"github.com/objlease/objlease/providers"
)

// A store stamps a write with Last-Modified and answers with a Date; the
// store-clock rule reads the one against the other. The two need not come
// from the same clock at the same moment: an HTTP server may refresh a
// cached Date once a second (versitygw's does), so that its Date runs up
// to a second behind the clock that stamps its writes. The rule then waits
// that much longer, by design (a Date behind only delays a takeover), and
// the failover goal must say so rather than blame the waiter.

// dateLag is how far the store's Date runs behind its Last-Modified:
// within [Lo, Hi], if Known.
type dateLag struct {
	LoMs  float64 `json:"lo_ms"`
	HiMs  float64 `json:"hi_ms"`
	Known bool    `json:"known"`
}

// widen is the range that holds both l and m (whichever is known).
func (l dateLag) widen(m dateLag) dateLag {
	switch {
	case !m.Known:
		return l
	case !l.Known:
		return m
	}
	return dateLag{LoMs: min(l.LoMs, m.LoMs), HiMs: max(l.HiMs, m.HiMs), Known: true}
}

// allowance is what a failover goal allows for the lag: its upper bound,
// if the store-clock rule applies and the lag is known and positive.
func (l dateLag) allowance(storeClock bool) time.Duration {
	if !storeClock || !l.Known || l.HiMs < 0 {
		return 0
	}
	return fromMs(l.HiMs)
}

// clockSample is one write (or read) as the client saw it: sent and
// returned on the client's clock, with what the store said.
type clockSample struct {
	sent, got    time.Time
	lastModified time.Time // zero for a read
	date         time.Time
}

// window is a range [lo, hi) of store − client offsets.
type window struct {
	lo, hi time.Duration
	n      int
}

// add narrows w with a stamp t, of granularity gran, made between sent
// and got; a stamp that contradicts w (the clock stepped, or a cached
// Date was refreshed on a new phase) starts w over.
func (w *window) add(t time.Time, gran time.Duration, sent, got time.Time) {
	lo, hi := t.Sub(got), t.Add(gran).Sub(sent)
	if w.n > 0 {
		lo, hi = max(lo, w.lo), min(hi, w.hi)
		if lo >= hi {
			w.n, lo, hi = 0, t.Sub(got), t.Add(gran).Sub(sent)
		}
	}
	w.lo, w.hi = lo, hi
	w.n++
}

// minClockSamples is how many consistent stamps of each clock a lag
// estimate needs.
const minClockSamples = 8

// clockEstimate places the Last-Modified clock (stamps of granularity
// lmGran, or finer) and the Date clock (1 s stamps) on the client's clock.
type clockEstimate struct {
	lm, date window
	lmGran   time.Duration
	rtt      time.Duration // the latest sample's
}

func (e *clockEstimate) add(s clockSample) {
	if t := s.lastModified; !t.IsZero() {
		gran := e.lmGran
		if t.Nanosecond() != 0 {
			// A finer stamp than the store declares (GCS's writes
			// report milliseconds, its reads seconds).
			gran = min(gran, time.Millisecond)
		}
		e.lm.add(t, gran, s.sent, s.got)
	}
	if !s.date.IsZero() {
		e.date.add(s.date, time.Second, s.sent, s.got)
	}
	e.rtt = s.got.Sub(s.sent)
}

// lag is how far the Date runs behind the Last-Modified clock.
func (e *clockEstimate) lag() dateLag {
	if e.lm.n < minClockSamples || e.date.n < minClockSamples {
		return dateLag{}
	}
	return dateLag{LoMs: ms(e.lm.lo - e.date.hi), HiMs: ms(e.lm.hi - e.date.lo), Known: true}
}

// next is when, at or after earliest, to send the next sample: so that
// the wider of the two clocks' windows is split in half, by landing where
// its midpoint says that clock's stamp ticks.
func (e *clockEstimate) next(earliest time.Time) time.Time {
	w, gran := &e.date, time.Second
	if e.lm.n == 0 || (e.date.n > 0 && e.lm.hi-e.lm.lo > e.date.hi-e.date.lo) {
		w, gran = &e.lm, e.lmGran
	}
	if w.n == 0 || w.hi-w.lo < 10*time.Millisecond {
		return earliest
	}
	mid := w.lo + (w.hi-w.lo)/2
	// The stamp is taken about half a round trip after the send.
	at := earliest.Add(e.rtt / 2).Add(mid)
	tick := at.Truncate(gran)
	if tick.Before(at) {
		tick = tick.Add(gran)
	}
	return tick.Add(-mid).Add(-e.rtt / 2)
}

// lagMeter measures the store's Date lag: the Last-Modified clock once,
// from writes to a scratch object, then the Date again whenever asked,
// from reads of it, since a Date refreshed once a second walks as the
// refresh drifts (versitygw's about a millisecond a second).
type lagMeter struct {
	b   *bench
	key string
	e   clockEstimate
}

// newLagMeter writes a scratch object at phases chosen to place both
// clocks (see clockEstimate.next); the bench removes it with the rest of
// its scratch prefix.
func (b *bench) newLagMeter(ctx context.Context) (*lagMeter, error) {
	m := &lagMeter{b: b, key: b.key("clocks"), e: clockEstimate{lmGran: max(b.props.TimestampGranularity, time.Millisecond)}}
	version := ""
	for range 3 * minClockSamples {
		if err := ctxsleep.For(ctx, time.Until(m.e.next(time.Now().Add(b.props.MinWriteInterval)))); err != nil {
			return nil, err
		}
		sent := time.Now()
		var res providers.WriteResult
		var err error
		if version == "" {
			res, err = b.store.Create(ctx, m.key, []byte("objlease bench clocks"), nil)
		} else {
			res, err = b.store.Replace(ctx, m.key, []byte("objlease bench clocks"), nil, version)
		}
		if err != nil {
			return nil, fmt.Errorf("measuring the store's clocks at %q: %w", m.key, err)
		}
		got := time.Now()
		version = res.Version
		lastModified := res.LastModified
		if lastModified.IsZero() {
			// Some stores stamp a write but report the stamp only on a read.
			a, err := b.store.Stat(ctx, m.key)
			if err != nil && !errors.Is(err, providers.ErrNotFound) {
				return nil, fmt.Errorf("measuring the store's clocks at %q: %w", m.key, err)
			}
			if err == nil && a.Version == version {
				lastModified = a.LastModified
				m.e.add(clockSample{sent: got, got: time.Now(), date: a.StoreTime})
			}
		}
		m.e.add(clockSample{sent: sent, got: got, lastModified: lastModified, date: res.StoreTime})
	}
	return m, nil
}

// lag places the Date clock afresh, from reads only, and returns the lag.
func (m *lagMeter) lag(ctx context.Context) (dateLag, error) {
	if m.e.lm.n < minClockSamples {
		return dateLag{}, nil // no Last-Modified to measure against
	}
	m.e.date = window{}
	for range 2 * minClockSamples {
		if m.e.date.n >= minClockSamples && m.e.date.hi-m.e.date.lo < 10*time.Millisecond {
			break
		}
		if err := ctxsleep.For(ctx, time.Until(m.e.next(time.Now()))); err != nil {
			return dateLag{}, err
		}
		sent := time.Now()
		a, err := m.b.store.Stat(ctx, m.key)
		if err != nil {
			return dateLag{}, fmt.Errorf("measuring the store's Date at %q: %w", m.key, err)
		}
		m.e.add(clockSample{sent: sent, got: time.Now(), date: a.StoreTime})
	}
	return m.e.lag(), nil
}
