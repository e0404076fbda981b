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
interrupted (exit 0). Each event follows from the two records it compares
(the one seen before and the one seen now); what happened between two
reads that the records cannot tell is said in the detail, not guessed:

  observed    the state when watching started
  acquired    a holder took the lease with a new token; if the record
              before was held and not seen expired, or tokens were
              skipped, the detail says what ended unseen between two reads
  renewed     the holder rewrote its record (only with --renewals)
  released    the holder released it; a released record of a holder never
              seen holding it prints acquired, then released
  expired     held, and this observer has seen the record unchanged for
              TTL × (1 + drift), or, with --store-clock, the store's clock
              shows it written more than TTL + resolution + 1s ago: the
              rule a waiter here with the same flags uses; it may take it
              over now
  taken-over  a new holder took the next token over a record this observer
              had seen expired
  broken      "objlease break" ended it (a released record with a new
              token and no holder)
  deleted     the object is gone
  not-a-lease the object at URL is not an objlease record (URL only)
  rewritten   the record changed as objlease never writes it (the token
              went back, or a token changed holder)

Each line has the time this observer saw the change (its own clock, UTC),
the key, the holder and the token, and for acquired, taken-over and broken
the previous holder.
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
	expired  bool             // an expired event was printed for this version
}

// judgement is the library's answer about the record last read at a key:
// how long until it expires for this observer, whether the store's clock
// decided that, and how long it has been seen unchanged (ok false: no
// answer).
type judgement func(key string) (expiresIn, unchanged time.Duration, byStoreClock, ok bool)

// tracker turns successive sightings of keys into events. Every event is
// derived from the two records it compares (see eventsBetween); expiry is
// the library's judgement, asked of a Client that read the record. It
// keeps no clock of its own: each call says what time it is.
type tracker struct {
	renewals bool
	prefix   bool // skip objects that are not lease records
	started  bool // the first poll is over: what appears now is new
	seen     map[string]*sighting
}

func newTracker(renewals, prefix bool) *tracker {
	return &tracker{renewals: renewals, prefix: prefix, seen: map[string]*sighting{}}
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
	cur := &sighting{version: version, rec: rec, notLease: notLease}
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
	expired := false
	if known {
		p, expired = prev.rec, prev.expired
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
	default:
		return eventsBetween(ev, p, expired, rec, t.renewals)
	}
	return []watchEvent{ev}
}

