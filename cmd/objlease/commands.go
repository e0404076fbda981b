package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/providers"
)

const acquireDetail = `Takes the lease, prints its fencing token on stdout and exits. Nothing renews
the lease afterwards: it expires TTL after it was written unless released
first with "objlease release --holder HOLDER URL", so give --holder.

--timeout is as for run: by default wait as long as it takes; 0 tries once.`

// cmdAcquire takes the lease and leaves it to expire or be released.
func (c *cli) cmdAcquire(args []string) int {
	f := c.flags("acquire")
	url, code := f.oneURL(c, args)
	if code != proceed {
		return code
	}
	ctx := context.Background()
	cl, code := c.client(ctx, f, url)
	if code != proceed {
		return code
	}
	defer cl.Store().Close()
	l, code := c.take(ctx, cl, f.timeout)
	if l == nil {
		return code
	}
	if f.holder == "" {
		c.log.Warn("no --holder given; release it with --holder " + l.Holder())
	}
	fmt.Fprintln(c.stdout, l.Token())
	return exitOK
}

// take acquires the lease as --timeout says and maps failure to an exit
// code; the lease is nil on failure.
func (c *cli) take(ctx context.Context, cl *objlease.Client, timeout waitFlag) (*objlease.Lease, int) {
	var l *objlease.Lease
	var err error
	switch {
	case timeout.set && timeout.d == 0:
		l, err = cl.TryAcquire(ctx)
	case timeout.set:
		tctx, cancel := context.WithTimeoutCause(ctx, timeout.d, fmt.Errorf("not acquired within --timeout %v", timeout.d))
		defer cancel()
		l, err = cl.Acquire(tctx)
		if err != nil && tctx.Err() != nil && ctx.Err() == nil {
			c.log.Error("lease not acquired", slog.Any("err", err))
			return nil, exitNotAcquired
		}
	default:
		l, err = cl.Acquire(ctx)
	}
	if err == nil {
		return l, proceed
	}
	if i := (interrupt{}); errors.As(context.Cause(ctx), &i) {
		c.log.Warn("interrupted while acquiring the lease", slog.String("signal", i.sig.String()))
		return nil, i.code()
	}
	return nil, c.fail("lease not acquired", err)
}

const releaseDetail = `Releases the lease if its record says HOLDER holds it, for example one taken
with "objlease acquire --holder HOLDER". The record is kept, marked released,
so that the next holder's token is higher.

Exits 0 if the lease was released, or was already; 75 if another holder
holds it; 1 if there is no lease at the key.`

func (c *cli) cmdRelease(args []string) int {
	f := c.flags("release")
	url, code := f.oneURL(c, args)
	if code != proceed {
		return code
	}
	if f.holder == "" {
		c.log.Error("release needs --holder: the holder identity the lease was acquired with")
		return exitUsage
	}
	ctx := context.Background()
	cl, code := c.client(ctx, f, url)
	if code != proceed {
		return code
	}
	defer cl.Store().Close()
	err := cl.Release(ctx)
	if errors.Is(err, providers.ErrNotFound) {
		c.log.Error("no lease at "+cl.Key(), slog.String("url", url))
		return exitNo
	}
	if err != nil {
		return c.fail("lease not released", err)
	}
	return exitOK
}

const breakDetail = `Ends the lease whatever its state by writing a released record whose token is
one higher, and prints that token on stdout. A holder that is still running
finds out at its next renewal, and a resource that checks fencing tokens
refuses the old holder once it has seen the new token.

--force is required. It also lets break overwrite an object at the key that
is not an objlease record.`

func (c *cli) cmdBreak(args []string) int {
	f := c.flags("break")
	url, code := f.oneURL(c, args)
	if code != proceed {
		return code
	}
	if !f.force {
		c.log.Error(fmt.Sprintf("break %s: refusing without --force: it ends the lease whoever holds it", url))
		return exitUsage
	}
	ctx := context.Background()
	cl, code := c.client(ctx, f, url)
	if code != proceed {
		return code
	}
	defer cl.Store().Close()
	token, err := cl.Break(ctx)
	if err != nil {
		return c.fail("lease not broken", err)
	}
	fmt.Fprintln(c.stdout, token)
	return exitOK
}

const inspectDetail = `Shows the lease record at URL without changing it: holder, token, state,
TTL, how long ago it was written, and whether this observer may take it over.

The age is measured by the store's own clock when the store reports it (the
time of its answer minus the object's last-modified time), else by this
machine's clock against the writer's written_at, which is only as good as
the two clocks' agreement; the output says which.

A held lease expires for an observer only after it has seen the record
unchanged for TTL × (1 + drift) on its own clock, so a single look always
reports the full wait. With --store-clock a record the store's clock says
was last written more than TTL + 1s ago is reported expired at once.

With -o json it prints one JSON object with the fields key, url, version,
state, holder, token, ttl_ms, renewals, acquired_at, written_at, age_ms,
age_clock ("store" or "local"), expires_in_ms and data (base64, if any).

Exits 1, with "no lease at KEY" on stderr, if there is no object at the key.`

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

