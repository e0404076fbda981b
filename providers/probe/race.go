package probe

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/objlease/objlease/internal/ctxsleep"
	"github.com/objlease/objlease/providers"
)

// The kinds of race Run makes, as named in RaceResult.Kind.
const (
	// RaceCreate: every writer creates one fresh key (If-None-Match: *).
	RaceCreate = "create"
	// RaceReplace: every writer replaces one object, at the same version.
	RaceReplace = "replace"
	// RaceDeleteReplace: half the writers delete one object and half
	// replace it, all at the same version.
	RaceDeleteReplace = "delete-replace"
	// RaceDeleteDelete: every writer deletes one object at the same version.
	RaceDeleteDelete = "delete-delete"
)

// Writers and Rounds are the size of each of Run's races: this
// many writers, released together, in this many rounds per kind of race,
// each round on a fresh object.
const (
	Writers = 8
	Rounds  = 8
)

// RaceResult is how the store answered one kind of race: Writers
// concurrent conditional writes on one object, released together, repeated
// for Rounds rounds. Exactly one writer must win each round, with two
// exceptions: a round without a winner is allowed when the store refused
// every writer as conflicting or throttled (providers.ErrConflict,
// ErrThrottled), and a round that only deletes won is allowed when the
// object is gone afterwards (RepeatedDeletes). After a round the object must
// be as the winner left it.
type RaceResult struct {
	Kind    string // RaceCreate, RaceReplace, RaceDeleteReplace or RaceDeleteDelete
	Writers int    // writers per round
	Rounds  int
	// Winners[w] is the number of rounds in which w writers succeeded.
	Winners []int
	// AllRetryable counts the rounds without a winner in which the store
	// refused every writer as conflicting or throttled.
	AllRetryable int
	// RepeatedDeletes counts the rounds in which more than one delete, and
	// nothing else, was told it succeeded: the store (or its client, as
	// the S3 store's HEAD before DELETE) answers success to a conditional
	// delete of an object that is gone. That removes nothing and overwrites
	// nothing, so it is allowed, and counted.
	RepeatedDeletes int
	// Conflicts and Throttled count the single answers ErrConflict and
	// ErrThrottled, over all rounds.
	Conflicts, Throttled int
	// Unknown counts the answers that left a write's outcome unknown
	// (providers.ErrUnknownOutcome: a 5xx); each was judged by reading
	// the object after the round.
	Unknown int
	// Failures describes each round that broke the rules; empty if none did.
	Failures []string
	// Elapsed is the time the rounds took, the reads after them included.
	Elapsed time.Duration
}

// Race verdicts, as Verdict returns them.
const (
	RaceSafe         = "safe"
	RaceUnsafe       = "unsafe"
	RaceInconclusive = "inconclusive"
)

// Verdict is RaceUnsafe if a round broke the rules, RaceInconclusive if
// every round was refused as conflicting or throttled, and RaceSafe
// otherwise.
func (r RaceResult) Verdict() string {
	switch {
	case len(r.Failures) > 0:
		return RaceUnsafe
	case r.AllRetryable == r.Rounds:
		return RaceInconclusive
	}
	return RaceSafe
}

// raceKind is one kind of race: deletes of the writers delete, the others
// create (seeded false) or replace (seeded true).
type raceKind struct {
	name    string
	seeded  bool // the key holds an object, at one version, before the race
	deletes int
	what    string // what a store that fails the race does not do atomically
}

var raceKinds = []raceKind{
	{RaceCreate, false, 0, "If-None-Match: * is not atomic"},
	{RaceReplace, true, 0, "If-Match is not atomic"},
	{RaceDeleteReplace, true, Writers / 2, "conditional delete and replace are not atomic"},
	{RaceDeleteDelete, true, Writers, "conditional delete is not atomic"},
}

const raceBase = "objlease probe race base"

func raceData(writer int) string { return fmt.Sprintf("objlease probe race writer %d", writer) }

// raceKey is the fresh object of one round.
func raceKey(base, kind string, round int) string { return fmt.Sprintf("%s-%s-%d", base, kind, round) }

// probeRaces runs every kind of race on objects named after base, appends
// the results to r.Races and a line per failed kind to r.Failures. keys
// receives every key it may have written, for cleanup, before writing it. It
// returns an error if the store could not be checked.
func probeRaces(ctx context.Context, store providers.Store, base string, r *Report, keys func(...string)) error {
	// Seed every round's object first, then let the store's minimum
	// interval between writes to one object pass once, so that no race
	// follows its object's creation too closely.
	versions := map[string]string{}
	var mu sync.Mutex
	var seeds []func() error
	for _, k := range raceKinds {
		for round := range Rounds {
			key := raceKey(base, k.name, round)
			keys(key)
			if !k.seeded {
				continue
			}
			seeds = append(seeds, func() error {
				res, err := store.Create(ctx, key, []byte(raceBase), nil)
				if err != nil {
					return fmt.Errorf("probe: creating %q for a race: %w", key, err)
				}
				mu.Lock()
				versions[key] = res.Version
				mu.Unlock()
				return nil
			})
		}
	}
	if err := parallel(Writers, seeds); err != nil {
		return err
	}
	if d := store.Properties().MinWriteInterval; d > 0 {
		if err := ctxsleep.For(ctx, d); err != nil {
			return fmt.Errorf("probe: %w", err)
		}
	}
	for _, k := range raceKinds {
		res := RaceResult{Kind: k.name, Writers: Writers, Rounds: Rounds, Winners: make([]int, Writers+1)}
		start := time.Now()
		bad := 0
		for round := range Rounds {
			key := raceKey(base, k.name, round)
			failure, err := raceRound(ctx, store, k, key, versions[key], &res)
			if err != nil {
				return fmt.Errorf("probe: %s race, round %d: %w", k.name, round, err)
			}
			if failure != "" {
				bad++
				res.Failures = append(res.Failures, fmt.Sprintf("round %d: %s", round, failure))
			}
		}
		res.Elapsed = time.Since(start)
		r.Races = append(r.Races, res)
		if bad > 0 {
			line := fmt.Sprintf("%s race (%s): %d of %d rounds of %d writers went wrong, first %s",
				k.name, k.what, bad, Rounds, Writers, res.Failures[0])
			if k.deletes > 0 {
				// objlease deletes conditionally only to collect batch
				// objects orphaned below the committed token, which are
				// written once and never again: no write races those
				// deletes. The store's own users must know, though.
				r.Caveats = append(r.Caveats, line+"; objlease's leases and fences do not rely on it, but do not rely on this store's conditional DELETE for data of your own")
				continue
			}
			r.Failures = append(r.Failures, line)
		}
	}
	return nil
}

