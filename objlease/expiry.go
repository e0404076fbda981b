package objlease

import (
	"fmt"

	"github.com/objlease/objlease/providers"
)

// Rule names the rule by which a held record expires for a Client (see
// Status.Rule).
type Rule string

const (
	// RuleObserved: the client has seen the same version unchanged for the
	// record's TTL × (1 + DriftBound) on its own clock.
	RuleObserved Rule = "observed"
	// RuleStoreClock: with Options.StoreClock, the store's clock shows the
	// record older than TTL + the store's timestamp granularity + Margin.
	RuleStoreClock Rule = "store-clock"
)

// Judge reports what a record this client did not read itself means for
// it, by the same rule Inspect and every waiter apply: rec is the record
// decoded (DecodeRecord) from an object at the client's key, a the
// object's attributes from the same read (a listing's Get, for example),
// and the call is made after that read returned. The sighting counts as
// this client's own read: a version seen before keeps its first sighting.
// A nil rec reports the key free. Judge sends no request; it returns a
// *RecordError for an object written through package fence, which is
// never a lease record, and for a record whose token is lower than one
// this client has seen at the key.
func (c *Client) Judge(rec *Record, a providers.Attrs) (*Status, error) {
	if err := c.fenced(a.Metadata); err != nil {
		return nil, err
	}
	now := c.opts.Clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	switch v := c.view; {
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
	return &RecordError{Key: c.key, Err: ErrBadRecord, Reason: fmt.Sprintf(
		"token went back from %d to %d: the record was rewritten by something other than objlease", c.highest, rec.Token)}
}
