// Package bench measures leases on a real store: latency next to a raw
// conditional PUT, requests and cost per lease-hour, contention, failover
// after a holder process is killed, many leases in one process, and advice
// on TTL and renew interval.
// The objlease command's bench subcommand is a thin wrapper around Flags.
package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/providers"
)

// Detail is the bench command's help text.
const Detail = `Measures leases on the store PREFIX-URL names, in the spirit of "etcdctl check
perf": progress on stderr while it runs, a summary table on stdout at the end.

Everything it writes goes under a scratch prefix of its own,
PREFIX + "objlease-bench-RANDOM/", and is deleted before it exits (also
when interrupted); no other key is written. It first lists and reads the
objects under PREFIX and refuses to run next to lease records unless
--force is given.

Sections, in the order they run (--only picks some, comma-separated):
  latency     p50/p90/p99 of acquire, renew, fenced put and release, each
              measured in alternation with a raw conditional PUT of the
              same size (the floor: one round trip), with requests per op
  cost        requests and dollars per lease-hour and month, next to
              client-go's leader election at the same lease duration;
              then one contender per expiry rule waits in Acquire beside
              a renewing holder: its requests, counted over 10 whole
              TTLs from one TTL after it started (the window is printed)
  contention  --contenders clients on one lease for --duration each:
              checks that no two ever hold it at once, the request rate
              and how acquisitions were shared
  failover    a holder process killed with SIGKILL while a contender
              waits: time until the contender holds the lease, --trials
              times per expiry rule; then fresh processes taking over
              long-dead leases: round trips and time
  many        --leases leases held by this one process for --duration:
              renewals a second, leases lost, the shortest gap between
              two writes of one record, memory and CPU; then as many
              contenders waiting through AcquireFunc: reads a second,
              memory and CPU
  group       runs only when --only names it: for each --members count
              on each --shards count, a shard group (objlease/shard) of
              that many members, a session and a store client each;
              once balanced and settled (a whole TTL without a read),
              its requests over --group-ttls whole TTLs, per hour and
              per month at S3, GCS and Azure prices, next to the
              formula; then the member
              owning the most shards is cut off from the store: the time
              until its shards are all owned again. With 2 and 50
              members measured, their ratio against the goal (<= 8x)
  advice      a TTL and renew interval for this store, from the renewal
              latency tail and the store's write-rate limit

"objlease bench -h" lists every flag. Exits 0 when the bench ran (a goal it
missed is marked in the table), 1 if two holders ever held the lease at once,
64 on a usage error or a prefix holding leases, 69 if the store failed.`

// Sections are the bench's parts, in the order they run.
var Sections = []string{"latency", "cost", "contention", "failover", "many", "group", "advice"}

// defaultSections are the sections run without --only: all but group,
// whose groups send far more requests than the rest together.
var defaultSections = slices.DeleteFunc(slices.Clone(Sections), func(s string) bool { return s == "group" })

// maxScan bounds how many objects under the prefix are read to look for
// lease records before the bench starts.
const maxScan = 1000

// bench is one run of the bench command.
type bench struct {
	env     Env
	log     *slog.Logger
	url     string
	store   providers.Store // as opened
	cs      *countingStore  // the same store, counted
	props   providers.Properties
	prefix  string // the URL's key prefix
	scratch string // prefix + "objlease-bench-RANDOM/"
	prog    *progress
	clocks  *lagMeter   // the store's clocks, placed by the first store-clock failover
	clk     clock.Clock // the leases' clock; nil: clock.Real()

	only       map[string]bool
	samples    int
	ttl        time.Duration
	renew      time.Duration
	poll       time.Duration
	drift      float64
	contenders []int
	duration   time.Duration
	trials     int
	leases     int
	// The group section: member and shard counts, window in TTLs.
	groupMembers []int
	groupShards  []int
	groupTTLs    int
	priceW       float64
	priceR       float64
}

// benchReport is everything the bench measured; -o json prints it.
type benchReport struct {
	URL        string             `json:"url"`
	Store      string             `json:"store"`
	Scratch    string             `json:"scratch_prefix"`
	TTLMs      float64            `json:"ttl_ms"`
	RenewMs    float64            `json:"renew_interval_ms"`
	PollMs     float64            `json:"poll_interval_ms"`
	Drift      float64            `json:"drift"`
	Latency    *latencyReport     `json:"latency,omitempty"`
	Cost       *costReport        `json:"cost,omitempty"`
	Contention []contentionReport `json:"contention,omitempty"`
	Failover   *failoverReport    `json:"failover,omitempty"`
	Many       *manyReport        `json:"many,omitempty"`
	Group      *groupReport       `json:"group,omitempty"`
	Advice     *adviceReport      `json:"advice,omitempty"`
}

