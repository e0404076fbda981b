package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/objlease/objlease/objlease"
)

const inspectDetail = `Shows the lease record at URL without changing it: holder, token, state,
TTL, how long ago it was written, and whether this observer may take it over.

The age is measured by the store's own clock when the store reports it (the
time of its answer minus the object's last-modified time), else by this
machine's clock against the writer's written_at, which is only as good as
the two clocks' agreement; the output says which.

A held lease expires for an observer only after it has seen the record
unchanged for TTL × (1 + drift) on its own clock, so a single look always
reports the full wait. With --store-clock a record the store's clock says
was last written more than TTL + its timestamp resolution + 1s ago is
reported expired at once (state expired). list, group and watch judge a
record by this same rule, with the same flags.

With -o json it prints one JSON object with the fields key, url, version,
state, holder, token, ttl_ms, renewals, acquired_at, written_at, age_ms,
age_clock ("store" or "local"), expires_in_ms and data (base64, if any).

Exits 1, with "no lease at KEY" on stderr, if there is no object at the key;
65, saying what the object is (text, binary, JSON of another kind), if it
is not a lease record.`

// inspection is inspect's JSON output.
type inspection struct {
	Key         string         `json:"key"`
	URL         string         `json:"url"`
	Version     string         `json:"version"`
	State       objlease.State `json:"state"`
	Holder      string         `json:"holder"`
	Token       uint64         `json:"token"`
	TTLMillis   int64          `json:"ttl_ms"`
	Renewals    uint64         `json:"renewals"`
	AcquiredAt  time.Time      `json:"acquired_at,omitzero"`
	WrittenAt   time.Time      `json:"written_at"`
	AgeMillis   int64          `json:"age_ms"`
	AgeClock    string         `json:"age_clock"`
	ExpiresInMs int64          `json:"expires_in_ms"`
	Data        []byte         `json:"data,omitempty"`
}

func (c *cli) inspectCmd(fs *flagSet) action {
	var lf leaseFlags
	lf.addExpiry(fs)
	asJSON := addOutput(fs)
	return fs.withURL(func(ctx context.Context, url string) error {
		cl, err := c.client(ctx, &lf, url)
		if err != nil {
			return opErr("inspect", url, err)
		}
		defer cl.Store().Close()
		st, err := cl.Inspect(ctx)
		if err != nil {
			return opErr("inspect", url, foreignObject(ctx, cl.Store(), cl.Key(), err, ""))
		}
		if st.Record == nil {
			return opErr("inspect", url, noLease(st.Key, url))
		}
		r := st.Record
		if *asJSON {
			return c.printJSON(inspection{
				Key: st.Key, URL: url, Version: st.Version, State: objlease.State(stateOf(st)), Holder: r.Holder, Token: r.Token,
				TTLMillis: r.TTLMillis, Renewals: r.Renewals, AcquiredAt: r.AcquiredAt, WrittenAt: r.WrittenAt,
				AgeMillis: st.Age.Milliseconds(), AgeClock: ageClock(st), ExpiresInMs: st.ExpiresIn.Milliseconds(), Data: r.Data,
			})
		}
		w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		row := func(k, format string, args ...any) { fmt.Fprintf(w, "%s:\t"+format+"\n", append([]any{k}, args...)...) }
		row("key", "%s", st.Key)
		row("state", "%s", stateOf(st))
		row("holder", "%s", showHolder(r.Holder))
		row("token", "%d", r.Token)
		row("ttl", "%v", time.Duration(r.TTLMillis)*time.Millisecond)
		row("renewals", "%d", r.Renewals)
		if !r.AcquiredAt.IsZero() {
			row("acquired", "%s (writer's clock)", stamp(r.AcquiredAt))
		}
		if st.AgeByStore {
			res := ""
			if g := cl.Store().Properties().TimestampGranularity; g >= time.Millisecond {
				res = fmt.Sprintf(" (its timestamps have %v resolution)", g)
			}
			row("written", "%s ago by the store's clock%s", humanAge(st.Age), res)
		} else {
			row("written", "%s ago by this machine's clock against the writer's (%s)", humanAge(st.Age), stamp(r.WrittenAt))
		}
		switch {
		case r.State == objlease.StateReleased:
			row("expires", "free: released; the next holder gets token %d", r.Token+1)
		case st.Expired && st.ByStoreClock:
			row("expires", "expired: the store's clock says it was written more than TTL + margin ago")
		case st.Expired:
			row("expires", "expired: this observer has seen it unchanged for TTL × (1 + drift)")
		case st.ByStoreClock:
			row("expires", "in %s, when the store's clock shows it written more than TTL + margin ago", roundDuration(st.ExpiresIn))
		default:
			hint := ""
			if !lf.storeClock {
				hint = " (--store-clock lets the store's clock decide)"
			}
			row("expires", "not for this observer before %s: it must see the record unchanged for TTL × (1 + drift)%s",
				roundDuration(st.ExpiresIn), hint)
		}
		row("version", "%s", st.Version)
		if len(r.Data) > 0 {
			row("data", "%q", r.Data)
		}
		return w.Flush()
	})
}
