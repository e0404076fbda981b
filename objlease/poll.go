package objlease

import (
	"math"
	"time"
)

// A contender waiting under the observed-time rule first sees the holder's
// last write at its next read after it, and takes over TTL × (1 + b) after
// that read: the gap between a write and the read that first sees it is
// what failover adds to the TTL, and the mean gap between reads is what
// waiting costs. Polling every P keeps every gap ≤ P at one read per P. A
// holder renews periodically, though, so a contender that knows when
// renewals land can read just after every k-th one (k R ≤ P): each write
// is then seen within (k − 1) R + ε, where plain polling at the same rate
// sees it within k R.
//
// phaseTracker learns when renewals land from the record's renewal count:
// a read that saw count c, sent at s and returned at g, says that renewal c
// landed by g and renewal c+1 after s. With renewals landing at
// φ + n × P + e (period P, a delay e in [0, slack]), every such read bounds
// φ; the reads of one holder's tenure together narrow it to (A − slack, B].
// While that window is wide, reads go to the middle of a renewal's
// window (which halves it); once it is narrow, just after the latest
// landing of a renewal. A read that contradicts the window (a renewal late,
// early, retried, or missing because the holder died) drops the oldest
// reads until the rest agree, falling back to plain polling when only the
// latest is left. The schedule only chooses when to read: expiry is still
// judged from when this client first saw the version, and the read at that
// moment is never delayed (see pollRule.wait).
type phaseTracker struct {
	period time.Duration
	base   time.Time  // what sightings' times count from, so that each is 8 bytes
	reads  []sighting // one holder's tenure, oldest first
}

// sighting is one read of a held record.
type sighting struct {
	sent, got time.Duration // since base, this client's clock: before the read was sent, after it returned
	token     uint64
	count     uint64 // the record's renewal count
}

// maxSightings bounds the reads kept: older ones would pin the phase
// against a slow drift of the holder's clock.
const maxSightings = 16

// maxCountSpan bounds the renewals between the reads kept, so that
// projecting a read onto the latest count cannot overflow a Duration.
func maxCountSpan(period time.Duration) uint64 {
	return uint64(math.MaxInt64 / 4 / max(period, 1))
}

// slack is how late a renewal may land past its period's beat (scheduling
// and request latency) and still be taken for on time.
func (p *phaseTracker) slack() time.Duration { return p.period / 64 }

// narrow is the phase uncertainty below which reads go just after a
// renewal's latest landing: a renewal is then seen within narrow + 2 slack
// of landing, or at the first read after it when reads skip renewals.
func (p *phaseTracker) narrow() time.Duration { return p.period / 32 }

// add records a read of a held record whose holder renews every period.
func (p *phaseTracker) add(s sighting, period time.Duration) {
	if n := len(p.reads); period != p.period || n > 0 && (p.reads[n-1].token != s.token || p.reads[n-1].count > s.count ||
		s.count-p.reads[0].count > maxCountSpan(period)) {
		// Another holder, another rhythm, or a count no renewing holder
		// made: start over.
		p.reads = p.reads[:0]
	}
	p.period = period
	if len(p.reads) == maxSightings {
		p.reads = append(p.reads[:0], p.reads[1:]...)
	}
	p.reads = append(p.reads, s)
	for len(p.reads) > 1 {
		if a, b := p.bounds(); a.Sub(b) < p.slack() {
			break
		}
		p.reads = append(p.reads[:0], p.reads[1:]...)
	}
}

// reset forgets what was learned (after a read that failed, or met no
// held record).
func (p *phaseTracker) reset() { p.reads = p.reads[:0] }