// eventsBetween names what happened between two records of one key: p, the
// one seen before (nil: none, the key was absent or held no lease record;
// expired: this observer printed expired for it), and rec, the one seen
// now. It says only what follows from the two records and how objlease
// writes them:
//
//   - acquiring writes a held record with the next token and the holder;
//   - renewing rewrites the held record with the same token;
//   - releasing rewrites it released, same token and holder;
//   - breaking writes a released record with the next token and no holder.
//
// Several writes may land between two reads; what cannot be told apart
// is said in the detail rather than guessed.
func eventsBetween(ev watchEvent, p *objlease.Record, expired bool, rec *objlease.Record, renewals bool) []watchEvent {
	held := rec.State == objlease.StateHeld
	if p != nil && rec.Token == p.Token {
		switch {
		case held && p.State == objlease.StateHeld && rec.Holder == p.Holder:
			if !renewals {
				return nil
			}
			ev.Event = "renewed"
		case !held && p.State == objlease.StateHeld && rec.Holder == p.Holder:
			ev.Event = "released"
		case !held && p.State == objlease.StateReleased:
			return nil // a released record rewritten: nothing to say
		default:
			ev.Event, ev.Detail = "rewritten", fmt.Sprintf("token %d rewritten from %s by %s: objlease writes a new token for a new holder, and never holds a released token again",
				p.Token, describeRecord(p), describeRecord(rec))
		}
		return []watchEvent{ev}
	}
	if p != nil && rec.Token < p.Token {
		ev.Event, ev.Detail = "rewritten", fmt.Sprintf("token went back from %d: written by something other than objlease", p.Token)
		return []watchEvent{ev}
	}
	// A new token: a new acquisition (or a break), over p.
	var unseen []string
	if p != nil {
		if p.Holder != "" {
			ev.PrevHolder, ev.PrevToken = p.Holder, p.Token
		}
		if n := rec.Token - p.Token - 1; n == 1 {
			unseen = append(unseen, fmt.Sprintf("token %d was issued and ended", p.Token+1))
		} else if n > 1 {
			unseen = append(unseen, fmt.Sprintf("tokens %d to %d were issued and ended", p.Token+1, rec.Token-1))
		}
	}
	takeover := p != nil && p.State == objlease.StateHeld && expired && rec.Token == p.Token+1
	if p != nil && p.State == objlease.StateHeld && !takeover && (held || rec.Holder != "") {
		// Whether p's holder released it, was broken, or was taken over
		// by a contender that judged it expired before this observer did,
		// the records do not say.
		unseen = append([]string{fmt.Sprintf("token %d ended (released, broken or expired)", p.Token)}, unseen...)
	}
	between := ""
	if len(unseen) > 0 {
		between = strings.Join(unseen, "; ") + " between two reads"
	}
	switch {
	case !held && rec.Holder == "":
		ev.Event, ev.Detail = "broken", between
		return []watchEvent{ev}
	case held:
		ev.Event, ev.Detail = "acquired", between
		if takeover {
			ev.Event = "taken-over"
		}
		return []watchEvent{ev}
	}
	// Released by a holder this observer never saw holding it: it
	// acquired and released between two reads.
	acq := ev
	acq.Event, acq.Detail = "acquired", "acquired and released between two reads"
	if takeover {
		acq.Event = "taken-over"
	}
	if between != "" {
		acq.Detail = between + "; " + acq.Detail
	}
	rel := ev
	rel.Event, rel.PrevHolder, rel.PrevToken = "released", "", 0
	return []watchEvent{acq, rel}
}

// describeRecord is a record's state and holder, for a detail.
func describeRecord(r *objlease.Record) string {
	if r.Holder == "" {
		return string(r.State)
	}
	return fmt.Sprintf("%s by %s", r.State, showHolder(r.Holder))
}

// tick reports the held leases that have expired for this observer by now,
// as the library judges them.
func (t *tracker) tick(now time.Time, judge judgement) []watchEvent {
	var evs []watchEvent
	for key, s := range t.seen {
		r := s.rec
		if r == nil || r.State != objlease.StateHeld || s.expired {
			continue
		}
		left, unchanged, byStoreClock, ok := judge(key)
		if !ok || left > 0 {
			continue
		}
		s.expired = true
		detail := fmt.Sprintf("unchanged for %s, TTL × (1 + drift), by this observer's clock", roundDuration(unchanged))
		if byStoreClock {
			detail = "the store's clock shows it written more than TTL + margin ago"
		}
		evs = append(evs, watchEvent{Time: now, Event: "expired", Key: key, State: string(r.State), Token: r.Token, Holder: r.Holder,
			TTLMillis: r.TTLMillis, Renewals: r.Renewals, Detail: detail})
	}
	slices.SortFunc(evs, func(a, b watchEvent) int { return strings.Compare(a.Key, b.Key) })
	return evs
}

// nextExpiry is how long from now until the next held lease would expire
// for this observer (ok false if none is pending).
func (t *tracker) nextExpiry(judge judgement) (time.Duration, bool) {
	var next time.Duration
	found := false
	for key, s := range t.seen {
		if r := s.rec; r != nil && r.State == objlease.StateHeld && !s.expired {
			if d, _, _, ok := judge(key); ok && (!found || d < next) {
				next, found = d, true
			}
		}
	}
	return max(next, 0), found
}

