package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/shard"
)

const groupDetail = `Shows a shard group (package objlease/shard) at PREFIX-URL: its members,
from the heartbeat records under PREFIX/members/, and who owns each shard,
from the lease records under PREFIX/shards/, with since when (the owner's
acquisition), its fencing token, and when its TTL runs out after its last
write. State is as for list: held, released (free), or expired by the
store's clock. Each record is an ordinary lease: objlease inspect works on
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
		add := func(kind string, es []shard.Entry) {
			for _, e := range es {
				r := e.Record
				age, clock := recordAge(e.Attrs, r)
				row := groupRow{Kind: kind, Name: e.Name, Since: &r.AcquiredAt, listing: listing{Key: e.Key, State: string(r.State), Token: r.Token, Holder: r.Holder,
					TTLMillis: r.TTLMillis, WrittenAt: r.WrittenAt, AgeMillis: age.Milliseconds(), AgeClock: clock, ExpiresInMs: (r.TTL() - age).Milliseconds()}}
				switch {
				case r.State == objlease.StateReleased:
					row.ExpiresInMs, row.Holder, row.Since = 0, "", nil
				case clock == "store" && age > r.TTL()+store.Properties().TimestampGranularity+lapseMargin:
					row.State = "expired"
				}
				rows = append(rows, row)
			}
		}
		add("member", v.Members)
		add("shard", v.Shards)
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
