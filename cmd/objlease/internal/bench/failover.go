package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/objlease/objlease/internal/ctxsleep"
	"github.com/objlease/objlease/objlease"
)

// Expiry rules, as the failover section names them.
const (
	ruleObserved   = "observed"
	ruleStoreClock = "store-clock"
	freshGoal      = 3 // round trips for a fresh process to take over a long-dead lease
)

// failoverReport is the failover section's result.
type failoverReport struct {
	Trials int            `json:"trials"`
	Rules  []failoverRule `json:"rules"`
	Fresh  []freshReport  `json:"fresh"`
}

// failoverRule is the time from a holder's SIGKILL (or, with Ending
// "release", its graceful release) until a waiting contender holds the
// lease, under one expiry rule.
type failoverRule struct {
	Rule    string `json:"rule"`
	Ending  string `json:"ending"` // "kill" or "release"
	Elapsed dist   `json:"kill_to_held"`
	// FromWrite is the time from the holder's last write (when it was
	// sent) until the contender held the lease.
	FromWrite dist `json:"last_write_to_held"`
	// DateLag is how far the store's Date ran behind its Last-Modified
	// (store-clock rule only): the rule waits for the Date, so its goal
	// includes it.
	DateLag dateLag `json:"date_lag"`
	// GoalFrom is what the goal is measured from: "kill", "release" or
	// "last write".
	GoalFrom string  `json:"goal_from"`
	P50TTL   float64 `json:"p50_ttl"`
	P90TTL   float64 `json:"p90_ttl"`
	MaxTTL   float64 `json:"max_ttl"`
	GoalMs   float64 `json:"goal_ms"`
	OverGoal int     `json:"trials_over_goal"`
	// Early counts contenders that held the lease before the holder was
	// killed: an exclusivity failure.
	Early int `json:"early"`
}

// freshReport is a new process taking over a lease whose holder died long
// ago.
type freshReport struct {
	Rule       string  `json:"rule"`
	DeadMs     float64 `json:"dead_for_ms"`
	Trials     int     `json:"trials"`
	MaxTrips   int64   `json:"max_round_trips"`
	ExecToHeld dist    `json:"exec_to_held"`
	Acquire    dist    `json:"acquire"`
	GoalMet    bool    `json:"goal_met"`
}

func (b *bench) failover(ctx context.Context) (*failoverReport, error) {
	r := &failoverReport{Trials: b.trials}
	for _, ending := range []string{endKill, endRelease} {
		for _, rule := range []string{ruleObserved, ruleStoreClock} {
			fr, err := b.failoverTrials(ctx, rule, ending)
			if err != nil {
				return nil, err
			}
			r.Rules = append(r.Rules, *fr)
		}
	}
	fresh, err := b.freshTakeovers(ctx)
	if err != nil {
		return nil, err
	}
	r.Fresh = fresh
	return r, nil
}

// How a failover trial ends the holder's tenure.
const (
	endKill    = "kill"    // SIGKILL, as a crash would
	endRelease = "release" // a graceful release
)

// storeClockMargin is Options.StoreClockMargin's default, which the bench
// uses.
const storeClockMargin = time.Second

// rttAllowance is the round trip the store-clock goal allows for the
// read that takes over.
const rttAllowance = 100 * time.Millisecond