// Env is what the bench needs from the program that calls it.
type Env struct {
	Stdout, Stderr io.Writer
	Log            *slog.Logger
	// Open opens the store a URL names, as opts ask, and returns its key
	// prefix.
	Open func(ctx context.Context, rawURL string, opts providers.OpenOptions) (providers.Store, string, error)
	// Holder is the command line (program first), without flags and URL,
	// that starts a process running Holder; the failover section kills it.
	Holder []string
}

// Errors Run returns besides the store's.
var (
	// ErrUsage: a flag or the prefix is not acceptable.
	ErrUsage = errors.New("bench usage")
	// ErrViolation: two holders held a lease at once.
	ErrViolation = errors.New("exclusivity violated")
)

func usagef(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUsage, fmt.Sprintf(format, args...))
}

// Flags registers bench's flags on fs and returns the function that runs
// the bench with them once fs is parsed.
func Flags(fs *flag.FlagSet) func(ctx context.Context, env Env, url string) error {
	b := &bench{}
	var only, contenders, members, shards, output string
	var force bool
	fs.StringVar(&output, "o", "text", "output `format`: text or json")
	fs.BoolVar(&force, "force", false, "run even if the prefix already holds lease records (bench still writes only under its scratch prefix)")
	fs.StringVar(&only, "only", strings.Join(defaultSections, ","), "comma-separated `sections` to run, of "+strings.Join(Sections, ", "))
	fs.IntVar(&b.samples, "samples", 200, "latency samples per operation")
	fs.DurationVar(&b.ttl, "ttl", 2*time.Second, "lease TTL for cost, contention, failover and group; unset, 2s or 3 × the store's minimum write interval if longer (GCS: 3s)")
	fs.DurationVar(&b.poll, "poll", 0, "how often a waiting contender polls (default TTL/3, the renew interval)")
	fs.Float64Var(&b.drift, "drift", objlease.DefaultDriftBound, "bound on the rate error of any participant's clock (0.01 = 1%)")
	fs.StringVar(&contenders, "contenders", "1,10,100", "comma-separated contender `counts` for the contention section")
	fs.DurationVar(&b.duration, "duration", 10*time.Second, "how long each contention run, and each half of the many section, lasts")
	fs.IntVar(&b.leases, "leases", 1000, "leases held, then contenders waiting, in the many section")
	fs.IntVar(&b.trials, "trials", 30, "failover trials per expiry rule")
	fs.StringVar(&members, "members", "2,50", "comma-separated member `counts` for the group section")
	fs.StringVar(&shards, "shards", "10", "comma-separated shard `counts` for the group section")
	fs.IntVar(&b.groupTTLs, "group-ttls", 5, "the group section counts requests over this many whole TTLs")
	fs.Float64Var(&b.priceW, "price-per-1000-writes", 0.005, "price in dollars of 1,000 writes (S3 Standard PUT, us-east-1)")
	fs.Float64Var(&b.priceR, "price-per-1000-reads", 0.0004, "price in dollars of 1,000 reads (S3 Standard GET, us-east-1)")
	return func(ctx context.Context, env Env, url string) error {
		if output != "text" && output != "json" {
			return usagef("-o %q: want text or json", output)
		}
		ttlSet := false
		fs.Visit(func(fl *flag.Flag) { ttlSet = ttlSet || fl.Name == "ttl" })
		b.env, b.log, b.url = env, env.Log, url
		return b.main(ctx, only, contenders, members, shards, output == "json", force, ttlSet)
	}
}

func (b *bench) main(ctx context.Context, only, contenders, members, shards string, asJSON, force, ttlSet bool) error {
	if err := b.parse(only, contenders, members, shards); err != nil {
		return err
	}
	cs, prefix, err := openCounted(ctx, b.env.Open, b.url)
	if err != nil {
		return err
	}
	store := cs.Store
	defer store.Close()
	b.store, b.prefix, b.props = store, prefix, store.Properties()
	if b.only["failover"] && b.props.Name == "mem" {
		return usagef("the failover section needs a store other processes can reach, and mem:// lives in this process; use --only without failover")
	}
	b.cs = cs
	if !ttlSet {
		b.ttl = max(b.ttl, 3*b.props.MinWriteInterval)
	}
	b.renew = b.ttl / 3
	if b.poll == 0 {
		b.poll = b.renew
	}
	// New validates the timings against each other and the store.
	if _, err := b.client(store, "objlease-bench", b.options("check")); err != nil {
		return fmt.Errorf("--ttl %v and --poll %v do not suit store %s: %w", b.ttl, b.poll, b.props.Name, err)
	}
	if !force {
		if err := b.refuseLeases(ctx); err != nil {
			return err
		}
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:]) // never fails
	b.scratch = prefix + "objlease-bench-" + hex.EncodeToString(rnd[:]) + "/"
	b.prog = newProgress(b.env.Stderr)

	rep, err := b.run(ctx)
	b.prog.clear()
	cerr := b.cleanup()
	if cerr != nil {
		b.log.Error("bench: scratch objects left behind", slog.Any("err", cerr))
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if err != nil {
		return err
	}
	if asJSON {
		err = json.NewEncoder(b.env.Stdout).Encode(rep)
	} else {
		err = b.printText(rep)
	}
	if err != nil {
		return err
	}
	if n := rep.violations(); n > 0 {
		return fmt.Errorf("%w: two holders held the lease at once %d times", ErrViolation, n)
	}
	return cerr // the results are printed: what was measured stands
}

