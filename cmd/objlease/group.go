package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/shard"
)

const groupDetail = `Shard groups (package objlease/shard): members share a set of shards,
each shard a lease under PREFIX/shards/ID, each member a heartbeat lease
under PREFIX/members/NAME. Each record is an ordinary lease: objlease
inspect works on PREFIX/shards/ID.

group show PREFIX-URL (or group PREFIX-URL) shows the members and the
shards, judged by the rule inspect applies with the same flags. A member
is live while its heartbeat is held, left once it released it, expired
once this observer may take it over (one look never can, unless
--store-clock: by the store's clock). A held record whose last write is
older than its TTL × (1 + drift) is shown stale: its holder has probably
stopped, but saying so from one look would trust the writer's clock
against this machine's. LAST SEEN is the age of the member's last write
(by the store's clock where the store reports one, else by the
writer's). A shard is free when released, never taken or expired, and
held otherwise; OWNER says when its owner is not a live member. A worker
takes a shard once the shard's own lease has expired for it. -o json
prints one document {"kind":"GroupList","items":[...]}, each item with
kind (member or shard), name, key, state, status, reason, token, holder,
since, ttl_ms, age_ms, age_clock and expires_in_ms; -o wide adds columns;
--no-headers drops the headers.

group define PREFIX-URL ID... creates the records of shards that do not
exist yet, released (free), so that workers find them; existing shards are
left as they are. A worker's shard set is the records under PREFIX/shards/.

group join [--member NAME] PREFIX-URL -- COMMAND [ARGS...] joins the group
as NAME (default HOST/PID/RANDOM, as run's holder) and, for each shard it
comes to own, runs COMMAND as a child process with OBJLEASE_SHARD (the
shard id), OBJLEASE_TOKEN (the shard lease's fencing token),
OBJLEASE_HOLDER (the member) and OBJLEASE_URL (PREFIX-URL) in its
environment, stdin /dev/null, stdout and stderr join's. When the shard is
handed to another member (rebalancing) or its lease is lost, COMMAND gets
SIGTERM, SIGKILL after --grace (on Linux: with everything it started, as
under run), and the shard is released only once COMMAND has exited.
If COMMAND exits 0 the shard is done: it is kept, and COMMAND not run
again, until the shard moves (a new owner runs it again: make it
idempotent, fence its writes with the token). If it exits non-zero or dies
of a signal it is run again after a back-off (1s, doubling to 1m), the
shard kept. SIGINT, SIGTERM or SIGHUP make join leave: every COMMAND is
stopped as above, the shards and the membership are released at once, and
join exits 128+N. A COMMAND that cannot be found exits 127 before joining.

group show exits 1, with "no group here" on stderr, if the prefix has no
member and no shard. Exits 69 if the listing, or reading a record, failed; 78 if the bucket is
missing or the credentials are refused.`

// groupRow is one item of group show's JSON output.
type groupRow struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	listing
	// Status is live, expired or left for a member; held or free for a
	// shard.
	Status string     `json:"status"`
	Reason string     `json:"reason,omitempty"` // why: a free shard, a member not live, a held shard's owner not live
	Since  *time.Time `json:"since"`            // null while free
}

// groupList is group show's JSON document.
type groupList struct {
	Kind  string     `json:"kind"`
	Items []groupRow `json:"items"`
}

// groupFlags are the flags of the group subcommands, and which take each
// (-v: all).
var groupFlags = map[string][]string{
	"o": {"show"}, "no-headers": {"show"}, "drift": {"show", "join"}, "store-clock": {"show", "join"},
	"ttl": {"join", "define"}, "member": {"join"}, "grace": {"join"}, "http": {"join"}, "poll": {"join"},
}