// failoverTrials kills a renewing holder process (or has it release the
// lease) at a random moment while a contender in this process waits in
// Acquire, --trials times. Under the observed rule the goal after a kill
// is TTL + one poll; after a release, one poll (the renewal interval plus
// 1/16 of it once the contender reads on the holder's renewal phase).
// Under the store-clock rule, on a store that reports its time, the
// contender reads when the store's clock could show the last write it saw
// expired, so the goal is TTL + the store's timestamp granularity + the
// margin (1 s) + how far the store's Date runs behind its Last-Modified
// (lag) + a round trip from the holder's last write, and from a release,
// which that read sees.
func (b *bench) failoverTrials(ctx context.Context, rule, ending string) (*failoverRule, error) {
	key := b.key("failover-" + rule + "-" + ending)
	fr := &failoverRule{Rule: rule, Ending: ending}
	// Under the store-clock rule the takeover waits for the store's Date,
	// whose lag behind Last-Modified may walk (see lagMeter): each trial
	// is judged with the larger lag measured just before and just after it.
	var meter *lagMeter
	var lag dateLag
	measureLag := func() (dateLag, error) {
		if meter == nil {
			return dateLag{}, nil
		}
		l, err := meter.lag(ctx)
		fr.DateLag = fr.DateLag.widen(l)
		return l, err
	}
	if rule == ruleStoreClock {
		b.prog.show(true, "failover (%s rule, %s): measuring the store's clocks", rule, ending)
		var err error
		if b.clocks == nil {
			if b.clocks, err = b.newLagMeter(ctx); err != nil {
				return nil, err
			}
		}
		meter = b.clocks
		if lag, err = measureLag(); err != nil {
			return nil, err
		}
	}
	var lags []dateLag // of each trial in elapsed
	var elapsed, fromWrite []time.Duration
	storeTime := false
	type acquired struct {
		l   *objlease.Lease
		err error
		at  time.Time
	}
	for i := range b.trials {
		b.prog.show(i == 0, "failover (%s rule, %s): trial %d of %d", rule, ending, i+1, b.trials)
		h, err := b.startHolder(key) // it releases the lease when its stdin closes
		if err != nil {
			return nil, err
		}
		hr, err := h.ready(ctx)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			a, err := b.cs.Stat(ctx, key)
			if err != nil {
				h.kill()
				return nil, err
			}
			storeTime = !a.StoreTime.IsZero()
		}
		o := b.options(fmt.Sprintf("failover-%s-%d", rule, i))
		if rule == ruleStoreClock {
			o.StoreClock = true
		}
		c, err := b.client(b.cs, key, o)
		if err != nil {
			h.kill()
			return nil, err
		}
		got := make(chan acquired, 1)
		actx, cancel := context.WithTimeout(ctx, 10*b.ttl+time.Minute)
		go func() {
			l, err := c.Acquire(actx)
			got <- acquired{l, err, time.Now()}
		}()
		// Kill at a random point of the renewal cycle, once the contender
		// has had time to learn when the holder renews (a few renewal
		// intervals).
		_ = ctxsleep.For(ctx, 3*b.ttl+time.Duration(rand.Float64()*float64(b.renew)))
		var a acquired
		select {
		case a = <-got:
			if a.err == nil {
				select {
				case <-h.lost:
					b.log.Warn(fmt.Sprintf("bench: the holder process lost its lease on %q before it was killed (its renewals failed)", key))
				case <-time.After(time.Second): // time to say so
					fr.Early++
					b.log.Error(fmt.Sprintf("bench: EXCLUSIVITY VIOLATED: the contender acquired %q while the holder process held it", key))
				}
			}
			h.kill()
		default:
			var ended time.Time
			if ending == endRelease {
				ended = time.Now()
				_ = h.stdin.Close() // the holder releases, then exits
			} else {
				h.kill()
				ended = time.Now()
			}
			a = <-got
			if a.err == nil {
				elapsed = append(elapsed, a.at.Sub(ended))
				if ending == endKill {
					fromWrite = append(fromWrite, a.at.Sub(time.Unix(0, h.lastWrite.Load())))
				}
			}
			if ending == endRelease {
				_ = h.finish()
			}
		}
		cancel()
		if a.err != nil {
			return nil, fmt.Errorf("contender after the holder's kill: %w", a.err)
		}
		if a.l.Token() <= hr.Token {
			fr.Early++
			b.log.Error(fmt.Sprintf("bench: token went back at %q: contender %d after holder %d", key, a.l.Token(), hr.Token))
		}
		if err := a.l.Release(ctx); err != nil && !errors.Is(err, objlease.ErrLeaseLost) {
			return nil, err
		}
		if len(lags) < len(elapsed) {
			after, err := measureLag()
			if err != nil {
				return nil, err
			}
			lags, lag = append(lags, lag.widen(after)), after
		}
	}
	var goalD time.Duration
	goalD, fr.GoalFrom = b.failoverGoal(rule, ending, storeTime)
	fr.GoalMs = ms(goalD)
	fr.Elapsed, fr.FromWrite = summarise(elapsed), summarise(fromWrite)
	ttl := ms(b.ttl)
	fr.P50TTL, fr.P90TTL, fr.MaxTTL = fr.Elapsed.P50/ttl, fr.Elapsed.P90/ttl, fr.Elapsed.Max/ttl
	judged := elapsed
	if fr.GoalFrom == goalFromWrite {
		judged = fromWrite
	}
	for i, e := range judged {
		if e > goalD+lags[i].allowance(rule == ruleStoreClock && storeTime) {
			fr.OverGoal++
		}
	}
	return fr, nil
}

