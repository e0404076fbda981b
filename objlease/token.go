package objlease

// This file holds the fencing-token rule: a new token is above every token
// the record, this client and the options show, and is never sent back
// (the step to the next one, refusing to wrap, is recordwrite.NextToken,
// shared with the Kubernetes lock).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/objlease/objlease/internal/fencemeta"
	"github.com/objlease/objlease/providers"
)

// fenced reports an object written through package fence: data guarded by
// a token, never a lease record, whatever its bytes say.
func (c *Client) fenced(md map[string]string) error {
	tok, ok := md[fencemeta.TokenKey]
	if !ok {
		return nil
	}
	if _, err := strconv.ParseUint(tok, 10, 64); err != nil {
		tok = strconv.Quote(tok)
	}
	what := fmt.Sprintf("a fenced data object (written through fence with token %s)", tok)
	if md[fencemeta.TombstoneKey] == "true" {
		what = fmt.Sprintf("a fenced tombstone (deleted through fence with token %s)", tok)
	}
	return recordError(c.key, ErrFencedObject, "object is %s, not a lease record", what)
}

// tokenBase returns the token that the next one must be above, for a write
// over what o saw (nil or absent: nothing; a record; or, with Force, an
// object that is not one): the highest of the record's token or the bad
// object's readable one, the highest this client has seen at the key, and
// the floor the options give (see floor). Over a bad object that nothing
// gives a token for, it refuses (see tokenUnknown): objlease never sends a
// token back.
func (c *Client) tokenBase(ctx context.Context, o *observation) (uint64, error) {
	if err := c.tokenUnknown(o); err != nil {
		return 0, err
	}
	seen := c.highestSeen()
	base := seen
	if o != nil && o.rec != nil {
		base = max(base, o.rec.Token)
	} else if o != nil {
		base = max(base, o.badToken) // 0 if absent
	}
	floor, err := c.floor(ctx)
	if err != nil {
		return 0, err
	}
	if o != nil && o.rec == nil && !o.absent() {
		c.log.Warn("forcing over an object that is not a valid record", slog.Uint64("recovered_token", max(base, floor)),
			slog.Uint64("object_token", o.badToken), slog.Uint64("seen_token", seen), slog.Uint64("floor", floor))
	}
	return max(base, floor), nil
}

// tokenUnknown returns an *Error (ErrTokenUnknown) if o is an object that is not a
// valid record (which only Force replaces) and nothing shows a token to
// continue above: the object carries none, this client has seen none at
// the key, and the options give no floor. It sends no request, so that a
// forced acquire refuses at once rather than after waiting the object out.
func (c *Client) tokenUnknown(o *observation) error {
	if o == nil || o.absent() || o.rec != nil || o.badToken > 0 || c.highestSeen() > 0 ||
		c.opts.MinToken != nil || len(c.opts.FencedKeys) > 0 {
		return nil
	}
	why := "is not a valid lease record"
	if o.bad != nil {
		if errors.Is(o.bad.Err, ErrNewerSchema) {
			why = "is a lease record of a newer schema"
		}
		why += " (" + o.bad.Reason + ")"
	}
	return &Error{Key: c.key, Err: ErrTokenUnknown, Reason: "the object at the key " + why +
		" and shows no token, nor does anything else; replacing it could hand out again a token that a paused holder still has"}
}

// floor returns the highest token the options show: Options.MinToken and
// the token of each of Options.FencedKeys (one Stat each). A named key
// that shows no token is an error: it was named as evidence.
func (c *Client) floor(ctx context.Context) (uint64, error) {
	var f uint64
	if c.opts.MinToken != nil {
		f = *c.opts.MinToken
	}
	for _, k := range c.opts.FencedKeys {
		a, err := c.store.Stat(ctx, k)
		if errors.Is(err, providers.ErrNotFound) {
			return 0, &Error{Key: c.key, Err: ErrTokenUnknown, Reason: fmt.Sprintf("the fenced object %q named as evidence does not exist", k)}
		}
		if err != nil {
			return 0, fmt.Errorf("lease %q: reading the token of fenced object %q: %w", c.key, k, err)
		}
		s, ok := a.Metadata[fencemeta.TokenKey]
		if !ok {
			return 0, &Error{Key: c.key, Err: ErrTokenUnknown, Reason: fmt.Sprintf("the object %q named as a fenced object carries no %s metadata: it was not written through fence", k, fencemeta.TokenKey)}
		}
		t, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, &Error{Key: c.key, Err: ErrTokenUnknown, Reason: fmt.Sprintf("the fenced object %q has metadata %s=%q, which is not a token", k, fencemeta.TokenKey, s)}
		}
		f = max(f, t)
	}
	return f, nil
}
