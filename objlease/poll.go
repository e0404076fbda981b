package objlease

import (
	"math"
	"time"
)

// A contender waiting under the observed-time rule first sees the holder's
// last write at its next read after it, and takes over TTL × (1 + b) after
// that read: the gap between a write and the read that first sees it is
// what failover adds to the TTL, and the mean gap between reads is what
// waiting costs. Polling every renewal interval R keeps every gap ≤ R at
// one read per R. A holder renews periodically, though, so a contender that
// knows when renewals land can read just after every second one: each
// write is still seen within R + ε, at half the reads.
//
// phaseTracker learns when renewals land from the record's renewal count:
// a read that saw count c, sent at s and returned at g, says that renewal c
// landed by g and renewal c+1 after s. With renewals landing at
// φ + n × P + e (period P, a delay e in [0, slack]), every such read bounds
// φ; the reads of one holder's tenure together narrow it to (A − slack, B].
// While that window is wide, reads go to the middle of the next renewal's
// window (which halves it, at one read per renewal, as plain polling
// costs); once it is narrow, one read just after the latest landing of the
// renewal after next. A read that contradicts the window (a renewal late,
// early, retried, or missing because the holder died) drops the oldest
// reads until the rest agree, falling back to plain polling when only the
// latest is left. The schedule only chooses when to read: expiry is still
// judged from when this client first saw the version, and the read at that
// moment is never delayed (see Client.pollWait).
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

// narrow is the phase uncertainty below which reads skip every second
// renewal: the gap for a skipped one is then at most P + narrow + 2 slack.
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

// next returns when to read next, or false if the phase is not known well
// enough to beat plain polling.
func (p *phaseTracker) next(now time.Time) (time.Time, bool) {
	if len(p.reads) < 2 {
		return time.Time{}, false
	}
	a, b := p.bounds()
	j, width := p.slack(), b.Sub(a)
	switch {
	case width >= p.period:
		return time.Time{}, false
	case width <= p.narrow():
		// Just after the latest landing of the renewal after next: the next
		// one is seen within P + width + 2 slack of landing, that one at once.
		if t := b.Add(2*p.period + j); t.After(now) {
			return t, true
		}
		return time.Time{}, false
	}
	// The middle of the window of the first renewal whose middle is ahead.
	mid := a.Add(width / 2)
	for k := time.Duration(1); k <= 3; k++ {
		if t := mid.Add(k * p.period); t.After(now) {
			return t, true
		}
	}
	return time.Time{}, false
}

// pollWait returns how long Acquire waits after an attempt, sent at sent,
// that found the lease held, given plain, the wait of plain polling: until
// the read that the renewal phase calls for, and never past the moment
// the record could expire for this client (held.Wait), so that no takeover
// is delayed.
func (c *Client) pollWait(p *phaseTracker, sent time.Time, held *HeldError, plain time.Duration) time.Duration {
	now := c.opts.Clock.Now()
	c.mu.Lock()
	o := c.view
	c.mu.Unlock()
	if o == nil || o.rec == nil || o.rec.State != StateHeld || o.rec.Token != held.Token {
		p.reset()
		return plain
	}
	period := c.opts.RenewInterval
	if o.rec.TTL() != c.opts.TTL {
		period = o.rec.TTL() / 3 // the holder's, if it kept the default
	}
	if c.opts.PollInterval >= 2*period {
		return plain // plain polling is already as sparse
	}
	if p.base.IsZero() {
		p.base = sent
	}
	p.add(sighting{sent: sent.Sub(p.base), got: now.Sub(p.base), token: o.rec.Token, count: o.rec.Renewals}, period)
	t, ok := p.next(now)
	if !ok {
		return plain
	}
	wait := t.Sub(now)
	if n := len(p.reads); wait < plain && (n < 2 || p.reads[n-1].count == p.reads[n-2].count) {
		// The last read found no renewal since the one before: the holder
		// may be late or gone, and reading sooner than plain polling would
		// only chase it. Sooner reads follow only a read that saw one.
		wait = plain
	}
	return min(wait, held.Wait+time.Millisecond)
}