const goalFromWrite = "last write"

// failoverGoal is the goal of a failover trial and what it is measured
// from (see failoverTrials).
func (b *bench) failoverGoal(rule, ending string, storeTime bool) (time.Duration, string) {
	switch {
	case rule == ruleStoreClock && storeTime:
		d := b.ttl + b.props.TimestampGranularity + storeClockMargin + rttAllowance
		if ending == endKill {
			return d, goalFromWrite
		}
		return d, ending
	case ending == endRelease:
		return max(b.poll, b.renew) + b.renew/16, ending
	}
	return b.ttl + b.poll, ending
}

// freshTakeovers kills holder processes, waits until the store's clock
// says their records are long dead, then starts a new process for each
// and counts the round trips it needs: with the store-clock rule, and once
// with the observed rule for comparison.
func (b *bench) freshTakeovers(ctx context.Context) ([]freshReport, error) {
	n := min(b.trials, 5)
	b.prog.show(true, "failover: %d fresh processes taking over long-dead leases", n+1)
	rules := make([]string, n+1)
	for i := range n {
		rules[i] = ruleStoreClock
	}
	rules[n] = ruleObserved
	holders := make([]*holderProc, len(rules))
	defer func() {
		for _, h := range holders {
			if h != nil && h.cmd.ProcessState == nil {
				h.kill()
			}
		}
	}()
	for i := range rules {
		var err error
		if holders[i], err = b.startHolder(b.key(fmt.Sprintf("fresh-%d", i))); err != nil {
			return nil, err
		}
	}
	for _, h := range holders {
		if _, err := h.ready(ctx); err != nil {
			return nil, err
		}
	}
	for _, h := range holders {
		h.kill()
	}
	killed := time.Now()
	// Long dead: past TTL + granularity + margin by the store's clock,
	// with room for a Date header truncated to the granularity too.
	g := b.props.TimestampGranularity
	if err := ctxsleep.For(ctx, b.ttl+2*g+2*time.Second); err != nil {
		return nil, err
	}
	byRule := map[string]*freshReport{}
	var out []freshReport
	samples := map[string][2][]time.Duration{}
	for i, rule := range rules {
		fr := byRule[rule]
		if fr == nil {
			fr = &freshReport{Rule: rule, GoalMet: true}
			byRule[rule] = fr
		}
		var flags []string
		if rule == ruleStoreClock {
			flags = []string{"--store-clock"}
		}
		if fr.DeadMs == 0 {
			fr.DeadMs = ms(time.Since(killed))
		}
		start := time.Now()
		h, err := b.startHolder(b.key(fmt.Sprintf("fresh-%d", i)), append(flags, "--release")...)
		if err != nil {
			return nil, err
		}
		hr, err := h.ready(ctx)
		wall := time.Since(start)
		if err != nil {
			return nil, err
		}
		if err := h.finish(); err != nil {
			// It held the lease, which is what was measured; it says why.
			b.log.Warn("bench: fresh holder process failed after taking the lease", "key", b.key(fmt.Sprintf("fresh-%d", i)), "err", err)
		}
		fr.Trials++
		trips := hr.Reads + hr.Writes
		fr.MaxTrips = max(fr.MaxTrips, trips)
		fr.GoalMet = fr.GoalMet && trips <= freshGoal
		s := samples[rule]
		s[0], s[1] = append(s[0], wall), append(s[1], fromMs(hr.AcquireMs))
		samples[rule] = s
	}
	for _, rule := range []string{ruleStoreClock, ruleObserved} {
		fr := byRule[rule]
		fr.ExecToHeld, fr.Acquire = summarise(samples[rule][0]), summarise(samples[rule][1])
		out = append(out, *fr)
	}
	return out, nil
}

