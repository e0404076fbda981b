package bench

// The group section: what a shard group (package objlease/shard) sends to
// the store once settled, per hour and per month at each cloud's prices,
// and how long a dead member's shards take to move.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/objlease/objlease/internal/ctxsleep"
	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/shard"
	"github.com/objlease/objlease/providers"
)

// A balanced group is left alone for groupSettleTTLs before it is
// counted, and then for as long as it still reads records, a TTL at a
// time, up to groupMaxSettleTTLs in all: every member reads each other
// member's record the first time it lists it (N × (N − 1) reads when the
// group starts), the scans of balancing read shards, and the first
// periodic shard listing comes 2 to 3 TTLs after the last scan. A settled
// group reads no record; one that still reads after groupMaxSettleTTLs is
// counted all the same, and marked.
const (
	groupSettleTTLs    = 3
	groupMaxSettleTTLs = 30
)

// groupGoalRatio is the goal for a group of 50 members against one of 2
// on as many shards: within 8 times the requests.
const groupGoalRatio = 8.0

// listPage is the page size the shard workers list with (providers.Walk).
const listPage = 1000

// storePrice is one store's list price for the requests a group sends.
type storePrice struct {
	Store string `json:"store"`
	// Writes are the conditional writes (renewals, acquisitions,
	// releases); every one of the three also charges a listing as one of
	// them (S3: PUT, COPY, POST, LIST; GCS: Class A; Azure: "List and
	// Create Container" at the write price). Deletes are free on all
	// three.
	PerThousandWrites float64 `json:"price_per_1000_writes_and_lists"`
	PerThousandReads  float64 `json:"price_per_1000_reads"`
}

// groupPrices are the list prices of docs/scale.md (US regions, as
// published in 2026): S3 Standard, GCS Standard in a regional bucket,
// Azure Blob hot tier LRS ($0.055 and $0.0044 per 10,000).
var groupPrices = []storePrice{
	{"s3", 0.005, 0.0004},
	{"gcs", 0.005, 0.0004},
	{"azure", 0.0055, 0.00044},
}

// groupReport is the group section's result.
type groupReport struct {
	SettleTTLs int          `json:"settle_ttls"` // at least
	MaxSettle  int          `json:"max_settle_ttls"`
	WindowTTLs int          `json:"window_ttls"`
	Prices     []storePrice `json:"prices"`
	Rows       []groupRow   `json:"rows"`
	// Goals compare the 50-member group with the 2-member one on as many
	// shards, where both were measured.
	Goals []groupGoal `json:"goals,omitempty"`
}

// groupRow is one group: N members on M shards.
type groupRow struct {
	Members int `json:"members"`
	Shards  int `json:"shards"`
	// BalancedS is the time from the start of the first member to a balanced
	// group (every member within one of M/N shards, every shard owned);
	// Balanced is false if it never was within the time allowed, and the
	// group was counted anyway.
	BalancedS float64 `json:"balanced_s"`
	Balanced  bool    `json:"balanced"`
	// SettledS is how long the balanced group was left alone before the
	// window: Settled is false if it still read records then.
	SettledS float64 `json:"settled_s"`
	Settled  bool    `json:"settled"`
	// The requests of every member over the window, on the wire: lists
	// (pages), reads (GET, HEAD) and writes (create, replace, delete).
	WindowS float64 `json:"window_s"`
	Lists   int64   `json:"lists"`
	Reads   int64   `json:"reads"`
	Writes  int64   `json:"writes"`
	// Per hour, from the window; FormulaPerH is what the settled group's
	// formula predicts (see groupFormula).
	ListsPerH   float64 `json:"lists_per_hour"`
	ReadsPerH   float64 `json:"reads_per_hour"`
	WritesPerH  float64 `json:"writes_per_hour"`
	PerH        float64 `json:"requests_per_hour"`
	FormulaPerH float64 `json:"formula_requests_per_hour"`
	// DollarsMonth is 730 hours of PerH at each store's prices, by
	// storePrice.Store.
	DollarsMonth map[string]float64 `json:"dollars_per_month"`
	// The kill: one member (the one owning the most shards) is cut off
	// from the store, as a process that died; MovedS is the time from the
	// cut until every shard it owned was owned by another member, or, if
	// Moved is false, until the bench gave up, with MovedShards of
	// KilledShards moved.
	Killed       string  `json:"killed,omitempty"`
	KilledShards int     `json:"killed_shards"`
	MovedShards  int     `json:"moved_shards"`
	MovedS       float64 `json:"moved_s"`
	Moved        bool    `json:"moved"`
}

