package main

import (
	"context"
	"errors"
	"fmt"
	neturl "net/url"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/fence"
	"github.com/objlease/objlease/providers"
	storeprobe "github.com/objlease/objlease/providers/probe"
)

const doctorDetail = `Checks that the store refuses the writes the lease protocol relies on it to
refuse. One request at a time: a second create of one object, a replace or
delete with a stale version, a replace and a delete of a missing object.
Then concurrently, since a store may check a condition and write
non-atomically: 8 writers released together race to create one fresh key,
to replace one object at one version, to delete or replace it (half each),
and to delete it, 8 rounds of each on fresh objects. Exactly one writer must
win each round (none only if the store refused them all as conflicting or
throttled; several only if all deleted and the object is gone), and the
object must be as the winner left it. Some
S3-compatible stores accept conditional requests and ignore them, or enforce
them non-atomically; leases on such a store are not exclusive. It writes
scratch objects under PREFIX-URL and removes them. A store that lets a
stale DELETE through (MinIO) is safe with a caveat: no lease or fenced write
is a delete.

Then it reads the bucket's settings that decide what the store keeps of
an object it overwrites, as every renewal overwrites a lease's record:
versioning, soft delete, object lock and a lifecycle rule that deletes
noncurrent versions under PREFIX-URL (S3: GetBucketVersioning,
GetObjectLockConfiguration, GetBucketLifecycleConfiguration; GCS: the
bucket's attributes; Azure: versioning from a write's reply, the rest is
the account's and stays unknown). It prints them (bucket:), what they
cost a lease at --ttl (cost: writes a day, 3 × 86400 / TTL, times the
record's size, kept as long as the settings keep each), and, where the
bucket keeps overwritten records without a rule, the store's lifecycle
rule that deletes them a day after (lifecycle:) and a caveat if they are
kept for ever. None of it changes the verdict: a versioned bucket is safe,
and costly.

Prints the verdict, every check that failed, one line per kind of race
(rounds, how many rounds had how many winners, verdict), how the store
answers writes to a missing object, the store's clock offset from this
machine's (when the store reports its time), the bucket's settings and
their cost, and the latency of each sequential request. With -o json:
{"url","store","safe","use_url","failures","caveats","delete_unconditional",
"missing_replace","missing_delete","races","clock_known",
"clock_offset_ms","latency_ms","bucket","cost","lifecycle_rule"}, each race
{"kind","writers","rounds","winners","all_retryable","repeated_deletes",
"conflicts","unknown_outcomes","throttled","verdict","failures","elapsed_ms"}
(winners[w] is the number of rounds that w writers won), bucket {"versioning",
"soft_delete","soft_delete_days","object_lock","object_lock_detail",
"object_lock_days","lifecycle","noncurrent_expiry_days",
"overwrite_billed_days","notes","error"}, cost {"ttl_ms","writes_per_day",
"record_bytes","bytes_per_day","kept","kept_days","kept_bytes",
"kept_versions","why"} (kept: none, days, forever or unknown) and
lifecycle_rule {"format","text","apply","note"} or null. Exits 0 if the
store is safe to use, 1 if it is not, 69 if it could not be checked, and
78 if it refuses a write conditional on the version it has just shown: for
an s3:// URL doctor then checks again with unquoted_etag=true (Ceph RGW 16
compares If-Match unquoted) and names that URL if the checks pass.`

// diagnosis is doctor's JSON output.
type diagnosis struct {
	URL   string `json:"url"`
	Store string `json:"store"`
	Safe  bool   `json:"safe"`
	// UseURL is the URL the store passed the checks with, when the URL
	// given needs an option to work at all (unquoted_etag=true).
	UseURL   string   `json:"use_url,omitempty"`
	Failures []string `json:"failures"`
	Caveats  []string `json:"caveats"`
	// DeleteUnconditional: a DELETE with a stale version removed the
	// object (the store ignores If-Match on DELETE).
	DeleteUnconditional bool                 `json:"delete_unconditional"`
	MissingReplace      string               `json:"missing_replace"`
	MissingDelete       string               `json:"missing_delete"`
	Races               []raceJSON           `json:"races"`
	ClockKnown          bool                 `json:"clock_known"`
	ClockOffsetMs       float64              `json:"clock_offset_ms"`
	LatencyMs           map[string][]float64 `json:"latency_ms"`
	// Bucket, Cost and LifecycleRule say what the bucket keeps of the
	// records renewals overwrite (versioning, soft delete): a cost, never
	// a safety failure.
	Bucket        bucketJSON `json:"bucket"`
	Cost          *costJSON  `json:"cost"`
	LifecycleRule *ruleJSON  `json:"lifecycle_rule"`
}

