package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/objlease/objlease/internal/ctxsleep"
	"github.com/objlease/objlease/objlease"
)

// hoursPerMonth is the hours in an average month (8,760 / 12), as cloud
// price lists count them.
const hoursPerMonth = 730

// client-go's leader election, as kubernetes/client-go
// tools/leaderelection/leaderelection.go implements it: core clients use
// LeaseDuration 15s, RenewDeadline 10s, RetryPeriod 2s. The leader calls
// tryAcquireOrRenew every RetryPeriod: a GET then an UPDATE (newer
// releases first try the UPDATE alone, the "fast path"). A follower calls
// it through wait.JitterUntil with JitterFactor 1.2, every RetryPeriod ×
// [1, 2.2): on average 1.6 × RetryPeriod, one GET each time. At another
// lease duration the three are scaled together.
const (
	clientGoRetryShare = 2.0 / 15 // RetryPeriod / LeaseDuration
	clientGoJitterMean = 1.6
	costGoalRatio      = 0.5
)

// costReport is the cost section's result.
type costReport struct {
	PricePer1000Writes float64   `json:"price_per_1000_writes"`
	PricePer1000Reads  float64   `json:"price_per_1000_reads"`
	WritesPerRenewal   float64   `json:"writes_per_renewal"`
	ReadsPerRenewal    float64   `json:"reads_per_renewal"`
	ReadsPerPoll       float64   `json:"reads_per_poll"`
	WritesPerPoll      float64   `json:"writes_per_poll"`
	Rows               []costRow `json:"rows"`
	// Waiting is what a contender waiting in Acquire, next to a live
	// holder, was measured to send under each expiry rule.
	Waiting []waitRow `json:"waiting"`
}

// waitRow is one waiting contender's measured requests at --ttl.
type waitRow struct {
	Rule string `json:"rule"`
	// Seconds is the window the requests were counted over, TTLs the same
	// in TTLs (whole ones unless the holder was lost), FromSeconds how long
	// after the contender started it opened.
	Seconds      float64 `json:"seconds"`
	TTLs         float64 `json:"ttls"`
	FromSeconds  float64 `json:"from_seconds"`
	Requests     int64   `json:"requests"`
	PerTTL       float64 `json:"requests_per_ttl"`
	PerHour      float64 `json:"requests_per_hour"`
	ClientGoPerH float64 `json:"client_go_requests_per_hour"`
	Ratio        float64 `json:"ratio"`
	// Goal is what GoalMet judges: half client-go's requests, or, for the
	// store-clock rule on a store that reports its time, one read per TTL.
	Goal    string `json:"goal"`
	GoalMet bool   `json:"goal_met"`
	// HolderLost: the holder lost its lease (no renewal got through in
	// time) and this contender took it, ending its wait early.
	HolderLost bool `json:"holder_lost,omitempty"`
}

// costRow is what one participant costs per hour at one TTL, next to its
// counterpart in client-go's leader election.
type costRow struct {
	TTLMs        float64 `json:"ttl_ms"`
	Who          string  `json:"who"` // "holder" or "contender" (one waiting contender)
	IntervalMs   float64 `json:"interval_ms"`
	WritesPerH   float64 `json:"writes_per_hour"`
	ReadsPerH    float64 `json:"reads_per_hour"`
	DollarsMonth float64 `json:"dollars_per_month"`
	// client-go at LeaseDuration = TTL: GET + UPDATE per RetryPeriod for the
	// leader, and with the fast path UPDATE alone.
	ClientGoPerH     float64 `json:"client_go_requests_per_hour"`
	ClientGoFastPerH float64 `json:"client_go_fast_path_requests_per_hour"`
	Ratio            float64 `json:"ratio"`
	RatioFast        float64 `json:"ratio_fast_path"`
	GoalMet          bool    `json:"goal_met"`
}