// groupGoal is the 50-member group's requests over the 2-member group's on
// the same shards.
type groupGoal struct {
	Shards       int     `json:"shards"`
	Ratio        float64 `json:"ratio"`
	FormulaRatio float64 `json:"formula_ratio"`
	Goal         float64 `json:"goal"`
	Met          bool    `json:"met"`
}

// groupFormula is the requests an hour of a settled group of n members on
// m shards, TTL t, renewal interval r and round p: every member renews
// its heartbeat and each shard's owner the shard, (m + n) / r writes; every
// member lists the members every round, n · ⌈n/1000⌉ / p pages, and the
// shards every 2.5 t on average (two to three TTLs at random),
// n · ⌈m/1000⌉ / (2.5 t) pages; no record is read.
func groupFormula(n, m int, t, r, p time.Duration) float64 {
	pages := func(k int) float64 { return float64((k + listPage - 1) / listPage) }
	perS := float64(m+n)/r.Seconds() + float64(n)*pages(n)/p.Seconds() + float64(n)*pages(m)/(2.5*t.Seconds())
	return 3600 * perS
}

// cutStore is one member's path to the store: once cut, every call fails
// without a request, as for a process that died or lost the network.
type cutStore struct {
	providers.Store
	dead atomic.Bool
}

var errCut = fmt.Errorf("cut off from the store by the bench")

func (c *cutStore) Get(ctx context.Context, key string, max int64) (*providers.Object, error) {
	if c.dead.Load() {
		return nil, providers.Wrap("get", key, errCut, nil)
	}
	return c.Store.Get(ctx, key, max)
}

func (c *cutStore) Stat(ctx context.Context, key string) (*providers.Attrs, error) {
	if c.dead.Load() {
		return nil, providers.Wrap("stat", key, errCut, nil)
	}
	return c.Store.Stat(ctx, key)
}

func (c *cutStore) List(ctx context.Context, prefix, page string, n int) (providers.ListPage, error) {
	if c.dead.Load() {
		return providers.ListPage{}, providers.Wrap("list", prefix, errCut, nil)
	}
	return c.Store.List(ctx, prefix, page, n)
}

func (c *cutStore) Create(ctx context.Context, key string, data []byte, md map[string]string) (providers.WriteResult, error) {
	if c.dead.Load() {
		return providers.WriteResult{}, providers.Wrap("create", key, errCut, nil)
	}
	return c.Store.Create(ctx, key, data, md)
}

func (c *cutStore) Replace(ctx context.Context, key string, data []byte, md map[string]string, v string) (providers.WriteResult, error) {
	if c.dead.Load() {
		return providers.WriteResult{}, providers.Wrap("replace", key, errCut, nil)
	}
	return c.Store.Replace(ctx, key, data, md, v)
}

func (c *cutStore) Delete(ctx context.Context, key, v string) error {
	if c.dead.Load() {
		return providers.Wrap("delete", key, errCut, nil)
	}
	return c.Store.Delete(ctx, key, v)
}

// mutable is a log handler that goes quiet once muted: a member cut off
// from the store would otherwise log every failed renewal and listing.
type mutable struct {
	slog.Handler
	muted *atomic.Bool
}

func (h mutable) Enabled(ctx context.Context, l slog.Level) bool {
	return !h.muted.Load() && h.Handler.Enabled(ctx, l)
}

func (h mutable) WithAttrs(as []slog.Attr) slog.Handler {
	return mutable{h.Handler.WithAttrs(as), h.muted}
}