// countList parses a comma-separated list of positive counts.
func countList(flag, list string) ([]int, error) {
	var ns []int
	for s := range strings.SplitSeq(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return nil, usagef("%s: %q is not a positive count", flag, s)
		}
		ns = append(ns, n)
	}
	return ns, nil
}

// parse checks the flag values bench takes beyond the common ones.
func (b *bench) parse(only, contenders, members, shards string) error {
	bad := usagef
	b.only = map[string]bool{}
	for s := range strings.SplitSeq(only, ",") {
		if s = strings.TrimSpace(s); !slices.Contains(Sections, s) {
			return bad("--only: unknown section %q (want some of %s)", s, strings.Join(Sections, ", "))
		}
		b.only[s] = true
	}
	var err error
	if b.contenders, err = countList("--contenders", contenders); err != nil {
		return err
	}
	if b.groupMembers, err = countList("--members", members); err != nil {
		return err
	}
	if b.groupShards, err = countList("--shards", shards); err != nil {
		return err
	}
	switch {
	case b.samples < 1:
		return bad("--samples %d must be at least 1", b.samples)
	case b.trials < 1:
		return bad("--trials %d must be at least 1", b.trials)
	case b.leases < 1:
		return bad("--leases %d must be at least 1", b.leases)
	case b.groupTTLs < 1:
		return bad("--group-ttls %d must be at least 1", b.groupTTLs)
	case b.duration <= 0:
		return bad("--duration %v must be positive", b.duration)
	case b.poll < 0:
		return bad("--poll %v must not be negative", b.poll)
	case b.priceW < 0 || b.priceR < 0:
		return bad("prices must not be negative")
	}
	return nil
}

// options are the lease options of a bench client named who.
func (b *bench) options(who string) objlease.Options {
	return objlease.Options{TTL: b.ttl, RenewInterval: b.renew, PollInterval: b.poll, DriftBound: b.drift,
		Holder: "objlease-bench/" + who}
}

// client returns a client for key in store, on a session of its own with
// the bench's clock and logger.
func (b *bench) client(store providers.Store, key string, o objlease.Options) (*objlease.Client, error) {
	sess, err := objlease.NewSession(store, objlease.SessionOptions{Clock: b.clk, Logger: b.log})
	if err != nil {
		return nil, err
	}
	return sess.Client(key, o)
}

// key is a key in the scratch prefix.
func (b *bench) key(name string) string { return b.scratch + name }

func (b *bench) run(ctx context.Context) (*benchReport, error) {
	rep := &benchReport{URL: b.url, Store: b.props.Name, Scratch: b.scratch, TTLMs: ms(b.ttl),
		RenewMs: ms(b.renew), PollMs: ms(b.poll), Drift: b.drift}
	var err error
	if b.only["latency"] || b.only["advice"] {
		if rep.Latency, err = b.latency(ctx); err != nil {
			return nil, fmt.Errorf("latency: %w", err)
		}
	}
	if b.only["cost"] {
		if rep.Cost, err = b.cost(ctx); err != nil {
			return nil, fmt.Errorf("cost: %w", err)
		}
	}
	if b.only["contention"] {
		for _, n := range b.contenders {
			r, err := b.contention(ctx, n)
			if err != nil {
				return nil, fmt.Errorf("contention with %d: %w", n, err)
			}
			rep.Contention = append(rep.Contention, *r)
		}
	}
	if b.only["failover"] {
		if rep.Failover, err = b.failover(ctx); err != nil {
			return nil, fmt.Errorf("failover: %w", err)
		}
	}
	if b.only["many"] {
		if rep.Many, err = b.many(ctx); err != nil {
			return nil, fmt.Errorf("many: %w", err)
		}
	}
	if b.only["group"] {
		if rep.Group, err = b.group(ctx); err != nil {
			return nil, fmt.Errorf("group: %w", err)
		}
	}
	if b.only["advice"] {
		rep.Advice = b.advice(rep.Latency)
	}
	if !b.only["latency"] {
		rep.Latency = nil // measured for the advice only
	}
	return rep, nil
}

