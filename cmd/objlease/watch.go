package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/providers"
)

const watchDetail = `Prints one line for every change to the lease at URL, or to the leases under
PREFIX-URL (a URL ending in "/", or any URL with --prefix), until it is
interrupted (exit 0):

  observed    the state when watching started
  acquired    a holder took a free (released or absent) lease
  renewed     the holder rewrote its record (only with --renewals)
  released    the holder released it
  expired     held, but this observer has seen the record unchanged for
              TTL × (1 + drift): a waiter here may take it over now
  taken-over  a new holder took it while it was held (after it expired)
  broken      "objlease break" ended it (a released record, a higher token)
  deleted     the object is gone
  not-a-lease the object at URL is not an objlease record (URL only)

Each line has the time this observer saw the change (its own clock, UTC),
the key, the holder and the token, and for taken-over the previous holder.
With -o json it prints one JSON object per event with the fields time,
event, key, state, token, holder, ttl_ms, renewals and, where they apply,
previous_holder, previous_token and detail.

Cost: one read per --poll for a URL. For a prefix, one list request per
1,000 keys per --poll, plus one read of each record that changed since the
last poll; objects that are not lease records are read once and skipped.`

// watchEvent is one line of watch's output.
type watchEvent struct {
	Time       time.Time `json:"time"`
	Event      string    `json:"event"`
	Key        string    `json:"key"`
	State      string    `json:"state"`
	Token      uint64    `json:"token"`
	Holder     string    `json:"holder"`
	TTLMillis  int64     `json:"ttl_ms"`
	Renewals   uint64    `json:"renewals"`
	PrevHolder string    `json:"previous_holder,omitempty"`
	PrevToken  uint64    `json:"previous_token,omitempty"`
	Detail     string    `json:"detail,omitempty"`
}

// sighting is what a watcher last saw at one key.
type sighting struct {
	version  string
	rec      *objlease.Record // nil: absent, or not a lease record
	notLease string           // why the object is not a lease record
	since    time.Time        // when this watcher first saw this version
	expired  bool             // an expired event was printed for this version
}

// tracker turns successive sightings of keys into events. It keeps no
// clock of its own: each call says what time it is, so tests drive it.
type tracker struct {
	drift    float64
	renewals bool
	prefix   bool // skip objects that are not lease records
	started  bool // the first poll is over: what appears now is new
	seen     map[string]*sighting
}

func newTracker(drift float64, renewals, prefix bool) *tracker {
	return &tracker{drift: drift, renewals: renewals, prefix: prefix, seen: map[string]*sighting{}}
}

// unchanged reports whether version is what was last seen at key.
func (t *tracker) unchanged(key, version string) bool {
	s, ok := t.seen[key]
	return ok && s.version == version
}

// observe records what a read of key found at now: rec, or an object that
// is not a lease record (notLease says why), or nothing (version "").
func (t *tracker) observe(now time.Time, key, version string, rec *objlease.Record, notLease string) []watchEvent {
	prev, known := t.seen[key]
	if known && prev.version == version {
		return nil
	}
	cur := &sighting{version: version, rec: rec, notLease: notLease, since: now}
	if version == "" && t.prefix {
		delete(t.seen, key) // listed no more; a list does not name absent keys
	} else {
		t.seen[key] = cur
	}
	ev := watchEvent{Time: now, Key: key, State: "absent"}
	if rec != nil {
		ev.State, ev.Token, ev.Holder, ev.TTLMillis, ev.Renewals = string(rec.State), rec.Token, rec.Holder, rec.TTLMillis, rec.Renewals
	} else if notLease != "" {
		ev.State, ev.Detail = "not-a-lease", notLease
	}
	var p *objlease.Record
	if known {
		p = prev.rec
	}
	switch {
	case notLease != "":
		if t.prefix {
			return nil
		}
		ev.Event = "not-a-lease"
	case !known && !t.started:
		if version == "" && t.prefix {
			return nil
		}
		ev.Event = "observed"
	case !known && version == "":
		return nil
	case version == "":
		if p == nil && t.prefix {
			return nil
		}
		ev.Event = "deleted"
	case p == nil:
		ev.Event = "acquired"
		if rec.State == objlease.StateReleased {
			ev.Event = "broken"
		}
	case rec.Token < p.Token:
		ev.Event, ev.Detail = "rewritten", fmt.Sprintf("token went back from %d: written by something other than objlease", p.Token)
	case rec.State == objlease.StateHeld && rec.Token == p.Token:
		if !t.renewals {
			return nil
		}
		ev.Event = "renewed"
	case rec.State == objlease.StateHeld && p.State == objlease.StateHeld:
		ev.Event = "taken-over"
	case rec.State == objlease.StateHeld:
		ev.Event = "acquired"
	case rec.Token == p.Token && p.State == objlease.StateHeld:
		ev.Event = "released"
	case rec.Token > p.Token:
		ev.Event = "broken"
	default:
		return nil // rewritten released, same token: nothing to say
	}
	if p != nil && (ev.Event == "taken-over" || ev.Event == "broken" || ev.Event == "acquired") && p.Holder != "" {
		ev.PrevHolder, ev.PrevToken = p.Holder, p.Token
	}
	return []watchEvent{ev}
}