// raceJSON is one kind of race in doctor's JSON output.
type raceJSON struct {
	Kind         string   `json:"kind"`
	Writers      int      `json:"writers"`
	Rounds       int      `json:"rounds"`
	Winners      []int    `json:"winners"`
	AllRetryable int      `json:"all_retryable"`
	Repeated     int      `json:"repeated_deletes"`
	Conflicts    int      `json:"conflicts"`
	Unknown      int      `json:"unknown_outcomes"`
	Throttled    int      `json:"throttled"`
	Verdict      string   `json:"verdict"`
	Failures     []string `json:"failures"`
	ElapsedMs    float64  `json:"elapsed_ms"`
}

func (c *cli) doctorCmd(fs *flagSet) action {
	asJSON := addOutput(fs)
	ttl := objlease.DefaultTTL
	fs.Var(&durationFlag{d: &ttl, min: objlease.MinTTL, max: objlease.MaxTTL}, "ttl",
		"the TTL your leases use, as a `duration`, for what a bucket that keeps overwritten objects keeps of their renewals (default 30s)")
	return c.onStore(fs, "doctor", false, func(ctx context.Context, url string, store providers.Store, prefix string) error {
		r, err := storeprobe.Run(ctx, store, prefix)
		remedy := ""
		if errors.Is(err, storeprobe.ErrCurrentVersionRefused) {
			// No lease could be renewed as the URL stands. Where the
			// store's driver has a remedy, check the store with it.
			remedy = remedyURL(url)
			if remedy == "" {
				return opErr("doctor", url, fmt.Errorf("%w: %w", fence.ErrPreconditionRefused, err))
			}
			rr, rerr := c.probeAt(ctx, remedy)
			if rerr != nil {
				return opErr("doctor", url, fmt.Errorf("%w: %w; with %s it could not be checked either: %w", fence.ErrPreconditionRefused, err, remedyParam, rerr))
			}
			r, err = rr, nil
		}
		if err != nil && !errors.Is(err, storeprobe.ErrStoreUnsafe) {
			return opErr("doctor", url, fmt.Errorf("store could not be checked: %w", err))
		}
		// After the checks: a store may learn its settings from the
		// replies to their writes (Azure's versioning).
		bucket := readBucket(ctx, store, prefix, ttl)
		caveats := append([]string{}, r.Caveats...)
		if c := bucket.caveat(); c != "" {
			caveats = append(caveats, c)
		}
		verdict := error(nil)
		switch {
		case len(r.Failures) > 0:
			verdict = opErr("doctor", url, fmt.Errorf("%w: leases on it would not be exclusive", errUnsafe))
		case remedy != "":
			verdict = opErr("doctor", url, fmt.Errorf("%w as the URL stands (it compares If-Match with an unquoted ETag): use %s, with which every check below passed", fence.ErrPreconditionRefused, remedy))
		}
		if *asJSON {
			d := diagnosis{URL: url, Store: r.Store, Safe: len(r.Failures) == 0 && remedy == "", UseURL: remedy, Failures: append([]string{}, r.Failures...),
				Caveats: caveats, DeleteUnconditional: r.DeleteUnconditional, MissingReplace: r.MissingReplace, MissingDelete: r.MissingDelete, Races: []raceJSON{},
				ClockKnown: r.ClockKnown, ClockOffsetMs: msOf(r.ClockOffset), LatencyMs: map[string][]float64{},
				Bucket: bucket.bucket, Cost: bucket.cost, LifecycleRule: bucket.rule}
			for _, race := range r.Races {
				d.Races = append(d.Races, raceJSON{Kind: race.Kind, Writers: race.Writers, Rounds: race.Rounds,
					Winners: race.Winners, AllRetryable: race.AllRetryable, Repeated: race.RepeatedDeletes, Conflicts: race.Conflicts, Unknown: race.Unknown, Throttled: race.Throttled,
					Verdict: race.Verdict(), Failures: append([]string{}, race.Failures...), ElapsedMs: msOf(race.Elapsed)})
			}
			for op, ds := range r.Latency {
				for _, l := range ds {
					d.LatencyMs[op] = append(d.LatencyMs[op], msOf(l))
				}
			}
			if err := c.printJSON(d); err != nil {
				return err
			}
			return verdict
		}
		w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintf(w, "store:\t%s\n", r.Store)
		if remedy != "" {
			fmt.Fprintf(w, "fix:\tthe store refuses writes conditional on an object's current version as S3 sends them (a quoted ETag): no lease could be renewed. Use %s; the checks below ran with it\n", remedy)
		}
		switch {
		case len(r.Failures) == 0 && r.DeleteUnconditional:
			fmt.Fprintf(w, "verdict:\tsafe: every conditional write that should fail was refused, alone and in races; conditional DELETE not enforced (see the caveats)\n")
		case len(r.Failures) == 0:
			fmt.Fprintf(w, "verdict:\tsafe: every conditional write that should fail was refused, alone and in races\n")
		default:
			fmt.Fprintf(w, "verdict:\tUNSAFE: leases on this store would not be exclusive\n")
			for _, fail := range r.Failures {
				fmt.Fprintf(w, "failed:\t%s\n", fail)
			}
		}
		for _, caveat := range caveats {
			fmt.Fprintf(w, "caveat:\t%s\n", caveat)
		}
		for _, race := range r.Races {
			fmt.Fprintf(w, "race:\t%s\n", raceLine(race))
		}
		fmt.Fprintf(w, "missing:\treplace answered %s, delete answered %s\n", r.MissingReplace, r.MissingDelete)
		if r.ClockKnown {
			fmt.Fprintf(w, "clock:\tstore minus local %+v (estimated; --store-clock relies on the store's clocks agreeing with each other, not with this one)\n", r.ClockOffset.Round(time.Millisecond))
		} else {
			fmt.Fprintf(w, "clock:\tthe store reports no time; --store-clock has no effect on it\n")
		}
		bucket.print(w, prefix)
		ops := make([]string, 0, len(r.Latency))
		for op := range r.Latency {
			ops = append(ops, op)
		}
		slices.Sort(ops)
		for _, op := range ops {
			fmt.Fprintf(w, "latency:\t%s %v\n", op, roundAll(r.Latency[op]))
		}
		if err := w.Flush(); err != nil {
			return err
		}
		return verdict
	})
}