// raceRound releases Writers writers on key together, counts the
// winners into res and checks what the object holds afterwards. It returns
// what went wrong ("" if nothing did), or an error if a writer met an error
// that says nothing about the race.
func raceRound(ctx context.Context, store providers.Store, k raceKind, key, version string, res *RaceResult) (string, error) {
	errs := make([]error, Writers)
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	for i := range Writers {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			switch {
			case i < k.deletes:
				errs[i] = store.Delete(ctx, key, version)
			case k.seeded:
				_, errs[i] = store.Replace(ctx, key, []byte(raceData(i)), nil, version)
			default:
				_, errs[i] = store.Create(ctx, key, []byte(raceData(i)), nil)
			}
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()

	var winners, unknown []int
	refused, retryable := 0, 0
	for i, err := range errs {
		switch {
		case err == nil:
			winners = append(winners, i)
		case errors.Is(err, providers.ErrPrecondition), errors.Is(err, providers.ErrNotFound):
			refused++
		case errors.Is(err, providers.ErrUnknownOutcome):
			res.Unknown++
			unknown = append(unknown, i)
		case errors.Is(err, providers.ErrConflict):
			res.Conflicts++
			retryable++
		case errors.Is(err, providers.ErrThrottled):
			res.Throttled++
			retryable++
		default:
			return "", fmt.Errorf("writer %d: %w", i, err)
		}
	}
	if len(unknown) > 0 {
		// Judged by reading, never guessed: a writer whose answer said
		// nothing (a 500 to a losing writer, as Ceph RGW gives) won if
		// the object holds what it wrote, or is gone after its delete
		// with nobody else told they won; otherwise it lost.
		obj, err := store.Get(ctx, key, 1<<10)
		if err != nil && !errors.Is(err, providers.ErrNotFound) {
			return "", err
		}
		for _, i := range unknown {
			switch {
			case i >= k.deletes && err == nil && string(obj.Data) == raceData(i):
				winners = append(winners, i)
			case i < k.deletes && err != nil && len(winners) == 0:
				winners = append(winners, i)
			default:
				refused++
			}
		}
	}
	res.Winners[len(winners)]++
	deletes := 0
	for _, w := range winners {
		if w < k.deletes {
			deletes++
		}
	}
	switch {
	case len(winners) > 1 && deletes == len(winners):
		// Every winner deleted: one removed the object, the others were
		// told they removed one that was gone by then. Nothing was
		// overwritten; the object must be gone.
		res.RepeatedDeletes++
	case len(winners) > 1:
		what := ""
		if deletes > 0 {
			what = fmt.Sprintf(" (%d deletes, %d replaces)", deletes, len(winners)-deletes)
		}
		return fmt.Sprintf("%d of %d writers succeeded%s", len(winners), Writers, what), nil
	case len(winners) == 0 && refused == 0:
		res.AllRetryable++
	case len(winners) == 0:
		return fmt.Sprintf("no writer succeeded, yet %d were refused as if one had", refused), nil
	}

	// The object must be as the one winner (or, in a round every writer
	// lost, the seed) left it.
	who := "no writer succeeded"
	switch {
	case len(winners) == 1:
		who = fmt.Sprintf("writer %d alone succeeded", winners[0])
	case len(winners) > 1:
		who = fmt.Sprintf("only deletes succeeded (%d)", len(winners))
	}
	want := ""
	switch {
	case len(winners) == 0 && k.seeded:
		want = raceBase
	case len(winners) == 1 && winners[0] >= k.deletes:
		want = raceData(winners[0])
	}
	obj, err := store.Get(ctx, key, 1<<10)
	switch {
	case errors.Is(err, providers.ErrNotFound):
		if want != "" {
			return who + ", yet the object is gone", nil
		}
	case err != nil:
		return "", err
	case want == "":
		return fmt.Sprintf("%s, yet the object holds %q, not nothing", who, obj.Data), nil
	case string(obj.Data) != want:
		return fmt.Sprintf("%s, yet the object holds %q, not %q", who, obj.Data, want), nil
	}
	return "", nil
}

// parallel runs fs, at most n at a time, and returns the error of the
// first in fs that failed.
func parallel(n int, fs []func() error) error {
	sem := make(chan struct{}, n)
	errs := make([]error, len(fs))
	var wg sync.WaitGroup
	for i, f := range fs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = f()
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// answer names a store's answer to a write, for the report.
func answer(err error) string {
	switch {
	case err == nil:
		return "success"
	case errors.Is(err, providers.ErrPrecondition):
		return "ErrPrecondition"
	case errors.Is(err, providers.ErrNotFound):
		return "ErrNotFound"
	}
	return strings.TrimSpace(err.Error())
}