// bounds returns A and B: renewal c+k, for c the latest count seen, lands
// in (A − slack + k × P, B + k × P + slack].
func (p *phaseTracker) bounds() (a, b time.Time) {
	last := p.reads[len(p.reads)-1].count
	for i, s := range p.reads {
		k := time.Duration(last - s.count)
		lo := p.base.Add(s.sent + (k-1)*p.period) // renewal s.count+1 landed after s.sent
		hi := p.base.Add(s.got + k*p.period)      // renewal s.count landed by s.got
		if i == 0 || lo.After(a) {
			a = lo
		}
		if i == 0 || hi.Before(b) {
			b = hi
		}
	}
	return a, b
}

// next returns when to read next, just after every k-th renewal, or
// false if the phase is not known well enough to beat plain polling. It
// never reads sooner than a quarter of a period after now (minGap): one
// read per renewal at most, not a burst around one.
func (p *phaseTracker) next(now time.Time, k time.Duration) (time.Time, bool) {
	if len(p.reads) < 2 {
		return time.Time{}, false
	}
	a, b := p.bounds()
	j, width := p.slack(), b.Sub(a)
	earliest := now.Add(minGap(p.period))
	switch {
	case width >= p.period:
		return time.Time{}, false
	case width <= p.narrow():
		// Just after the latest landing of the k-th renewal from the
		// next one at least minGap ahead: every renewal is seen within
		// (k − 1) periods + width + 2 slack of landing, at one read per k
		// periods.
		for i := time.Duration(1); i <= 3; i++ {
			if t := b.Add(i*p.period + j); !t.Before(earliest) {
				return t.Add((k - 1) * p.period), true
			}
		}
		return time.Time{}, false
	}
	// Still learning: the middle of the window of the k-th renewal from
	// the next one at least minGap ahead, if it is no further than plain
	// polling's read.
	mid := a.Add(width / 2)
	for i := time.Duration(1); i <= 3; i++ {
		if t := mid.Add(i * p.period); !t.Before(earliest) {
			t = t.Add((k - 1) * p.period)
			return t, !t.After(now.Add(k * p.period))
		}
	}
	return time.Time{}, false
}

// minGap is the shortest gap between two reads the renewal-phase schedule
// makes (the read at expiry aside).
func minGap(period time.Duration) time.Duration { return period / 4 }

// storePhase learns where this client's clock stands against the store's
// (whose Date has the store's timestamp granularity): every read sent at
// s and returned at g with Date d says that store time − client time lay
// in [d − g, d + granularity − s) then. With that offset a store-clock
// waiter reads at the first instant the store's Date can show the record
// old enough, rather than up to a granularity after it.
type storePhase struct {
	lo, hi time.Duration // store time − this client's time lies in [lo, hi)
	at     time.Time     // this client's time of the latest read
	known  bool
}

// maxStoreOffset is the largest store − client offset tracked; beyond it
// the arithmetic is not worth trusting and the phase is forgotten.
const maxStoreOffset = 100 * 365 * 24 * time.Hour

// add narrows the offset with a read sent at sent and returned at got whose
// Date was date, keeping what earlier reads said, widened by the drift of
// both clocks (rate error b each) since.
func (p *storePhase) add(date time.Time, gran time.Duration, sent, got time.Time, b float64) {
	lo, hi := date.Sub(got), date.Add(gran).Sub(sent)
	if lo < -maxStoreOffset || hi > maxStoreOffset {
		p.known = false
		return
	}
	if p.known {
		d := time.Duration(float64(got.Sub(p.at))*2*b) + 1
		if plo := p.lo - d; plo > lo {
			lo = plo
		}
		if phi := p.hi + d; phi < hi {
			hi = phi
		}
		if lo >= hi { // the store's clock stepped: start over
			lo, hi = date.Sub(got), date.Add(gran).Sub(sent)
		}
	}
	p.lo, p.hi, p.at, p.known = lo, hi, got, true
}

// pollRule is the poll rule of one client: the settings it reads, fixed
// when the client is made (see newClient).
type pollRule struct {
	expiry expiryRule
	ttl    time.Duration // Options.TTL
	renew  time.Duration // Options.RenewInterval
	poll   time.Duration // Options.PollInterval
}