// tick reports the held leases that have expired for this observer by now:
// their record unchanged for TTL × (1 + drift) since it first saw it.
func (t *tracker) tick(now time.Time) []watchEvent {
	var evs []watchEvent
	for key, s := range t.seen {
		r := s.rec
		if r == nil || r.State != objlease.StateHeld || s.expired {
			continue
		}
		wait := time.Duration(float64(r.TTL()) * (1 + t.drift))
		if now.Sub(s.since) < wait {
			continue
		}
		s.expired = true
		evs = append(evs, watchEvent{Time: now, Event: "expired", Key: key, State: string(r.State), Token: r.Token, Holder: r.Holder,
			TTLMillis: r.TTLMillis, Renewals: r.Renewals, Detail: fmt.Sprintf("unchanged for %s, TTL × (1 + drift), by this observer's clock", roundDuration(wait))})
	}
	slices.SortFunc(evs, func(a, b watchEvent) int { return strings.Compare(a.Key, b.Key) })
	return evs
}

// nextExpiry is how long from now until the next held lease would expire
// for this observer (ok false if none is pending).
func (t *tracker) nextExpiry(now time.Time) (time.Duration, bool) {
	var next time.Duration
	ok := false
	for _, s := range t.seen {
		if r := s.rec; r != nil && r.State == objlease.StateHeld && !s.expired {
			d := time.Duration(float64(r.TTL())*(1+t.drift)) - now.Sub(s.since)
			if !ok || d < next {
				next, ok = d, true
			}
		}
	}
	return max(next, 0), ok
}

func (c *cli) watchCmd(fs *flagSet) action {
	var lf leaseFlags
	lf.addDrift(fs)
	poll := time.Second
	fs.Var(&durationFlag{d: &poll, min: 10 * time.Millisecond, max: time.Hour}, "poll", "how often to read the record (or list the prefix), as a `duration` (default 1s)")
	renewals := fs.Bool("renewals", false, "print a line for every renewal too")
	prefix := fs.Bool("prefix", false, "treat the URL's last segment as a key prefix, as list does")
	asJSON := addOutput(fs)
	return func(ctx context.Context, pos []string) error {
		url, err := fs.oneURL(pos)
		if err != nil {
			return err
		}
		store, key, err := c.open(ctx, url, false)
		if err != nil {
			return opErr("watch", url, err)
		}
		defer store.Close()
		isPrefix := *prefix || key == "" || strings.HasSuffix(key, "/")
		w := &watcher{c: c, store: store, key: key, t: newTracker(lf.drift, *renewals, isPrefix), clock: clock.Real(), asJSON: *asJSON}
		err = w.run(ctx, poll)
		if _, ok := interrupted(ctx); ok {
			return nil // the way to stop watching
		}
		return opErr("watch", url, err)
	}
}

