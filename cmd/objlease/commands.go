package main

import (
	"context"
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
first with "objlease release --holder HOLDER URL", so give --holder (or use
"objlease hold", which renews it until signalled).

--timeout is as for run: by default wait as long as it takes; 0 tries once.
--force overwrites an object at the key that is not an objlease record
once it has been seen unchanged for its TTL, with a token above the highest
one the object, --min-token N or --fenced KEY shows; where none shows one
it refuses (exit 65) rather than start again from token 1.
A waiter reads the record just after each of the holder's renewals (once
per TTL/3) once it has learned when they land; --poll D reads every D
instead. While it waits it says who holds it on stderr (by default on a
terminal, with -v elsewhere), again only when that changes. With -o json it prints {"key","url","token","holder","ttl_ms",
"acquired_at"}.`

// acquisition is what acquire and hold print with -o json.
type acquisition struct {
	Key        string    `json:"key"`
	URL        string    `json:"url"`
	Token      uint64    `json:"token"`
	Holder     string    `json:"holder"`
	TTLMillis  int64     `json:"ttl_ms"`
	AcquiredAt time.Time `json:"acquired_at"`
}

func acquired(url string, l *objlease.Lease) acquisition {
	r := l.Record()
	return acquisition{Key: l.Key(), URL: url, Token: l.Token(), Holder: l.Holder(), TTLMillis: r.TTLMillis, AcquiredAt: r.AcquiredAt}
}

// addTakeFlags registers the flags of the commands that take a lease.
func (c *cli) addTakeFlags(fs *flagSet, lf *leaseFlags) *waitFlag {
	lf.addTTL(fs)
	lf.addHolder(fs)
	lf.addDrift(fs)
	lf.addStoreClock(fs)
	lf.addForce(fs, "overwrite an object at the key that is not an objlease record, once it has been seen unchanged for its TTL, with a token above the highest one it, --min-token or --fenced shows (refused if none shows one)")
	lf.addTokenFloor(fs)
	lf.addPoll(fs, 0, "read the record every `duration` while it is held elsewhere, at most TTL: fewer reads, a later takeover (default: on the holder's renewal phase, once per renewal interval TTL/3, just after each renewal lands; run --slots: every 1s)")
	c.addConflictExit(fs)
	return addTimeout(fs)
}

func (c *cli) acquireCmd(fs *flagSet) action {
	var lf leaseFlags
	timeout := c.addTakeFlags(fs, &lf)
	asJSON := addOutput(fs)
	return func(ctx context.Context, pos []string) error {
		url, err := fs.oneURL(pos)
		if err != nil {
			return err
		}
		cl, l, err := c.takeAt(ctx, "acquire", &lf, url, timeout)
		if err != nil {
			return err
		}
		defer cl.Store().Close()
		if lf.holder == "" {
			c.log.Warn("no --holder given; release it with --holder " + l.Holder())
		}
		if *asJSON {
			return c.printJSON(acquired(url, l))
		}
		_, err = fmt.Fprintln(c.stdout, l.Token())
		return err
	}
}

const releaseDetail = `Releases the lease if its record says HOLDER holds it, for example one taken
with "objlease acquire --holder HOLDER". The record is kept, marked released,
so that the next holder's token is higher. It prints nothing.