// wait returns how long a waiter waits after a read, sent at sent and
// returned at now, that found the lease held with token, given o, the
// client's view of the record, and plain, the wait of plain polling.
// Under the observed-time rule: until the read that the renewal phase
// calls for, and never past the first instant the record could expire for
// this client, so that no takeover is delayed. With StoreClock, on a store
// that reports its time: until the store's clock could show the record
// expired, and no sooner, since beside a live holder that read finds a
// newer write (one read per TTL at most), and once the holder has died it
// is the takeover.
func (r pollRule) wait(p *phaseTracker, sp *storePhase, o *observation, token uint64, sent, now time.Time, plain time.Duration) time.Duration {
	if o == nil || o.rec == nil || o.rec.State != StateHeld || o.rec.Token != token {
		p.reset()
		return plain
	}
	expiry := max(r.expiry.observedWait(o.rec.ttl(), o.since, now), 0) + time.Millisecond
	if d, ok := r.storeExpiryRead(o, sp, sent, now); ok {
		p.reset()
		return min(d, expiry)
	}
	period := r.renew
	if o.rec.ttl() != r.ttl {
		period = o.rec.ttl() / 3 // the holder's, if it kept the default
	}
	// Read just after every k-th renewal, k whole periods within the
	// poll, so that a release is still seen within one poll; unless plain
	// polling, at 0.8 to 1 poll, would read less.
	k := r.poll / period
	if k < 1 || float64(k*period) < 0.9*float64(r.poll) {
		return min(plain, expiry)
	}
	if p.base.IsZero() {
		p.base = sent
	}
	p.add(sighting{sent: sent.Sub(p.base), got: now.Sub(p.base), token: o.rec.Token, count: o.rec.Renewals}, period)
	t, ok := p.next(now, k)
	if !ok {
		return min(plain, expiry)
	}
	wait := t.Sub(now)
	if n := len(p.reads); wait < plain && (n < 2 || p.reads[n-1].count == p.reads[n-2].count) {
		// The last read found no renewal since the one before: the holder
		// may be late or gone, and reading sooner than plain polling would
		// only chase it. Sooner reads follow only a read that saw one.
		wait = plain
	}
	return min(wait, expiry)
}

// minStoreStep is the shortest gap between two reads that look for the
// instant the store's clock passes a record's expiry.
const minStoreStep = 20 * time.Millisecond

// storeExpiryRead is how long from now until the next read that could
// find o's record expired by the store's clock, with StoreClock on a store
// that reports its time (false otherwise). The record expires when the
// store's time reaches x, its Last-Modified + TTL + granularity + margin,
// which sp places on this client's clock (the read at sent returned now)
// within a window: not before x − hi, surely by x − lo. The first read
// goes at the window's start; one that came too early is followed by
// reads a sixteenth of the window apart (minStoreStep at least), so that
// the takeover comes within a step of the instant the store allows it:
// beside a live holder each read finds a newer write, so the steps are
// read only once the holder is gone, and each read narrows the window.
func (r pollRule) storeExpiryRead(o *observation, sp *storePhase, sent, now time.Time) (time.Duration, bool) {
	e := r.expiry
	if !e.storeClock {
		return 0, false
	}
	if _, ok := storeAge(o.attrs, e.margin); !ok {
		return 0, false
	}
	sp.add(o.attrs.StoreTime, e.granularity, sent, now, e.drift)
	if !sp.known {
		return 0, false
	}
	x := o.attrs.LastModified.Add(e.storeClockLimit(o.rec.ttl()))
	earliest, latest := x.Add(-sp.hi), x.Add(-sp.lo)
	at := earliest
	if !now.Before(earliest) {
		at = now.Add(max(latest.Sub(earliest)/16, minStoreStep))
		if at.After(latest) {
			at = latest
		}
	}
	return max(at.Sub(now), 0) + time.Millisecond, true
}
