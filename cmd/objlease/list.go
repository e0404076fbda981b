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
	lf.addExpiry(fs)
	out := addListOutput(fs)
	return c.onStore(fs, "list", false, func(ctx context.Context, url string, store providers.Store, prefix string) error {
		var err error // what list ends with
		var w *tabwriter.Writer
		items := []listItem{}
		if !out.json {
			w = tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
			out.header(w, []string{"KEY", "STATE", "TOKEN", "HOLDER", "AGE", "EXPIRES"}, "TTL", "ACQUIRED", "RENEWALS", "VERSION", "DATA")
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
	})
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
	cl, err := newClient(store, key, lf.options(), objlease.SessionOptions{Logger: c.log})
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
	var re *objlease.Error // not a record
	if errors.As(err, &re) {
		return nil, plainReason(obj.Data, re), nil
	}
	return nil, err.Error(), nil
}
