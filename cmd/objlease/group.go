package main

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/shard"
)

const groupDetail = `Shows a shard group (package objlease/shard) at PREFIX-URL: its members,
from the heartbeat records under PREFIX/members/, and who owns each shard,
from the lease records under PREFIX/shards/, with since when (the owner's
acquisition), its fencing token, and when this observer could take it over.
State and expiry are as for list, judged by the rule inspect applies with the
same flags: held, released (free), or expired (with --store-clock, by the
store's clock). Each record is an ordinary lease: objlease inspect works on
PREFIX/shards/ID.

With -o json it prints one JSON object per line with the fields kind
(member or shard), name, key, state, token, holder, since, ttl_ms, age_ms,
age_clock and expires_in_ms.

Exits 69 if the listing, or reading a record, failed.`

// groupRow is one line of group's JSON output.
type groupRow struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	listing
	Since *time.Time `json:"since"` // null while free
}

func (c *cli) groupCmd(fs *flagSet) action {
	var lf leaseFlags
	lf.addDrift(fs)
	lf.addStoreClock(fs)
	asJSON := addOutput(fs)
	return func(ctx context.Context, pos []string) error {
		url, err := fs.oneURL(pos)
		if err != nil {
			return err
		}
		store, prefix, err := c.open(ctx, url, false)
		if err != nil {
			return opErr("group", url, err)
		}
		defer store.Close()
		v, err := shard.Describe(ctx, store, prefix)
		if err != nil {
			return opErr("group", url, err)
		}
		var rows []groupRow
		add := func(kind string, es []shard.Entry) error {
			for _, e := range es {
				l, err := c.judged(store, &lf, e.Key, e.Record, e.Attrs)
				var re *objlease.RecordError
				if errors.As(err, &re) {
					continue // not a lease record after all (a fenced object)
				} else if err != nil {
					return err
				}
				row := groupRow{Kind: kind, Name: e.Name, Since: &e.Record.AcquiredAt, listing: *l}
				if e.Record.State == objlease.StateReleased {
					row.Holder, row.Since = "", nil
				}
				rows = append(rows, row)
			}
			return nil
		}
		if err := add("member", v.Members); err != nil {
			return opErr("group", url, err)
		}
		if err := add("shard", v.Shards); err != nil {
			return opErr("group", url, err)
		}
		if *asJSON {
			for _, r := range rows {
				if err := c.printJSON(r); err != nil {
					return err
				}
			}
			return nil
		}
		owned := map[string]int{}
		for _, r := range rows {
			if r.Kind == "shard" && r.State == string(objlease.StateHeld) {
				owned[r.Holder]++
			}
		}
		w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "MEMBER\tSTATE\tSHARDS\tAGE\tEXPIRES")
		for _, r := range rows {
			if r.Kind == "member" {
				fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\n", r.Name, r.State, owned[r.Holder], humanAge(time.Duration(r.AgeMillis)*time.Millisecond), expiryText(&r.listing))
			}
		}
		fmt.Fprintln(w, "\nSHARD\tSTATE\tTOKEN\tOWNER\tSINCE\tEXPIRES")
		for _, r := range rows {
			if r.Kind == "shard" {
				since := "-"
				if r.Since != nil && !r.Since.IsZero() {
					since = r.Since.UTC().Format(time.RFC3339)
				}
				fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\n", r.Name, r.State, r.Token, showHolder(r.Holder), since, expiryText(&r.listing))
			}
		}
		return w.Flush()
	}
}