func (h mutable) WithGroup(name string) slog.Handler {
	return mutable{h.Handler.WithGroup(name), h.muted}
}

// group measures a group of every --members count on every --shards
// count, in that order.
func (b *bench) group(ctx context.Context) (*groupReport, error) {
	r := &groupReport{SettleTTLs: groupSettleTTLs, MaxSettle: groupMaxSettleTTLs, WindowTTLs: b.groupTTLs, Prices: groupPrices}
	for _, m := range b.groupShards {
		for _, n := range b.groupMembers {
			row, err := b.groupRun(ctx, n, m)
			if err != nil {
				return nil, fmt.Errorf("%d members on %d shards: %w", n, m, err)
			}
			r.Rows = append(r.Rows, *row)
		}
	}
	for _, m := range b.groupShards {
		i2 := slices.IndexFunc(r.Rows, func(g groupRow) bool { return g.Shards == m && g.Members == 2 })
		i50 := slices.IndexFunc(r.Rows, func(g groupRow) bool { return g.Shards == m && g.Members == 50 })
		if i2 < 0 || i50 < 0 || r.Rows[i2].PerH == 0 {
			continue
		}
		g := groupGoal{Shards: m, Ratio: r.Rows[i50].PerH / r.Rows[i2].PerH, Goal: groupGoalRatio,
			FormulaRatio: r.Rows[i50].FormulaPerH / r.Rows[i2].FormulaPerH}
		g.Met = g.Ratio <= groupGoalRatio
		r.Goals = append(r.Goals, g)
	}
	return r, nil
}

// groupMember is one member of a measured group: its own session and its
// own path to the store.
type groupMember struct {
	w     *shard.Worker
	sess  *objlease.Session
	cut   *cutStore
	cs    *countingStore // nil: it shares the bench's store
	count func() counts
	done  chan struct{}
}

