package objlease

import (
	"context"
	"time"

	"github.com/objlease/objlease/providers"
)

// Status is what Inspect reports.
type Status struct {
	Key     string
	Version string
	Record  *Record // nil if the key is absent
	Attrs   providers.Attrs
	// ExpiresIn is how long this client must still see the record unchanged
	// before it may take over (0: expired or free). For a client that has
	// just looked for the first time this is the full TTL × (1 + drift).
	ExpiresIn time.Duration
	// StoreAge is the record's age by the store's own clock (Date minus
	// Last-Modified), when the store reports both; else negative.
	StoreAge time.Duration
	// Expired reports a held record that has expired for this client
	// (ExpiresIn is 0): it may take the lease over now.
	Expired bool
	// ByStoreClock reports that the store's clock decided ExpiresIn for a
	// held record (Options.StoreClock), because it allows a takeover
	// sooner than the observed rule: TTL × (1 + DriftBound) seen unchanged
	// on this client's clock.
	ByStoreClock bool
	// Age is how long ago the record was written, never negative: by the
	// store's clock when AgeByStore, else by this machine's clock against
	// the writer's WrittenAt, which is only as good as the two clocks'
	// agreement and decides nothing.
	Age        time.Duration
	AgeByStore bool
	// Unchanged is how long this client has seen Version unchanged, from
	// its first sighting in a read or a listing (see Judge).
	Unchanged time.Duration
}

// Inspect reads the lease without changing it.
func (c *Client) Inspect(ctx context.Context) (*Status, error) {
	if err := c.sess.err(c.key); err != nil {
		return nil, err
	}
	o, err := c.read(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status(o, c.opts.Clock.Now()), nil
}

// status reports o as judged at now (c.mu held).
func (c *Client) status(o *observation, now time.Time) *Status {
	st := &Status{Key: c.key, Version: o.version, Record: o.rec, Attrs: o.attrs, StoreAge: -1, Unchanged: now.Sub(o.since)}
	if !o.attrs.LastModified.IsZero() && !o.attrs.StoreTime.IsZero() {
		st.StoreAge = o.attrs.StoreTime.Sub(o.attrs.LastModified)
	}
	if o.rec != nil {
		in, byStore := c.expiry.expiry(o, now)
		st.ExpiresIn, st.ByStoreClock = max(in, 0), byStore
		st.Expired = o.rec.State == StateHeld && in <= 0
		if !o.attrs.LastModified.IsZero() && !o.attrs.StoreTime.IsZero() {
			st.Age, st.AgeByStore = max(st.StoreAge, 0), true
		} else {
			st.Age = max(time.Since(o.rec.WrittenAt), 0)
		}
	}
	return st
}

// Judge reports what an object at the client's key that this client did
// not read itself means for it, by the same rule Inspect and every waiter
// apply, and sends no request. Call it after the read or listing that
// showed the object returned.
//
//   - rec is the record decoded (DecodeRecord) from the object and a the
//     object's attributes from the same read (a listing's Get, for
//     example). The sighting counts as this client's own read: a version
//     seen before keeps its first sighting.
//   - rec is nil and a.Version is empty: the key is free.
//   - rec is nil and a.Version is set: a listing showed the object at that
//     version without reading it. The version counts as seen from then on:
//     a read that later finds it judges its expiry from the listing, so
//     that a reader that lists every round and reads only now and then
//     takes over from a holder that stopped renewing as early as one that
//     reads every round. If that version is the one this client last read,
//     the Status is that read's, judged now; otherwise its Record is nil
//     (the contents are unknown) and only Unchanged counts.
//
// Judge returns an *Error for an object written through package
// fence, which is never a lease record, and for a record whose token is
// lower than one this client has seen at the key.
func (c *Client) Judge(rec *Record, a providers.Attrs) (*Status, error) {
	if err := c.fenced(a.Metadata); err != nil {
		return nil, err
	}
	now := c.opts.Clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	switch v := c.view; {
	case rec == nil && a.Version != "":
		if v != nil && v.rec != nil && v.version == a.Version {
			return c.status(v, now), nil
		}
		if c.listed == nil || c.listed.version != a.Version {
			c.listed = &observation{version: a.Version, since: now}
		}
		return &Status{Key: c.key, Version: a.Version, Attrs: a, StoreAge: -1, Unchanged: now.Sub(c.listed.since)}, nil
	case rec == nil:
		c.view = &observation{since: now}
	case v != nil && v.rec != nil && v.version == a.Version:
		v.attrs = a // same version, still observing
	default:
		if err := c.tokenWentBack(rec); err != nil {
			return nil, err
		}
		c.view = c.sawRecord(a.Version, rec, a, now)
	}
	return c.status(c.view, now), nil
}

// tokenWentBack refuses a record whose token is below one this client has
// seen at the key (c.mu held): objlease never writes a lower token.
func (c *Client) tokenWentBack(rec *Record) error {
	if rec.Token >= c.highest {
		return nil
	}
	return recordError(c.key, ErrBadRecord,
		"token went back from %d to %d: the record was rewritten by something other than objlease", c.highest, rec.Token)
}
