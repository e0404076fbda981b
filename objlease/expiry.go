package objlease

// This file holds the expiry rule: when a held record has expired for a
// Client, by its own clock (observedWait) or the store's (storeAge,
// storeClockLimit). Every door that judges a record comes here.

import (
	"time"

	"github.com/objlease/objlease/providers"
)

// expiryRule is the expiry rule of one client: the settings it reads, fixed
// when the client is made (see newClient).
type expiryRule struct {
	drift       float64       // Options.DriftBound
	storeClock  bool          // Options.StoreClock
	margin      time.Duration // Options.StoreClockMargin
	granularity time.Duration // the store's timestamp granularity
}

// observedWait is how much longer, from now, a version first seen at since
// must be seen unchanged before a writer promising ttl can have stopped
// relying on it.
func (r expiryRule) observedWait(ttl time.Duration, since, now time.Time) time.Duration {
	if !driftMargin() {
		return ttl - now.Sub(since)
	}
	return time.Duration(float64(ttl)*(1+r.drift)) - now.Sub(since)
}

// forceWait is how much longer Force must see the bad object of o unchanged
// before it replaces it: it may be the record of a live holder (a newer
// objlease's, or one whose token was rewritten), which must keep its time.
func (r expiryRule) forceWait(o *observation, now time.Time) time.Duration {
	if !forceWaits() {
		return 0
	}
	return r.observedWait(o.badTTL, o.since, now)
}

// expiresIn reports how long, from now, o's record stays unexpired for this
// client (<= 0: expired or free).
func (r expiryRule) expiresIn(o *observation, now time.Time) time.Duration {
	d, _ := r.expiry(o, now)
	return d
}

// expiry is the one expiry rule: how long, from now, o's record stays
// unexpired for this client (<= 0: expired or free), and whether the
// store-clock rule decided it rather than the observed rule (the client
// has seen the same version unchanged for the record's TTL × (1 +
// DriftBound) on its own clock).
func (r expiryRule) expiry(o *observation, now time.Time) (wait time.Duration, byStore bool) {
	if o.rec == nil || o.rec.State == StateReleased {
		return 0, false
	}
	ttl := o.rec.ttl()
	wait = r.observedWait(ttl, o.since, now)
	if r.storeClock {
		if age, ok := storeAge(o.attrs, r.margin); ok {
			if left := r.storeClockLimit(ttl) - age; left < wait {
				// The store's clock has already seen part (or all) of the
				// TTL pass since the record was written.
				return max(left, 0), true
			}
		}
	}
	return wait, false
}

// storeClockLimit is the store-clock rule's bound: with Options.StoreClock
// set, a record of ttl has expired once the store's clock shows it older
// than TTL + the store's timestamp granularity + StoreClockMargin.
func (r expiryRule) storeClockLimit(ttl time.Duration) time.Duration {
	return ttl + r.granularity + r.margin
}

// Sane store timestamps, for storeAge.
var (
	saneFrom = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	saneTo   = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)
)

// maxStoreAge is the oldest record age the store-clock rule believes: an
// older one says more about the store's clocks than about the record.
const maxStoreAge = 10 * 365 * 24 * time.Hour

// storeAge is a record's age by the store's clock (its Date minus the
// record's Last-Modified), if the store reported both and they make sense:
// both from 1970 to 2200, and the age from −margin (the store's clocks may
// disagree by that much) to maxStoreAge. Anything else is unknown, which
// leaves the observed-time rule to decide: a lying store clock may delay a
// takeover, never hasten one, and no arithmetic on its values can wrap.
func storeAge(a providers.Attrs, margin time.Duration) (time.Duration, bool) {
	for _, t := range []time.Time{a.LastModified, a.StoreTime} {
		if t.Before(saneFrom) || !t.Before(saneTo) {
			return 0, false
		}
	}
	age := a.StoreTime.Sub(a.LastModified)
	if age < -margin || age > maxStoreAge {
		return 0, false
	}
	return age, true
}