func (c *cli) watchCmd(fs *flagSet) action {
	var lf leaseFlags
	lf.addExpiry(fs)
	poll := time.Second
	fs.Var(&durationFlag{d: &poll, min: 10 * time.Millisecond, max: time.Hour}, "poll", "how often to read the record (or list the prefix), as a `duration` (default 1s)")
	renewals := fs.Bool("renewals", false, "print a line for every renewal too")
	prefix := fs.Bool("prefix", false, "treat the URL's last segment as a key prefix, as list does")
	asJSON := addOutput(fs)
	return c.serveOneURL(fs, "watch", func(ctx context.Context, url string) error {
		c.probe.set(func(p *probe) {
			p.ready = func(p *probe) (bool, string) { return p.polled, "the last read of the store failed" }
		})
		store, key, err := c.open(ctx, url, false)
		if err != nil {
			return opErr("watch", url, err)
		}
		defer store.Close()
		isPrefix := *prefix || key == "" || strings.HasSuffix(key, "/")
		if !isPrefix && c.isDirectory(ctx, store, url, key) {
			key, isPrefix = key+"/", true
		}
		w := newWatcher(c, store, key, newTracker(*renewals, isPrefix), clock.Real(), lf.options(), *asJSON)
		err = w.run(ctx, poll)
		if _, ok := interrupted(ctx); ok {
			return nil // the way to stop watching
		}
		return opErr("watch", url, err)
	})
}

// isDirectory reports whether key names no object but has objects under
// key/: watch DIR was meant as watch DIR/, as ls DIR lists it, and the
// leases under it are watched, said once. (An absent key is otherwise
// watched as a key, which may yet be written.)
func (c *cli) isDirectory(ctx context.Context, store providers.Store, url, key string) bool {
	if _, err := store.Stat(ctx, key); !errors.Is(err, providers.ErrNotFound) {
		return false
	}
	if page, err := store.List(ctx, key+"/", "", 1); err == nil && len(page.Objects) > 0 {
		c.say(fmt.Sprintf("watch %s: no object at %q, and objects under %q: watching the leases under it, as for %s/", url, key, key+"/", url))
		return true
	}
	return false
}

// watcher polls a key or a prefix and prints what changed. It reads each
// key through a lease Client of its own, which never writes: the Client
// judges expiry by the same rule a waiting contender with the same options
// does.
type watcher struct {
	c       *cli
	store   providers.Store
	key     string // the key, or the prefix
	t       *tracker
	clock   clock.Clock
	opts    objlease.Options // the options of the Clients that read
	asJSON  bool
	clients map[string]*objlease.Client
	failed  bool // the last poll failed: say so once, and once when it recovers
}

// newWatcher returns a watcher whose Clients read with opts (drift and
// store-clock rule) on clk.
func newWatcher(c *cli, store providers.Store, key string, t *tracker, clk clock.Clock, opts objlease.Options, asJSON bool) *watcher {
	opts.Holder = "objlease-watch"
	return &watcher{c: c, store: store, key: key, t: t, clock: clk, opts: opts, asJSON: asJSON, clients: map[string]*objlease.Client{}}
}

// client returns the Client that reads key; fresh makes a new one, which
// has seen nothing yet.
func (w *watcher) client(key string, fresh bool) (*objlease.Client, error) {
	if cl, ok := w.clients[key]; ok && !fresh {
		return cl, nil
	}
	cl, err := newClient(w.store, key, w.opts, objlease.SessionOptions{Clock: w.clock, Logger: w.c.log})
	if err != nil {
		return nil, err
	}
	w.clients[key] = cl
	return cl, nil
}