// groupRun starts n members on m shards, each in a session of its own
// with a client of its own for the store (on mem://, which lives in this
// process, they share the bench's), waits until the group is balanced and
// settled, counts its requests over --group-ttls whole TTLs, then cuts
// one member off and times its shards' move.
func (b *bench) groupRun(ctx context.Context, n, m int) (_ *groupRow, err error) {
	row := &groupRow{Members: n, Shards: m}
	prefix := b.key(fmt.Sprintf("group-%dx%d", n, m))
	ids := make([]string, m)
	for i := range ids {
		ids[i] = fmt.Sprintf("s%05d", i)
	}
	gctx, cancel := context.WithCancel(ctx)
	members := make([]*groupMember, 0, n)
	defer func() {
		cancel()
		for _, gm := range members {
			<-gm.done
			_ = gm.sess.Close(context.WithoutCancel(ctx))
			if gm.cs != nil {
				gm.cs.Close()
			}
		}
	}()
	b.prog.show(true, "group: starting %d members on %d shards", n, m)
	start := time.Now()
	for i := range n {
		gm := &groupMember{done: make(chan struct{})}
		var store providers.Store = b.cs
		gm.count = b.cs.counts
		if b.props.Name != "mem" {
			cs, _, err := openCounted(ctx, b.env.Open, b.url)
			if err != nil {
				return nil, err
			}
			gm.cs, store, gm.count = cs, cs, cs.counts
		}
		gm.cut = &cutStore{Store: store}
		log := slog.New(mutable{b.log.Handler(), &gm.cut.dead})
		if gm.sess, err = objlease.NewSession(gm.cut, objlease.SessionOptions{Logger: log, Clock: b.clk}); err != nil {
			return nil, err
		}
		gm.w, err = shard.New(gm.sess, prefix, b.options(""), shard.Config{Member: fmt.Sprintf("m%04d", i), Shards: ids,
			Work: func(ctx context.Context, _ *shard.Shard) { <-ctx.Done() }})
		if err != nil {
			return nil, err
		}
		members = append(members, gm)
		go func() {
			defer close(gm.done)
			_ = gm.w.Run(gctx)
		}()
	}
	counted := func() counts {
		var c counts
		if b.props.Name == "mem" {
			return b.cs.counts()
		}
		for _, gm := range members {
			c = add(c, gm.count())
		}
		return c
	}
	owners := func(skip *groupMember) (map[string]bool, bool) {
		owned, balanced := map[string]bool{}, true
		live := n
		if skip != nil {
			live--
		}
		for _, gm := range members {
			if gm == skip {
				continue
			}
			ids := gm.w.Owned()
			if k := len(ids); k < m/live || k > (m+live-1)/live {
				balanced = false
			}
			for _, id := range ids {
				owned[id] = true
			}
		}
		return owned, balanced && len(owned) == m
	}

	// Balance.
	limit := 5*time.Minute + 20*b.ttl
	for {
		owned, ok := owners(nil)
		if ok {
			row.Balanced = true
			break
		}
		if time.Since(start) > limit {
			break
		}
		b.prog.show(false, "group: %d members on %d shards: %d shards owned after %.0fs", n, m, len(owned), time.Since(start).Seconds())
		if err := ctxsleep.For(ctx, 100*time.Millisecond); err != nil {
			return nil, err
		}
	}
	row.BalancedS = time.Since(start).Seconds()

	// Settle, then count over whole TTLs.
	b.prog.show(true, "group: %d members on %d shards: balanced after %.1fs; settling for %d TTLs or more, then counting for %d",
		n, m, row.BalancedS, groupSettleTTLs, b.groupTTLs)
	settling := time.Now()
	if err := ctxsleep.For(ctx, (groupSettleTTLs-1)*b.ttl); err != nil {
		return nil, err
	}
	for k := groupSettleTTLs; ; k++ {
		before := counted()
		if err := ctxsleep.For(ctx, b.ttl); err != nil {
			return nil, err
		}
		d := counted().sub(before)
		if d[opGet]+d[opStat] == 0 {
			row.Settled = true
			break
		}
		if k >= groupMaxSettleTTLs {
			break
		}
		b.prog.show(false, "group: %d members on %d shards: still settling: %d reads in the last TTL", n, m, d[opGet]+d[opStat])
	}
	row.SettledS = time.Since(settling).Seconds()
	c0, t0 := counted(), time.Now()
	if err := ctxsleep.For(ctx, time.Duration(b.groupTTLs)*b.ttl); err != nil {
		return nil, err
	}
	c1, t1 := counted(), time.Now()
	used := c1.sub(c0)
	row.WindowS = t1.Sub(t0).Seconds()
	row.Lists, row.Reads = used[opList], used[opGet]+used[opStat]
	row.Writes = used[opCreate] + used[opReplace] + used[opDelete]
	perH := func(k int64) float64 { return float64(k) * 3600 / row.WindowS }
	row.ListsPerH, row.ReadsPerH, row.WritesPerH = perH(row.Lists), perH(row.Reads), perH(row.Writes)
	row.PerH = row.ListsPerH + row.ReadsPerH + row.WritesPerH
	row.FormulaPerH = groupFormula(n, m, b.ttl, b.renew, b.poll)
	paid := perH(row.Lists + used[opCreate] + used[opReplace]) // deletes are free
	row.DollarsMonth = map[string]float64{}
	for _, p := range groupPrices {
		row.DollarsMonth[p.Store] = hoursPerMonth * (paid*p.PerThousandWrites + row.ReadsPerH*p.PerThousandReads) / 1000
	}

	// Kill the member owning the most shards.
	var victim *groupMember
	var lost []string
	for _, gm := range members {
		if ids := gm.w.Owned(); victim == nil || len(ids) > len(lost) {
			victim, lost = gm, ids
		}
	}
	row.Killed, row.KilledShards = victim.w.Member(), len(lost)
	b.prog.show(true, "group: %d members on %d shards: %s cut off with %d shards", n, m, row.Killed, len(lost))
	victim.cut.dead.Store(true)
	cutAt := time.Now()
	giveUp := 10*b.ttl + time.Minute
	for {
		owned, _ := owners(victim)
		row.MovedShards = 0
		for _, id := range lost {
			if owned[id] {
				row.MovedShards++
			}
		}
		row.MovedS = time.Since(cutAt).Seconds()
		if row.MovedShards == len(lost) {
			row.Moved = true
			break
		}
		if time.Since(cutAt) > giveUp {
			break
		}
		b.prog.show(false, "group: %d members on %d shards: %d of %d shards moved after %.1fs", n, m, row.MovedShards, len(lost), row.MovedS)
		if err := ctxsleep.For(ctx, 10*time.Millisecond); err != nil {
			return nil, err
		}
	}
	b.prog.show(true, "group: %d members on %d shards: leaving", n, m)
	return row, nil
}