// violations counts the times two holders were seen holding at once.
func (r *benchReport) violations() int {
	n := 0
	for _, c := range r.Contention {
		n += c.Overlaps + c.TokenRegressions
	}
	if r.Failover != nil {
		for _, f := range r.Failover.Rules {
			n += f.Early
		}
	}
	return n
}

// refuseLeases refuses to run under a prefix that holds lease records: a
// bench next to live leases is one typo away from touching them.
func (b *bench) refuseLeases(ctx context.Context) error {
	scanned := 0
	for page := ""; ; {
		p, err := b.store.List(ctx, b.prefix, page, 1000)
		if err != nil {
			return fmt.Errorf("cannot list the prefix: %w", err)
		}
		for _, a := range p.Objects {
			if scanned++; scanned > maxScan {
				return usagef("prefix %q holds more than %d objects; not all can be checked for lease records. Point bench at an empty prefix, or pass --force", b.prefix, maxScan)
			}
			obj, err := b.store.Get(ctx, a.Key, objlease.MaxRecordSize)
			if errors.Is(err, providers.ErrNotFound) || errors.Is(err, providers.ErrTooLarge) {
				continue
			}
			if err != nil {
				return fmt.Errorf("cannot read an object under the prefix: %w", err)
			}
			if _, err := objlease.DecodeRecord(a.Key, obj.Data); err == nil {
				return usagef("prefix %q holds lease records (%s); bench writes only under a scratch prefix of its own, but refuses to run next to leases without --force", b.prefix, a.Key)
			}
		}
		if page = p.NextToken; page == "" {
			return nil
		}
	}
}

// cleanup deletes everything under the scratch prefix, and only there.
func (b *bench) cleanup() error {
	records := b.leases
	if b.only["group"] {
		for _, m := range b.groupShards {
			for _, n := range b.groupMembers {
				records += m + n
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute+time.Duration(records)*10*time.Millisecond)
	defer cancel()
	var left []string
	for range 3 {
		left = left[:0]
		var errs []error
		for page := ""; ; {
			p, err := b.store.List(ctx, b.scratch, page, 1000)
			if err != nil {
				return fmt.Errorf("listing scratch prefix %q: %w", b.scratch, err)
			}
			var mu sync.Mutex
			var wg sync.WaitGroup
			sem := make(chan struct{}, 16) // the many section leaves thousands
			for _, a := range p.Objects {
				if !strings.HasPrefix(a.Key, b.scratch) {
					continue // a store that lists too much: never touch it
				}
				left = append(left, a.Key)
				sem <- struct{}{}
				wg.Go(func() {
					defer func() { <-sem }()
					if err := b.store.Delete(ctx, a.Key, a.Version); err != nil && !errors.Is(err, providers.ErrPrecondition) {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			if page = p.NextToken; page == "" {
				break
			}
		}
		if len(left) == 0 {
			return nil
		}
		if len(errs) > 0 {
			return errors.Join(errs...)
		}
		// Changed since listed (a helper process still writing): again.
	}
	return fmt.Errorf("%d objects still under scratch prefix %q, e.g. %q", len(left), b.scratch, left[0])
}

func (b *bench) printText(r *benchReport) error {
	w := tabwriter.NewWriter(b.env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "store %s, scratch prefix %s, TTL %v, renew every %v, poll every %v, drift bound %g%%\n",
		r.Store, r.Scratch, b.ttl, b.renew.Round(time.Millisecond), b.poll.Round(time.Millisecond), 100*r.Drift)
	if r.Latency != nil {
		printLatency(w, r.Latency)
	}
	if r.Cost != nil {
		printCost(w, r.Cost)
	}
	if len(r.Contention) > 0 {
		printContention(w, r.Contention, b.poll)
	}
	if r.Failover != nil {
		printFailover(w, r.Failover)
	}
	if r.Many != nil {
		printMany(w, r.Many)
	}
	if r.Group != nil {
		printGroup(w, r.Group, b.ttl, b.renew, b.poll)
	}
	if r.Advice != nil {
		printAdvice(w, r.Advice)
	}
	return w.Flush()
}

// goal renders whether a goal was met.
func goal(met bool) string {
	if met {
		return "met"
	}
	return "MISSED"
}