// cost measures the requests a renewal and a poll cost, then derives the
// requests and dollars per lease-hour at --ttl and at the default TTL.
func (b *bench) cost(ctx context.Context) (*costReport, error) {
	b.prog.show(true, "cost: counting the requests of renewals and polls")
	const n = 3
	pace := newPacer(b.props.MinWriteInterval)
	key := b.key("cost")
	// A long TTL keeps background renewal from adding to the counts (and
	// from racing the explicit renewals); it does not change what one costs.
	o := b.options("cost-holder")
	o.TTL, o.RenewInterval, o.PollInterval = 10*time.Minute, 0, 0
	holder, err := b.client(b.cs, key, o)
	if err != nil {
		return nil, err
	}
	o.Holder = "objlease-bench/cost-follower"
	follower, err := b.client(b.cs, key, o)
	if err != nil {
		return nil, err
	}
	_ = pace.wait(ctx, key)
	l, err := holder.TryAcquire(ctx)
	if err != nil {
		return nil, err
	}
	defer l.Release(context.WithoutCancel(ctx))
	// The follower's first look is not a steady poll (it tries to create
	// the record first); count the ones after it.
	if _, err := follower.TryAcquire(ctx); !isHeld(err) {
		return nil, fmt.Errorf("a follower's first poll of %q: %v, want held", key, err)
	}
	before := b.cs.counts()
	for range n {
		if _, err := follower.TryAcquire(ctx); !isHeld(err) {
			return nil, fmt.Errorf("a follower's poll of %q: %v, want held", key, err)
		}
	}
	polls := b.cs.counts().sub(before)
	var renewals counts
	for range n {
		if err := pace.wait(ctx, key); err != nil {
			return nil, err
		}
		before := b.cs.counts()
		if err := l.Renew(ctx); err != nil {
			return nil, fmt.Errorf("renewal of %q: %w", key, err)
		}
		renewals = add(renewals, b.cs.counts().sub(before))
	}
	r := &costReport{
		PricePer1000Writes: b.priceW, PricePer1000Reads: b.priceR,
		WritesPerRenewal: float64(renewals.writes()) / n, ReadsPerRenewal: float64(renewals.reads()) / n,
		WritesPerPoll: float64(polls.writes()) / n, ReadsPerPoll: float64(polls.reads()) / n,
	}
	ttls := []time.Duration{b.ttl}
	if b.ttl != objlease.DefaultTTL {
		ttls = append(ttls, objlease.DefaultTTL)
	}
	slices.Sort(ttls)
	for _, ttl := range ttls {
		renew := max(ttl/3, b.props.MinWriteInterval)
		poll := renew
		if ttl == b.ttl {
			renew, poll = b.renew, b.poll
		}
		retry := float64(ttl) * clientGoRetryShare
		perH := func(every float64) float64 { return float64(time.Hour) / every }
		holderRow := r.row(ttl, "holder", renew, r.WritesPerRenewal, r.ReadsPerRenewal)
		holderRow.ClientGoPerH = 2 * perH(retry)
		holderRow.ClientGoFastPerH = perH(retry)
		contender := r.row(ttl, "contender", poll, r.WritesPerPoll, r.ReadsPerPoll)
		contender.ClientGoPerH = perH(clientGoJitterMean * retry)
		contender.ClientGoFastPerH = contender.ClientGoPerH
		for _, row := range []*costRow{&holderRow, &contender} {
			own := row.WritesPerH + row.ReadsPerH
			row.Ratio, row.RatioFast = own/row.ClientGoPerH, own/row.ClientGoFastPerH
			row.GoalMet = max(row.Ratio, row.RatioFast) <= costGoalRatio
			r.Rows = append(r.Rows, *row)
		}
	}
	if r.Waiting, err = b.waiting(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// waitTTLs is how many whole TTLs the waiting contenders are counted
// over. A contender that reads once per TTL, whatever its phase, reads
// exactly waitTTLs times in a window of that many whole TTLs.
const waitTTLs = 10

// waiting lets a holder renew in the background while one contender per
// expiry rule waits in Acquire, and counts each contender's requests over
// a window of waitTTLs whole TTLs that opens one TTL after the contenders
// started: their first attempt (a create, refused, and a read) and the
// wait it sets off are left out, and no read of the steady state falls
// outside the window for want of time to make it.
func (b *bench) waiting(ctx context.Context) ([]waitRow, error) {
	key := b.key("cost-waiting")
	holder, err := b.client(b.cs, key, b.options("cost-waiting-holder"))
	if err != nil {
		return nil, err
	}
	l, err := holder.TryAcquire(ctx)
	if err != nil {
		return nil, err
	}
	defer l.Release(context.WithoutCancel(ctx))
	a, err := b.cs.Stat(ctx, key)
	if err != nil {
		return nil, err
	}
	storeTime := !a.StoreTime.IsZero()
	rules := []string{ruleObserved, ruleStoreClock}
	stores := make([]*countingStore, len(rules))
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		at   time.Time
		n    counts // the contender's requests when Acquire returned
		took bool   // the holder lost its lease and this contender took it
		err  error
	}
	results := make([]chan result, len(rules))
	start := time.Now()
	for i, rule := range rules {
		stores[i] = &countingStore{Store: b.cs}
		o := b.options("cost-waiting-" + rule)
		if rule == ruleStoreClock {
			o.StoreClock = true
		}
		c, err := b.client(stores[i], key, o)
		if err != nil {
			return nil, err
		}
		results[i] = make(chan result, 1)
		go func() {
			l2, err := c.Acquire(wctx)
			r := result{at: time.Now(), n: stores[i].counts()}
			switch {
			case err == nil:
				r.took = true
				_ = l2.Release(context.WithoutCancel(ctx))
			case wctx.Err() == nil:
				r.err = err
			}
			results[i] <- r
		}()
	}
	// The window: [open, shut), snapshots of every contender's counts at
	// each end.
	open, shut := start.Add(b.ttl), start.Add((1+waitTTLs)*b.ttl)
	snap := func() []counts {
		cs := make([]counts, len(stores))
		for i, s := range stores {
			cs[i] = s.counts()
		}
		return cs
	}
	var atOpen, atShut []counts
	if err := ctxsleep.For(ctx, time.Until(open)); err == nil {
		atOpen = snap()
		if err := ctxsleep.For(ctx, time.Until(shut)); err == nil {
			atShut = snap()
		}
	}
	cancel()
	if atShut == nil {
		return nil, context.Cause(ctx)
	}
	var rs []result
	for i := range rules {
		r := <-results[i]
		if r.err != nil {
			return nil, r.err
		}
		rs = append(rs, r)
	}
	retry := float64(b.ttl) * clientGoRetryShare
	clientGo := float64(time.Hour) / (clientGoJitterMean * retry)
	var rows []waitRow
	for i, rule := range rules {
		n, end := atShut[i], shut
		if rs[i].took && rs[i].at.Before(shut) {
			// The window ends where the wait did.
			n, end = rs[i].n, rs[i].at
		}
		secs := max(end.Sub(open).Seconds(), 0)
		req := max(n.total()-atOpen[i].total(), 0)
		row := waitRow{Rule: rule, Seconds: secs, TTLs: secs / b.ttl.Seconds(), FromSeconds: b.ttl.Seconds(),
			Requests: req, ClientGoPerH: clientGo, HolderLost: rs[i].took}
		if secs > 0 {
			row.PerTTL, row.PerHour = float64(req)/row.TTLs, float64(req)*3600/secs
		}
		row.Ratio = row.PerHour / clientGo
		row.Goal, row.GoalMet = fmt.Sprintf("ratio <= %.1f", costGoalRatio), row.Ratio <= costGoalRatio
		if rule == ruleStoreClock && storeTime {
			row.Goal, row.GoalMet = "per TTL <= 1", row.PerTTL <= 1
		}
		rows = append(rows, row)
	}
	return rows, nil
}

func (r *costReport) row(ttl time.Duration, who string, every time.Duration, writes, reads float64) costRow {
	n := float64(time.Hour) / float64(every)
	row := costRow{TTLMs: ms(ttl), Who: who, IntervalMs: ms(every), WritesPerH: n * writes, ReadsPerH: n * reads}
	row.DollarsMonth = hoursPerMonth * (row.WritesPerH*r.PricePer1000Writes + row.ReadsPerH*r.PricePer1000Reads) / 1000
	return row
}

func add(a, b counts) counts {
	for i := range a {
		a[i] += b[i]
	}
	return a
}

func isHeld(err error) bool { return errors.Is(err, objlease.ErrHeld) }

func printCost(w io.Writer, r *costReport) {
	fmt.Fprintf(w, "\nCOST: measured: a renewal %.2g writes + %.2g reads, a poll %.2g reads + %.2g writes; $%g per 1,000 writes, $%g per 1,000 reads, %d hours a month\n",
		r.WritesPerRenewal, r.ReadsPerRenewal, r.ReadsPerPoll, r.WritesPerPoll, r.PricePer1000Writes, r.PricePer1000Reads, hoursPerMonth)
	fmt.Fprintln(w, "TTL\tWHO\tEVERY\tWRITES/H\tREADS/H\t$/MONTH\tCLIENT-GO REQ/H\tRATIO\t(FAST PATH)\t")
	for _, c := range r.Rows {
		fmt.Fprintf(w, "%v\t%s\t%v\t%.0f\t%.0f\t%.2f\t%.0f\t%.2f\t(%.2f)\tgoal <= %.1f: %s\n",
			fromMs(c.TTLMs), c.Who, fromMs(c.IntervalMs).Round(time.Millisecond), c.WritesPerH, c.ReadsPerH, c.DollarsMonth,
			c.ClientGoPerH, c.Ratio, c.RatioFast, costGoalRatio, goal(c.GoalMet))
	}
	fmt.Fprintln(w, "client-go at LeaseDuration = TTL, RetryPeriod = 2/15 TTL: leader GET + UPDATE each RetryPeriod (fast path: UPDATE), follower GET each 1.6 RetryPeriod on average")
	if len(r.Waiting) > 0 {
		c := r.Waiting[0]
		fmt.Fprintf(w, "WAITING: one contender per expiry rule in Acquire beside a renewing holder; requests counted over %gs (%.0f TTLs), from %gs after it started\n", c.Seconds, c.TTLs, c.FromSeconds)
		fmt.Fprintln(w, "RULE\tREQUESTS\tPER TTL\tREQ/H\tCLIENT-GO REQ/H\tRATIO\t")
		for _, c := range r.Waiting {
			note := ""
			if c.HolderLost {
				note = fmt.Sprintf(" (the holder lost its lease; took it %.1fs into the window)", c.Seconds)
			}
			fmt.Fprintf(w, "%s\t%d\t%.2f\t%.0f\t%.0f\t%.2f\tgoal %s: %s%s\n", c.Rule, c.Requests, c.PerTTL, c.PerHour, c.ClientGoPerH, c.Ratio, c.Goal, goal(c.GoalMet), note)
		}
	}
}