// watcher polls a key or a prefix and prints what changed.
type watcher struct {
	c      *cli
	store  providers.Store
	key    string // the key, or the prefix
	t      *tracker
	clock  clock.Clock
	asJSON bool
	failed bool // the last poll failed: say so once, and once when it recovers
}

func (w *watcher) run(ctx context.Context, poll time.Duration) error {
	for {
		err := w.poll(ctx)
		if err == nil {
			w.t.started = true
		}
		switch {
		case ctx.Err() != nil:
			return context.Cause(ctx)
		case err != nil && permanent(err):
			return err
		case err != nil && !w.failed:
			w.failed = true
			w.c.log.Warn("cannot read the store; retrying every --poll", slog.Any("err", err))
		case err == nil && w.failed:
			w.failed = false
			w.c.log.Warn("reading the store again")
		}
		if err := w.print(w.t.tick(w.clock.Now())); err != nil {
			return err
		}
		wait := poll
		if d, ok := w.t.nextExpiry(w.clock.Now()); ok && d < wait {
			wait = d + time.Millisecond // print expired on time
		}
		t := w.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		case <-t.C():
		}
	}
}

// poll reads once and prints the changes.
func (w *watcher) poll(ctx context.Context) error {
	if !w.t.prefix {
		return w.read(ctx, w.key)
	}
	listed := map[string]bool{}
	err := providers.Walk(ctx, w.store, w.key, func(a providers.Attrs) error {
		listed[a.Key] = true
		if w.t.unchanged(a.Key, a.Version) {
			return nil // costs no read
		}
		return w.read(ctx, a.Key)
	})
	if err != nil {
		return err
	}
	var gone []string
	for k := range w.t.seen {
		if !listed[k] {
			gone = append(gone, k)
		}
	}
	slices.Sort(gone)
	for _, k := range gone {
		if err := w.print(w.t.observe(w.clock.Now(), k, "", nil, "")); err != nil {
			return err
		}
	}
	return nil
}

// read reads the object at key and prints what changed.
func (w *watcher) read(ctx context.Context, key string) error {
	obj, err := w.store.Get(ctx, key, objlease.MaxRecordSize)
	now := w.clock.Now()
	switch {
	case errors.Is(err, providers.ErrNotFound):
		return w.print(w.t.observe(now, key, "", nil, ""))
	case errors.Is(err, providers.ErrTooLarge):
		a, serr := w.store.Stat(ctx, key)
		if serr != nil {
			return serr
		}
		return w.print(w.t.observe(now, key, a.Version, nil, fmt.Sprintf("larger than a record can be (%d bytes)", objlease.MaxRecordSize)))
	case err != nil:
		return err
	}
	rec, derr := objlease.DecodeRecord(key, obj.Data)
	if derr != nil {
		why := derr.Error()
		var re *objlease.RecordError
		if errors.As(derr, &re) {
			why = re.Reason
		}
		return w.print(w.t.observe(now, key, obj.Version, nil, why))
	}
	return w.print(w.t.observe(now, key, obj.Version, rec, ""))
}

func (w *watcher) print(evs []watchEvent) error {
	for _, ev := range evs {
		var err error
		if w.asJSON {
			err = w.c.printJSON(ev)
		} else {
			_, err = fmt.Fprintln(w.c.stdout, ev.text())
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// text is an event as one line: time, event, key, state, token, holder.
func (ev watchEvent) text() string {
	s := fmt.Sprintf("%s  %-11s %s  %s", stamp(ev.Time), ev.Event, ev.Key, ev.State)
	if ev.State == string(objlease.StateHeld) || ev.State == string(objlease.StateReleased) {
		s += fmt.Sprintf("  token=%d", ev.Token)
	}
	if ev.Holder != "" {
		s += "  holder=" + showHolder(ev.Holder)
	}
	if ev.PrevHolder != "" {
		s += fmt.Sprintf("  previous=%s (token %d)", showHolder(ev.PrevHolder), ev.PrevToken)
	}
	if ev.Detail != "" {
		s += "  (" + ev.Detail + ")"
	}
	return s
}