func (c *cli) cmdInspect(args []string) int {
	f := c.flags("inspect")
	url, code := f.oneURL(c, args)
	if code != proceed {
		return code
	}
	ctx := context.Background()
	cl, code := c.client(ctx, f, url)
	if code != proceed {
		return code
	}
	defer cl.Store().Close()
	st, err := cl.Inspect(ctx)
	if err != nil {
		return c.fail("cannot inspect lease", err)
	}
	if st.Record == nil {
		c.log.Error("no lease at "+st.Key, slog.String("url", url))
		return exitNo
	}
	r := st.Record
	age, clock := recordAge(st.Attrs, r)
	if f.output == "json" {
		out := inspection{
			Key: st.Key, URL: url, Version: st.Version, State: r.State, Holder: r.Holder, Token: r.Token,
			TTLMillis: r.TTLMillis, Renewals: r.Renewals, AcquiredAt: r.AcquiredAt, WrittenAt: r.WrittenAt,
			AgeMillis: age.Milliseconds(), AgeClock: clock, ExpiresInMs: st.ExpiresIn.Milliseconds(), Data: r.Data,
		}
		return c.printJSON(out)
	}
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	row := func(k, format string, args ...any) { fmt.Fprintf(w, "%s:\t"+format+"\n", append([]any{k}, args...)...) }
	row("key", "%s", st.Key)
	row("state", "%s", r.State)
	row("holder", "%s", orDash(r.Holder))
	row("token", "%d", r.Token)
	row("ttl", "%v", r.TTL())
	row("renewals", "%d", r.Renewals)
	if !r.AcquiredAt.IsZero() {
		row("acquired", "%s (writer's clock)", r.AcquiredAt.Format(time.RFC3339Nano))
	}
	if clock == "store" {
		res := ""
		if g := cl.Store().Properties().TimestampGranularity; g >= time.Millisecond {
			res = fmt.Sprintf(" (its timestamps have %v resolution)", g)
		}
		row("written", "%v ago by the store's clock%s", age.Round(time.Millisecond), res)
	} else {
		row("written", "%v ago by this machine's clock against the writer's (%s)", age.Round(time.Millisecond), r.WrittenAt.Format(time.RFC3339Nano))
	}
	switch {
	case r.State == objlease.StateReleased:
		row("expires", "free: released; the next holder gets token %d", r.Token+1)
	case st.ExpiresIn <= 0:
		row("expires", "expired: the store's clock says it was written more than TTL + margin ago")
	default:
		hint := ""
		if !f.storeClock {
			hint = " (--store-clock lets the store's clock decide)"
		}
		row("expires", "not for this observer before %v: it must see the record unchanged for TTL × (1 + drift)%s",
			st.ExpiresIn.Round(time.Millisecond), hint)
	}
	row("version", "%s", st.Version)
	if len(r.Data) > 0 {
		row("data", "%q", r.Data)
	}
	if err := w.Flush(); err != nil {
		return c.fail("cannot write output", err)
	}
	return exitOK
}

// recordAge is how long ago r was written and by which clock: the store's
// when its attributes carry both times, else this machine's against the
// writer's.
func recordAge(a providers.Attrs, r *objlease.Record) (time.Duration, string) {
	if !a.LastModified.IsZero() && !a.StoreTime.IsZero() {
		return a.StoreTime.Sub(a.LastModified), "store"
	}
	return time.Since(r.WrittenAt), "local"
}

const listDetail = `Lists every object under the prefix PREFIX-URL names, one row each: key,
state, token, holder and how long ago it was written (by the store's clock
when the store reports it). An object that is not an objlease record is
listed with state "not-a-lease" (or "newer-schema") and the reason, and
does not fail the listing. A prefix is a key prefix, not only a directory:
file:///var/leases/ lists everything under /var/leases, s3://b/jobs/n
every key starting with jobs/n.

With -o json it prints one JSON object per line with the fields key, state,
token, holder, written_at, age_ms, age_clock and, for objects that are not
leases, reason.

Exits 69 if the listing, or reading any object, failed (the rows it could
read are printed).`

// listing is one row of list's JSON output.
type listing struct {
	Key       string    `json:"key"`
	State     string    `json:"state"`
	Token     uint64    `json:"token,omitempty"`
	Holder    string    `json:"holder,omitempty"`
	WrittenAt time.Time `json:"written_at,omitzero"`
	AgeMillis int64     `json:"age_ms,omitempty"`
	AgeClock  string    `json:"age_clock,omitempty"`
	Reason    string    `json:"reason,omitempty"`
}

