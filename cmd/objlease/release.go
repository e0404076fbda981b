package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/providers"
)

const releaseDetail = `Releases the lease if its record says HOLDER holds it, for example one taken
with "objlease acquire --holder HOLDER". The record is kept, marked released,
so that the next holder's token is higher. It prints nothing.

Exits 0 if the lease was released, or was already; 75 if another holder
holds it; 1 if there is no lease at the key.`

func (c *cli) releaseCmd(fs *flagSet) action {
	var lf leaseFlags
	lf.addHolder(fs)
	fs.require("holder")
	return fs.withURL(func(ctx context.Context, url string) error {
		if lf.holder == "" {
			return usagef("release needs --holder: the holder identity the lease was acquired with")
		}
		cl, err := c.client(ctx, &lf, url)
		if err != nil {
			return opErr("release", url, err)
		}
		defer cl.Store().Close()
		err = cl.Release(ctx)
		switch held := heldBy(err); {
		case errors.Is(err, providers.ErrNotFound):
			return opErr("release", url, noLease(cl.Key(), url))
		case held != nil:
			return opErr("release", url, &notHolderError{held, lf.holder})
		}
		return opErr("release", url, err)
	})
}

// notHolderError is a release by a holder the record does not name. It
// matches objlease.ErrHeld (exit 75).
type notHolderError struct {
	held   *objlease.Error // ErrHeld
	holder string          // the one that asked to release
}

func (e *notHolderError) Error() string {
	return fmt.Sprintf("the lease %q is held by %s (token %d), not %s; only its holder releases it (objlease break --force ends it whoever holds it)",
		e.held.Key, showHolder(e.held.Record.Holder), e.held.Record.Token, e.holder)
}

func (e *notHolderError) Unwrap() error { return e.held }