// raceLine is one kind of race in a line, such as "create: 8 rounds of 8
// writers; 1 winner in 7 rounds, 2 winners in 1 round; 6ms; unsafe".
func raceLine(r storeprobe.RaceResult) string {
	var parts []string
	for w, n := range r.Winners {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%s in %s", plural(w, "winner"), plural(n, "round")))
		}
	}
	if r.AllRetryable > 0 {
		parts = append(parts, fmt.Sprintf("%s refused all as conflicting or throttled", plural(r.AllRetryable, "round")))
	}
	if r.RepeatedDeletes > 0 {
		parts = append(parts, fmt.Sprintf("%s only deletes won and the object is gone (allowed)", plural(r.RepeatedDeletes, "round")))
	}
	if r.Conflicts > 0 {
		parts = append(parts, plural(r.Conflicts, "conflict"))
	}
	if r.Throttled > 0 {
		parts = append(parts, fmt.Sprintf("%d throttled", r.Throttled))
	}
	if r.Unknown > 0 {
		parts = append(parts, fmt.Sprintf("%d answers of unknown outcome (5xx), judged by reading the object", r.Unknown))
	}
	return fmt.Sprintf("%s: %s of %s; %s; %v; %s", r.Kind, plural(r.Rounds, "round"), plural(r.Writers, "writer"),
		strings.Join(parts, ", "), r.Elapsed.Round(time.Millisecond), r.Verdict())
}

// remedyParam is the s3 URL option for a server that compares If-Match
// with an unquoted ETag (see providers/s3store).
const remedyParam = "unquoted_etag=true"

// remedyURL is rawURL with the option that makes a store refusing writes
// against the current version work, or "" if its driver has none (or it
// is set already).
func remedyURL(rawURL string) string {
	u, err := neturl.Parse(rawURL)
	if err != nil || u.Scheme != "s3" || u.Query().Has("unquoted_etag") {
		return ""
	}
	if u.RawQuery == "" && !strings.HasSuffix(rawURL, "?") {
		return rawURL + "?" + remedyParam
	}
	return rawURL + "&" + remedyParam
}

// probeAt runs the store self-test at rawURL.
func (c *cli) probeAt(ctx context.Context, rawURL string) (*storeprobe.Report, error) {
	store, prefix, err := c.open(ctx, rawURL, false)
	if err != nil {
		return nil, err
	}
	defer store.Close()
	r, err := storeprobe.Run(ctx, store, prefix)
	if err != nil && !errors.Is(err, storeprobe.ErrStoreUnsafe) {
		return nil, err
	}
	return r, nil
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(10 * time.Microsecond)
	}
	return out
}