func printFailover(w io.Writer, r *failoverReport) {
	fmt.Fprintf(w, "\nFAILOVER: a holder process is killed with SIGKILL, or releases the lease, while a contender waits in Acquire; time from the kill (release) until the contender holds the lease, and from the holder's last write, %d trials per rule\n", r.Trials)
	for _, f := range r.Rules {
		if l := f.DateLag; l.Known && l.LoMs < -ms(storeClockMargin) {
			fmt.Fprintf(w, "WARNING: the store's Date ran up to %v AHEAD of its Last-Modified, more than the store-clock rule's margin (%v): the rule is not safe on this store.\n",
				-fromMs(l.LoMs).Round(time.Millisecond), storeClockMargin)
		}
		if l := f.DateLag; l.Known {
			fmt.Fprintf(w, "Store-clock, %s: the store's Date ran %v to %v behind its Last-Modified over the trials; the rule waits for the Date, so each trial's goal adds the lag measured just before and after it.\n",
				f.Ending, fromMs(l.LoMs).Round(time.Millisecond), fromMs(l.HiMs).Round(time.Millisecond))
		}
	}
	fmt.Fprintln(w, "RULE\tENDING\tP50\tP90\tMAX\tP50/TTL\tP90/TTL\tMAX/TTL\tLAST WRITE P50\tMAX\tGOAL: OBSERVED KILL <= TTL + POLL, RELEASE <= POLL + R/16; STORE-CLOCK <= TTL + GRANULARITY + MARGIN + DATE LAG + 100ms\t")
	for _, f := range r.Rules {
		fromWrite := "-\t-"
		if f.Ending == endKill {
			fromWrite = fmt.Sprintf("%v\t%v", fromMs(f.FromWrite.P50).Round(time.Millisecond), fromMs(f.FromWrite.Max).Round(time.Millisecond))
		}
		lag := ""
		if f.DateLag.allowance(f.GoalFrom == goalFromWrite || f.Rule == ruleStoreClock) > 0 {
			lag = " + Date lag"
		}
		note := fmt.Sprintf("%v%s from the %s: %s", fromMs(f.GoalMs).Round(time.Millisecond), lag, f.GoalFrom, goal(f.OverGoal == 0))
		if f.OverGoal > 0 {
			note += fmt.Sprintf(" in %d trials", f.OverGoal)
		}
		if f.Early > 0 {
			note += fmt.Sprintf("; EXCLUSIVITY VIOLATED %d times", f.Early)
		}
		fmt.Fprintf(w, "%s\t%s\t%v\t%v\t%v\t%.2f\t%.2f\t%.2f\t%s\t%s\n", f.Rule, f.Ending, fromMs(f.Elapsed.P50).Round(time.Millisecond),
			fromMs(f.Elapsed.P90).Round(time.Millisecond), fromMs(f.Elapsed.Max).Round(time.Millisecond), f.P50TTL, f.P90TTL, f.MaxTTL, fromWrite, note)
	}
	fmt.Fprintln(w, "A FRESH PROCESS takes over a lease whose holder was killed long ago; round trips and time from exec until it holds the lease:")
	fmt.Fprintln(w, "RULE\tDEAD FOR\tTRIALS\tROUND TRIPS\tEXEC TO HELD P50\tMAX\tACQUIRE P50\t")
	for _, f := range r.Fresh {
		note := fmt.Sprintf("goal <= %d: %s", freshGoal, goal(f.GoalMet))
		if f.Rule == ruleObserved {
			note = "for comparison: it must watch the record for TTL × (1 + drift)"
		}
		fmt.Fprintf(w, "%s\t%v\t%d\t%d\t%v\t%v\t%v\t%s\n", f.Rule, fromMs(f.DeadMs).Round(100*time.Millisecond), f.Trials, f.MaxTrips,
			fromMs(f.ExecToHeld.P50).Round(time.Millisecond), fromMs(f.ExecToHeld.Max).Round(time.Millisecond),
			fromMs(f.Acquire.P50).Round(time.Millisecond), note)
	}
}