func printGroup(w io.Writer, r *groupReport, ttl, renew, poll time.Duration) {
	fmt.Fprintf(w, "\nGROUP: N members (a session and a store client each) on M shards, TTL %v, renewals every %v, a round every %v; once balanced, left alone until a whole TTL passes without a read (%d to %d TTLs), then counted over %d whole TTLs (%v); then the member owning the most shards is cut off from the store\n",
		ttl, renew.Round(time.Millisecond), poll.Round(time.Millisecond), r.SettleTTLs, r.MaxSettle, r.WindowTTLs, time.Duration(r.WindowTTLs)*ttl)
	fmt.Fprint(w, "SHARDS\tMEMBERS\tBALANCED AFTER\tSETTLED AFTER\tWINDOW\tLISTS/H\tREADS/H\tWRITES/H\tREQ/H\tFORMULA REQ/H\t")
	for _, p := range r.Prices {
		fmt.Fprintf(w, "$/MONTH %s\t", strings.ToUpper(p.Store))
	}
	fmt.Fprintln(w, "KILLED: SHARDS MOVED AFTER\tTTLS\t")
	for _, g := range r.Rows {
		bal := fmt.Sprintf("%.1fs", g.BalancedS)
		if !g.Balanced {
			bal = fmt.Sprintf("never (%.0fs)", g.BalancedS)
		}
		settled := fmt.Sprintf("%.0fs", g.SettledS)
		if !g.Settled {
			settled = fmt.Sprintf("never (%.0fs)", g.SettledS)
		}
		fmt.Fprintf(w, "%d\t%d\t%s\t%s\t%.1fs\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t", g.Shards, g.Members, bal, settled, g.WindowS,
			g.ListsPerH, g.ReadsPerH, g.WritesPerH, g.PerH, g.FormulaPerH)
		for _, p := range r.Prices {
			fmt.Fprintf(w, "%.2f\t", g.DollarsMonth[p.Store])
		}
		moved := fmt.Sprintf("%d: %.2fs", g.KilledShards, g.MovedS)
		if !g.Moved {
			moved = fmt.Sprintf("%d: only %d moved in %.0fs", g.KilledShards, g.MovedShards, g.MovedS)
		}
		fmt.Fprintf(w, "%s\t%.2f\t\n", moved, g.MovedS/ttl.Seconds())
	}
	fmt.Fprintf(w, "formula: 3600 × ((M + N)/R renewals + N·⌈N/%d⌉/P member listings + N·⌈M/%d⌉/(2.5 TTL) shard listings) an hour, no reads\n", listPage, listPage)
	fmt.Fprint(w, "prices per 1,000 writes and lists / reads:")
	for _, p := range r.Prices {
		fmt.Fprintf(w, " %s $%g / $%g;", p.Store, p.PerThousandWrites, p.PerThousandReads)
	}
	fmt.Fprintf(w, " %d hours a month\n", hoursPerMonth)
	for _, g := range r.Goals {
		fmt.Fprintf(w, "50 members over 2 on %d shards: %.2f× (formula %.2f×)\tgoal <= %g×: %s\n", g.Shards, g.Ratio, g.FormulaRatio, g.Goal, goal(g.Met))
	}
}