// groupCmd runs the group subcommands. Its flags are the union of theirs;
// each subcommand refuses the ones it does not take.
func (c *cli) groupCmd(fs *flagSet) action {
	var lf leaseFlags
	lf.addTTL(fs)
	lf.addExpiry(fs)
	lf.addPoll(fs, 0, "join: a round every `duration`, at most TTL: each round lists the members (and the shards when something may have moved); longer rounds cost fewer listings, and a join, a leave or a death is noticed later (default TTL/3)")
	member := fs.String("member", "", "join: the member's `name` in the group, and the holder of its leases (default HOST/PID/RANDOM)")
	grace := 10 * time.Second
	fs.Var(&durationFlag{d: &grace, min: 0, max: 24 * time.Hour}, "grace", "join: how long a shard's command has between SIGTERM and SIGKILL, as a `duration` (default 10s)")
	format := ""
	fs.Func("o", "show: output `format`: text, json or wide (default text)", func(s string) error {
		switch s {
		case "text", "json", "wide":
			format = s
			return nil
		}
		return fmt.Errorf("want text, json or wide")
	})
	noHeaders := fs.Bool("no-headers", false, "show: print the tables without their header lines")
	httpAddr := addHTTP(fs)
	fs.Lookup("http").Usage = "join: " + fs.Lookup("http").Usage
	fs.checks = append(fs.checks, func() error {
		if *member == "" {
			return nil
		}
		if err := objlease.CheckHolder(*member); err != nil {
			return errors.New("--member: " + strings.TrimPrefix(err.Error(), objlease.ErrInvalidOptions.Error()+": "))
		}
		return nil
	})
	return func(ctx context.Context, pos []string) error {
		sub := "show"
		if len(pos) > 0 && slices.Contains(fs.cmd.subcommands, pos[0]) {
			sub, pos = pos[0], pos[1:]
		}
		var bad error
		fs.Visit(func(f *flag.Flag) {
			if subs, ok := groupFlags[f.Name]; ok && bad == nil && !slices.Contains(subs, sub) {
				bad = usagef("group %s does not take -%s (a flag of group %s)", sub, f.Name, strings.Join(subs, ", "))
			}
		})
		if bad != nil {
			return bad
		}
		switch sub {
		case "join":
			if len(pos) < 3 || pos[1] != "--" {
				return usagef("group join needs a URL and a command: objlease group join [flags] PREFIX-URL -- COMMAND [ARGS...]")
			}
			lf.holder = *member
			stop, err := c.serveHTTP(*httpAddr, "group join", pos[0])
			if err != nil {
				return err
			}
			defer stop()
			return c.groupJoin(ctx, &lf, pos[0], pos[2:], grace)
		case "define":
			if len(pos) >= 2 && pos[1] == "--" {
				pos = append(pos[:1], pos[2:]...)
			}
			if len(pos) < 2 {
				return usagef("group define needs a URL and shard ids: objlease group define PREFIX-URL ID...")
			}
			return c.groupDefine(ctx, &lf, pos[0], pos[1:])
		}
		if len(pos) == 3 && pos[1] == "--" {
			pos = []string{pos[0], pos[2]}
		}
		if len(pos) != 1 {
			return usagef("group show takes one PREFIX-URL, got %d arguments %q; see objlease help group", len(pos), pos)
		}
		return c.groupShow(ctx, &lf, pos[0], format, *noHeaders)
	}
}

// groupDefine creates the free records of the shards ids that do not exist.
func (c *cli) groupDefine(ctx context.Context, lf *leaseFlags, url string, ids []string) error {
	for _, id := range ids {
		if id == "" || strings.HasPrefix(id, "/") || strings.HasSuffix(id, "/") || strings.Contains(id, "//") {
			return usagef("group define %s: shard id %q: want a non-empty name, without leading, trailing or double slashes", url, id)
		}
	}
	store, prefix, err := c.open(ctx, url, false)
	if err != nil {
		return opErr("group define", url, err)
	}
	defer store.Close()
	return opErr("group define", url, shard.Define(ctx, store, prefix, lf.options(), ids...))
}