func (c *cli) cmdList(args []string) int {
	f := c.flags("list")
	url, code := f.oneURL(c, args)
	if code != proceed {
		return code
	}
	ctx := context.Background()
	store, prefix, code := c.open(ctx, url, false)
	if code != proceed {
		return code
	}
	defer store.Close()

	var w *tabwriter.Writer
	if f.output == "text" {
		w = tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "KEY\tSTATE\tTOKEN\tHOLDER\tWRITTEN")
	}
	code = exitOK
	for page := ""; ; {
		p, err := store.List(ctx, prefix, page, 1000)
		if err != nil {
			code = c.fail("listing failed", err)
			break
		}
		for _, a := range p.Objects {
			row, ok := c.listRow(ctx, store, a.Key)
			if !ok {
				code = exitUnavailable
			}
			if row == nil {
				continue
			}
			if w == nil {
				if c.printJSON(row) != exitOK {
					return exitUnavailable
				}
				continue
			}
			token, written := "-", row.Reason
			if row.Reason == "" {
				token = fmt.Sprint(row.Token)
				written = fmt.Sprintf("%v ago", time.Duration(row.AgeMillis)*time.Millisecond)
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", row.Key, row.State, token, orDash(row.Holder), written)
		}
		if page = p.NextToken; page == "" {
			break
		}
	}
	if w != nil {
		if err := w.Flush(); err != nil {
			return c.fail("cannot write output", err)
		}
	}
	return code
}

// listRow reads the object at key. It returns a nil row for an object
// deleted since it was listed, and ok false if the store failed.
func (c *cli) listRow(ctx context.Context, store providers.Store, key string) (row *listing, ok bool) {
	obj, err := store.Get(ctx, key, objlease.MaxRecordSize)
	switch {
	case errors.Is(err, providers.ErrNotFound):
		return nil, true
	case errors.Is(err, providers.ErrTooLarge):
		return &listing{Key: key, State: "not-a-lease", Reason: fmt.Sprintf("larger than a record can be (%d bytes)", objlease.MaxRecordSize)}, true
	case err != nil:
		c.log.Error("cannot read object", slog.String("key", key), slog.Any("err", err))
		return &listing{Key: key, State: "unreadable", Reason: err.Error()}, false
	}
	r, err := objlease.DecodeRecord(key, obj.Data)
	if err != nil {
		row = &listing{Key: key, State: "not-a-lease", Reason: err.Error()}
		var re *objlease.RecordError
		if errors.As(err, &re) {
			row.Reason = re.Reason
			if errors.Is(err, objlease.ErrNewerSchema) {
				row.State = "newer-schema"
			}
		}
		return row, true
	}
	age, clock := recordAge(obj.Attrs, r)
	return &listing{Key: key, State: string(r.State), Token: r.Token, Holder: r.Holder, WrittenAt: r.WrittenAt,
		AgeMillis: age.Milliseconds(), AgeClock: clock}, true
}

func (c *cli) printJSON(v any) int {
	b, err := json.Marshal(v)
	if err == nil {
		_, err = fmt.Fprintf(c.stdout, "%s\n", b)
	}
	if err != nil {
		c.log.Error("cannot write output", slog.Any("err", err))
		return exitUnavailable
	}
	return exitOK
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

const doctorDetail = `Checks that the store refuses the writes the lease protocol relies on it to
refuse: a second create of one object, a replace or delete with a stale
version, a replace of a missing object. Some S3-compatible stores accept
conditional requests and ignore them; leases on such a store are not
exclusive. It writes a scratch object under PREFIX-URL and removes it.

Prints the verdict, every check that failed, the store's clock offset from
this machine's (when the store reports its time) and the latency of each
request. Exits 0 if the store is safe to use, 1 if it is not, 69 if it could
not be checked.`

func (c *cli) cmdDoctor(args []string) int {
	f := c.flags("doctor")
	url, code := f.oneURL(c, args)
	if code != proceed {
		return code
	}
	ctx := context.Background()
	store, prefix, code := c.open(ctx, url, false)
	if code != proceed {
		return code
	}
	defer store.Close()
	r, err := objlease.Probe(ctx, store, prefix)
	if err != nil && !errors.Is(err, objlease.ErrStoreUnsafe) {
		return c.fail("store could not be checked", err)
	}
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "store:\t%s\n", r.Store)
	if len(r.Failures) == 0 {
		fmt.Fprintf(w, "verdict:\tsafe: every conditional write that should fail was refused\n")
	} else {
		fmt.Fprintf(w, "verdict:\tUNSAFE: leases on this store would not be exclusive\n")
		for _, fail := range r.Failures {
			fmt.Fprintf(w, "failed:\t%s\n", fail)
		}
	}
	if r.ClockKnown {
		fmt.Fprintf(w, "clock:\tstore minus local %+v (estimated; --store-clock relies on the store's clocks agreeing with each other, not with this one)\n", r.ClockOffset.Round(time.Millisecond))
	} else {
		fmt.Fprintf(w, "clock:\tthe store reports no time; --store-clock has no effect on it\n")
	}
	ops := make([]string, 0, len(r.Latency))
	for op := range r.Latency {
		ops = append(ops, op)
	}
	slices.Sort(ops)
	for _, op := range ops {
		fmt.Fprintf(w, "latency:\t%s %v\n", op, roundAll(r.Latency[op]))
	}
	if err := w.Flush(); err != nil {
		return c.fail("cannot write output", err)
	}
	if len(r.Failures) > 0 {
		c.log.Error("store does not enforce conditional writes", slog.String("url", url), slog.Any("err", err))
		return exitNo
	}
	return exitOK
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(10 * time.Microsecond)
	}
	return out
}