Exits 0 if the lease was released, or was already; 75 if another holder
holds it; 1 if there is no lease at the key.`

func (c *cli) releaseCmd(fs *flagSet) action {
	var lf leaseFlags
	lf.addHolder(fs)
	fs.require("holder")
	return func(ctx context.Context, pos []string) error {
		url, err := fs.oneURL(pos)
		if err != nil {
			return err
		}
		if lf.holder == "" {
			return usagef("release needs --holder: the holder identity the lease was acquired with")
		}
		cl, err := c.client(ctx, &lf, url)
		if err != nil {
			return opErr("release", url, err)
		}
		defer cl.Store().Close()
		err = cl.Release(ctx)
		var held *objlease.HeldError
		switch {
		case errors.Is(err, providers.ErrNotFound):
			return opErr("release", url, noLease(cl.Key(), url))
		case errors.As(err, &held):
			return opErr("release", url, &notHolderError{held, lf.holder})
		}
		return opErr("release", url, err)
	}
}

// notHolderError is a release by a holder the record does not name. It
// matches objlease.ErrHeld (exit 75).
type notHolderError struct {
	held   *objlease.HeldError
	holder string // the one that asked to release
}

func (e *notHolderError) Error() string {
	return fmt.Sprintf("the lease %q is held by %s (token %d), not %s; only its holder releases it (objlease break --force ends it whoever holds it)",
		e.held.Key, showHolder(e.held.Holder), e.held.Token, e.holder)
}

func (e *notHolderError) Unwrap() error { return e.held }

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
	return func(ctx context.Context, pos []string) error {
		url, err := fs.oneURL(pos)
		if err != nil {
			return err
		}
		if !lf.force {
			return usagef("break %s: refusing without --force: it ends the lease whoever holds it", url)
		}
		// The library's own "lease broken" message names this process as
		// the holder; say instead whose lease it was.
		lf.holder = "objlease-break"
		store, key, err := c.open(ctx, url, true)
		if err != nil {
			return opErr("break", url, err)
		}
		defer store.Close()
		o := lf.options(c.log)
		o.Logger = nil
		cl, err := objlease.New(store, key, o)
		if err != nil {
			return opErr("break", url, err)
		}
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
	}
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
	lf.addDrift(fs)
	lf.addStoreClock(fs)
	asJSON := addOutput(fs)
	return func(ctx context.Context, pos []string) error {
		url, err := fs.oneURL(pos)
		if err != nil {
			return err
		}
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
		row("ttl", "%v", r.TTL())
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
		case st.Expired && st.Rule == objlease.RuleStoreClock:
			row("expires", "expired: the store's clock says it was written more than TTL + margin ago")
		case st.Expired:
			row("expires", "expired: this observer has seen it unchanged for TTL × (1 + drift)")
		case st.Rule == objlease.RuleStoreClock:
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
	}
}

const listDetail = `Lists the lease records under the prefix PREFIX-URL names, one row each: key,
state, token, holder, age (how long ago it was last written) and expiry
(when this observer could take it over, exactly as inspect with the same
flags says). Ages are by the store's clock when the store reports it, else by
this machine's against the writer's clock, marked "(writer)"; they decide
nothing.

A held lease expires for an observer only after it has seen the record
unchanged for TTL × (1 + drift), so one listing shows the whole wait. With
--store-clock, STATE is expired (EXPIRES now) for a record the store's clock
says was last written more than TTL + its timestamp resolution + 1s ago: its
holder has stopped renewing, and a waiter with --store-clock takes it over at
once.

Objects that are not lease records are skipped (-v says how many). A prefix
is a key prefix, not only a directory: file:///var/leases/ lists everything
under /var/leases, s3://bkt/jobs/n every key starting with jobs/n.