// groupShow prints the group at url.
func (c *cli) groupShow(ctx context.Context, lf *leaseFlags, url, format string, noHeaders bool) error {
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
			l, err := c.judged(store, lf, e.Key, e.Record, e.Attrs)
			if errors.Is(err, objlease.ErrFencedObject) {
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
	if rows == nil {
		// Empty tables with exit 0 would read as a group of nobody.
		return opErr("group", url, &tagged{"no group here: no member and no shard under the prefix (group define or group join makes one)" + missingDir(url), errNoLease})
	}
	judgeGroup(rows, lf.drift)
	if format == "json" {
		return c.printJSON(groupList{Kind: "GroupList", Items: rows})
	}
	owned := map[string]int{}
	for _, r := range rows {
		if r.Kind == "shard" && r.Status == "held" {
			owned[r.Holder]++
		}
	}
	wide := format == "wide"
	out := listFormat{wide: wide, noHeaders: noHeaders}
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	out.header(w, []string{"MEMBER", "STATE", "SHARDS", "LAST SEEN"}, "TOKEN", "TTL", "RECORD", "EXPIRES")
	for _, r := range rows {
		if r.Kind != "member" {
			continue
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%s", r.Name, r.Status, owned[r.Holder], lastSeen(&r.listing))
		if wide {
			fmt.Fprintf(w, "\t%d\t%s\t%s\t%s", r.Token, humanAge(time.Duration(r.TTLMillis)*time.Millisecond), r.State, expiryText(&r.listing))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
	out.header(w, []string{"SHARD", "STATE", "TOKEN", "OWNER", "SINCE", "EXPIRES"}, "LAST WRITE", "TTL", "RECORD", "HOLDER")
	for _, r := range rows {
		if r.Kind != "shard" {
			continue
		}
		since := "-"
		if r.Since != nil && !r.Since.IsZero() {
			since = stamp(*r.Since)
		}
		owner := "-"
		if r.Holder != "" {
			owner = showHolder(r.Holder)
			if r.Reason != "" {
				owner += " (" + r.Reason + ")"
			}
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s", r.Name, r.Status, r.Token, owner, since, expiryText(&r.listing))
		if wide {
			fmt.Fprintf(w, "\t%s\t%s\t%s\t%s", lastSeen(&r.listing), humanAge(time.Duration(r.TTLMillis)*time.Millisecond), r.State, showHolder(r.Holder))
		}
		fmt.Fprintln(w)
	}
	return opErr("group", url, w.Flush())
}

// lastSeen is how long ago a record was last written, and by whose clock
// when not the store's.
func lastSeen(l *listing) string {
	s := humanAge(time.Duration(l.AgeMillis)*time.Millisecond) + " ago"
	if l.AgeClock != "store" {
		s += " (writer)"
	}
	return s
}

// judgeGroup sets each row's Status and Reason by the rule inspect
// applies: a member is live, left (released) or expired; a shard is free
// (released or expired) or held. One look cannot expire a held record
// without trusting the writer's clock, so a held record whose last write
// is older than its TTL × (1 + drift) is shown stale, not expired: a hint
// that its holder is gone, which --store-clock or a watch can confirm.
func judgeGroup(rows []groupRow, drift float64) {
	stale := func(r *groupRow) bool {
		ttl := time.Duration(r.TTLMillis) * time.Millisecond
		return r.State == string(objlease.StateHeld) && time.Duration(r.AgeMillis)*time.Millisecond > time.Duration(float64(ttl)*(1+drift))
	}
	members := map[string]string{} // holder -> member status
	for i := range rows {
		r := &rows[i]
		if r.Kind != "member" {
			continue
		}
		switch {
		case r.State == string(objlease.StateReleased):
			r.Status, r.Reason = "left", "released"
		case r.State == "expired":
			r.Status, r.Reason = "expired", "expired"
		case stale(r):
			r.Status, r.Reason = "stale", "not renewed within its TTL by the "+clockWord(r.AgeClock)+" clock"
		default:
			r.Status = "live"
		}
		if r.Holder != "" {
			members[r.Holder] = r.Status
		}
	}
	for i := range rows {
		r := &rows[i]
		if r.Kind != "shard" {
			continue
		}
		r.Status = "held"
		switch m := members[r.Holder]; {
		case r.State == string(objlease.StateReleased):
			r.Status, r.Reason = "free", "released"
		case r.State == "expired":
			r.Status, r.Reason = "free", "expired"
		case stale(r):
			r.Reason = "stale"
		case m == "":
			r.Reason = "not a member"
		case m != "live":
			r.Reason = "member " + m
		}
	}
}

// clockWord names the clock a listing's age was measured by.
func clockWord(ageClock string) string {
	if ageClock == "store" {
		return "store's"
	}
	return "writer's"
}
