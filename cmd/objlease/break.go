package main

import (
	"context"
	"fmt"

	"github.com/objlease/objlease/objlease"
)

const breakDetail = `Ends the lease whatever its state by writing a released record whose token is
one higher, and prints that token on stdout. A holder that is still running
finds out at its next renewal, and a resource that checks fencing tokens
refuses the old holder once it has seen the new token. It says on stderr
whose lease it broke.

--force is required. It also lets break overwrite an object at the key that
is not an objlease record, with a token above the highest one the object
itself, --min-token N or the fenced objects named with --fenced KEY show.
Where none shows one, break refuses (exit 65) rather than start again from
token 1, which a paused holder may still have: give --min-token (the
highest token ever issued for the lease) or --fenced. With -o json it
prints {"key","url","token","previous_holder","previous_token",
"previous_state"}.`

// breakage is what break prints with -o json.
type breakage struct {
	Key       string `json:"key"`
	URL       string `json:"url"`
	Token     uint64 `json:"token"`
	PrevHold  string `json:"previous_holder,omitempty"`
	PrevToken uint64 `json:"previous_token,omitempty"`
	PrevState string `json:"previous_state"`
}

func (c *cli) breakCmd(fs *flagSet) action {
	var lf leaseFlags
	lf.addForce(fs, "required: end the lease whoever holds it (and overwrite an object at the key that is not an objlease record, with a token above the highest one it, --min-token or --fenced shows)")
	lf.addTokenFloor(fs)
	asJSON := addOutput(fs)
	return fs.withURL(func(ctx context.Context, url string) error {
		if !lf.force {
			return usagef("break %s: refusing without --force: it ends the lease whoever holds it", url)
		}
		// The library's own "lease broken" message names this process as
		// the holder; say instead whose lease it was.
		lf.holder = "objlease-break"
		cl, err := c.clientWith(ctx, &lf, url, nil, nil)
		if err != nil {
			return opErr("break", url, err)
		}
		defer cl.Store().Close()
		key := cl.Key()
		out := breakage{Key: key, URL: url, PrevState: "absent"}
		if st, err := cl.Inspect(ctx); err == nil && st.Record != nil {
			out.PrevHold, out.PrevToken, out.PrevState = st.Record.Holder, st.Record.Token, string(st.Record.State)
		} else if err != nil {
			out.PrevState = "not-a-lease"
		}
		out.Token, err = cl.Break(ctx)
		if err != nil {
			return opErr("break", url, err)
		}
		switch out.PrevState {
		case string(objlease.StateHeld):
			c.log.Warn(fmt.Sprintf("broke the lease at %q, held by %s (token %d); new token %d", key, showHolder(out.PrevHold), out.PrevToken, out.Token))
		default:
			c.log.Warn(fmt.Sprintf("broke the lease at %q, which was %s; new token %d", key, out.PrevState, out.Token))
		}
		if *asJSON {
			return c.printJSON(out)
		}
		_, err = fmt.Fprintln(c.stdout, out.Token)
		return err
	})
}