-o wide adds the columns TTL, ACQUIRED (the writer's clock), RENEWALS,
VERSION (the store's version of the record) and DATA (what the holder
stored, quoted). --no-headers drops the header line.

With -o json it prints one JSON document, {"kind":"LeaseList","items":[...]},
whose items have the fields key, state, token, holder, ttl_ms, written_at,
age_ms, age_clock, expires_in_ms (0: expired or released), version,
renewals, acquired_at and data (base64, if any).

Exits 69 if the listing, or reading an object, failed (the rows it could
read are printed).`

// listing is one row of list's JSON output.
type listing struct {
	Key         string    `json:"key"`
	State       string    `json:"state"`
	Token       uint64    `json:"token"`
	Holder      string    `json:"holder"`
	TTLMillis   int64     `json:"ttl_ms"`
	WrittenAt   time.Time `json:"written_at,omitzero"`
	AgeMillis   int64     `json:"age_ms"`
	AgeClock    string    `json:"age_clock"`
	ExpiresInMs int64     `json:"expires_in_ms"`
}

// listItem is one item of list's JSON output: the row, and what -o wide
// adds to it.
type listItem struct {
	listing
	Version    string    `json:"version"`
	Renewals   uint64    `json:"renewals"`
	AcquiredAt time.Time `json:"acquired_at,omitzero"`
	Data       []byte    `json:"data,omitempty"`
}

func (c *cli) listCmd(fs *flagSet) action {
	var lf leaseFlags
	lf.addDrift(fs)
	lf.addStoreClock(fs)
	out := addListOutput(fs)
	return func(ctx context.Context, pos []string) error {
		url, err := fs.oneURL(pos)
		if err != nil {
			return err
		}
		store, prefix, err := c.open(ctx, url, false)
		if err != nil {
			return opErr("list", url, err)
		}
		defer store.Close()

		var w *tabwriter.Writer
		items := []listItem{}
		if !out.json {
			w = tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
			cols := []string{"KEY", "STATE", "TOKEN", "HOLDER", "AGE", "EXPIRES"}
			if out.wide {
				cols = append(cols, "TTL", "ACQUIRED", "RENEWALS", "VERSION", "DATA")
			}
			out.header(w, cols...)
		}
		var failed error
		skipped, example := 0, ""
		// Some stores (S3 Express One Zone) list out of key order: rows are
		// printed in key order whatever the listing's. A listing that fails
		// part way still shows what it listed before the error.
		var keys []string
		listErr := providers.Walk(ctx, store, prefix, func(a providers.Attrs) error {
			keys = append(keys, a.Key)
			return nil
		})
		if listErr != nil && len(keys) == 0 {
			return opErr("list", url, listErr) // no table: nothing was listed
		}
		slices.Sort(keys)
		for _, key := range keys {
			if err != nil {
				break
			}
			err = func() error {
				row, why, err := c.listRow(ctx, store, &lf, key)
				switch {
				case err != nil:
					c.log.Warn("cannot read "+key, slog.Any("err", err))
					failed = err
					return nil
				case row == nil:
					if why != "" {
						if skipped++; example == "" {
							example = key + ": " + why
						}
					}
					return nil
				case w == nil:
					items = append(items, *row)
					return nil
				}
				age, expires := humanAge(time.Duration(row.AgeMillis)*time.Millisecond), expiryText(&row.listing)
				if row.AgeClock != "store" {
					age += " (writer)"
				}
				fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s", row.Key, row.State, row.Token, showHolder(row.Holder), age, expires)
				if out.wide {
					acquired := "-"
					if !row.AcquiredAt.IsZero() {
						acquired = stamp(row.AcquiredAt)
					}
					fmt.Fprintf(w, "\t%v\t%s\t%d\t%s\t%s", time.Duration(row.TTLMillis)*time.Millisecond, acquired, row.Renewals, orDash(row.Version), showData(row.Data))
				}
				fmt.Fprintln(w)
				return nil
			}()
		}
		if err == nil {
			err = listErr
		}
		if w != nil {
			if ferr := w.Flush(); ferr != nil && err == nil {
				err = ferr
			}
		} else if perr := c.printList("LeaseList", items); perr != nil && err == nil {
			// The rows read before a failure are printed all the same.
			err = perr
		}
		if skipped > 0 {
			c.log.Debug(fmt.Sprintf("skipped %d objects that are not lease records (e.g. %s)", skipped, example))
		}
		if err == nil {
			err = failed
		}
		return opErr("list", url, err)
	}
}

func expiryText(row *listing) string {
	switch row.State {
	case string(objlease.StateReleased):
		return "free"
	case "expired":
		return "now"
	}
	return "in " + humanAge(time.Duration(row.ExpiresInMs)*time.Millisecond)
}

// stateOf is a record's state as the client that judged it sees it: held,
// released, or expired (held, and this client may take it over now).
func stateOf(st *objlease.Status) string {
	if st.Expired {
		return "expired"
	}
	return string(st.Record.State)
}

// ageClock names the clock st.Age was measured by.
func ageClock(st *objlease.Status) string {
	if st.AgeByStore {
		return "store"
	}
	return "local"
}

// judged is the row of a record read at key, as a lease client with the
// options lf gives judges it (Client.Judge): the one expiry rule, the one
// inspect and every waiter apply.
func (c *cli) judged(store providers.Store, lf *leaseFlags, key string, r *objlease.Record, a providers.Attrs) (*listing, error) {
	cl, err := objlease.New(store, key, lf.options(c.log))
	if err != nil {
		return nil, err
	}
	st, err := cl.Judge(r, a)
	if err != nil {
		return nil, err
	}
	row := &listing{Key: key, State: stateOf(st), Token: r.Token, Holder: r.Holder, TTLMillis: r.TTLMillis,
		WrittenAt: r.WrittenAt, AgeMillis: st.Age.Milliseconds(), AgeClock: ageClock(st), ExpiresInMs: st.ExpiresIn.Milliseconds()}
	return row, nil
}

// listRow reads the object at key. It returns a nil row for an object
// deleted since it was listed, or that is not a lease record (then with
// why), and an error if the store failed.
func (c *cli) listRow(ctx context.Context, store providers.Store, lf *leaseFlags, key string) (*listItem, string, error) {
	obj, err := store.Get(ctx, key, objlease.MaxRecordSize)
	switch {
	case errors.Is(err, providers.ErrNotFound):
		return nil, "", nil
	case errors.Is(err, providers.ErrTooLarge):
		return nil, fmt.Sprintf("larger than a record can be (%d bytes)", objlease.MaxRecordSize), nil
	case errors.Is(err, providers.ErrInvalidKey):
		return nil, "a key the store does not accept", nil
	case err != nil:
		return nil, "", err
	}
	r, err := objlease.DecodeRecord(key, obj.Data)
	if err == nil {
		var row *listing
		if row, err = c.judged(store, lf, key, r, obj.Attrs); err == nil {
			return &listItem{listing: *row, Version: obj.Attrs.Version, Renewals: r.Renewals, AcquiredAt: r.AcquiredAt, Data: r.Data}, "", nil
		}
	}
	var re *objlease.RecordError
	if errors.As(err, &re) {
		return nil, plainReason(obj.Data, re), nil
	}
	return nil, err.Error(), nil
}