// judge is the library's judgement of the record last read at key, now. A
// Client's Judge of a listed version it last read sends no request.
func (w *watcher) judge(key string) (time.Duration, time.Duration, bool, bool) {
	cl, s := w.clients[key], w.t.seen[key]
	if cl == nil || s == nil || s.rec == nil {
		return 0, 0, false, false
	}
	st, err := cl.Judge(nil, providers.Attrs{Key: key, Version: s.version})
	if err != nil || st.Record == nil {
		return 0, 0, false, false
	}
	return st.ExpiresIn, st.Unchanged, st.ByStoreClock, true
}

func (w *watcher) run(ctx context.Context, poll time.Duration) error {
	for {
		err := w.poll(ctx)
		if err == nil {
			w.t.started = true
		}
		w.c.probe.set(func(p *probe) { p.polled = err == nil })
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
		if err == nil {
			// Expired only when a read has just seen the record unchanged.
			if err := w.print(w.t.tick(w.clock.Now(), w.judge)); err != nil {
				return err
			}
		}
		wait := poll
		if d, ok := w.t.nextExpiry(w.judge); ok && d < wait {
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
		return w.read(ctx, w.key, "")
	}
	listed := map[string]bool{}
	var all []providers.Attrs
	err := providers.Walk(ctx, w.store, w.key, func(a providers.Attrs) error {
		listed[a.Key] = true
		all = append(all, a)
		return nil
	})
	if err != nil {
		return err
	}
	// Changes are printed in key order, which some stores (S3 Express One
	// Zone) do not list in.
	slices.SortFunc(all, func(a, b providers.Attrs) int { return strings.Compare(a.Key, b.Key) })
	for _, a := range all {
		if w.t.unchanged(a.Key, a.Version) {
			continue // costs no read
		}
		if err := w.read(ctx, a.Key, a.Version); err != nil {
			return err
		}
	}
	var gone []string
	for k := range w.t.seen {
		if !listed[k] {
			gone = append(gone, k)
		}
	}
	slices.Sort(gone)
	for _, k := range gone {
		delete(w.clients, k)
		if err := w.print(w.t.observe(w.clock.Now(), k, "", nil, "")); err != nil {
			return err
		}
	}
	return nil
}

// read reads the record at key and prints what changed. listed is the
// version a listing showed ("" for a single key).
func (w *watcher) read(ctx context.Context, key, listed string) error {
	if s := w.t.seen[key]; listed == "" && s != nil && s.notLease != "" {
		// Not a lease record when last read: look again only if it changed.
		a, err := w.store.Stat(ctx, key)
		switch {
		case errors.Is(err, providers.ErrNotFound):
		case err != nil:
			return err
		case a.Version == s.version:
			return nil
		}
	}
	cl, err := w.client(key, false)
	if err != nil {
		return err
	}
	st, err := cl.Inspect(ctx)
	var re *objlease.Error
	if errors.As(err, &re) && errors.Is(err, objlease.ErrBadRecord) {
		if s := w.t.seen[key]; s != nil && s.rec != nil {
			// A record whose token went back is refused by a Client that
			// saw a higher one; a fresh Client reads it, so that the
			// watcher can say it was rewritten.
			if cl, err = w.client(key, true); err != nil {
				return err
			}
			st, err = cl.Inspect(ctx)
		}
	}
	now := w.clock.Now()
	switch {
	case err == nil && st.Record == nil:
		return w.print(w.t.observe(now, key, "", nil, ""))
	case err == nil:
		return w.print(w.t.observe(now, key, st.Version, st.Record, ""))
	case !errors.As(err, &re):
		return err
	}
	// Read the object itself, to say what it is in plain words.
	obj, gerr := w.store.Get(ctx, key, objlease.MaxRecordSize)
	switch {
	case errors.Is(gerr, providers.ErrNotFound):
		return w.print(w.t.observe(now, key, "", nil, ""))
	case gerr != nil:
		return gerr
	}
	version := listed // what the next listing is compared with
	if version == "" {
		version = obj.Attrs.Version
	}
	return w.print(w.t.observe(now, key, version, nil, plainReason(obj.Data, re)))
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
