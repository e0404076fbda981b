// Package probe is a store's self-test: Run checks, with scratch objects,
// that a store enforces the conditional writes objlease relies on, one
// request at a time and under races. It needs only package providers, so
// the lease code does not carry it; objlease doctor and leasetest run it.
package probe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/objlease/objlease/providers"
)

// ErrStoreUnsafe: the store accepted a conditional write it should have
// refused, so leases on it would not be exclusive.
var ErrStoreUnsafe = errors.New("store does not enforce conditional writes")

// ErrCurrentVersionRefused: the store refused a write conditional on the
// version it had just reported for the object, and still reports it. No
// lease can be renewed on it. Some S3-compatible servers (Ceph RGW 16)
// compare If-Match with the ETag unquoted, where S3 quotes it: for them the
// s3 driver's unquoted_etag=true URL option is the remedy (objlease doctor
// tries it and says so).
var ErrCurrentVersionRefused = errors.New("store refuses writes conditional on the current version")

// Report is what Run found.
type Report struct {
	Store string // the store's declared name
	// Failures lists every precondition the store failed to enforce; empty
	// when the store is safe to use.
	Failures []string
	// Latency of each probe request, by operation.
	Latency map[string][]time.Duration
	// ClockOffset is the store's clock minus the local clock, estimated at
	// the midpoint of each request that reported the store's time; zero with
	// ClockKnown false if the store reports no time.
	ClockOffset time.Duration
	ClockKnown  bool
	// MissingReplace and MissingDelete name the store's answer to a
	// conditional replace, and to a conditional delete, of an object that
	// does not exist: "ErrPrecondition" (what the store contract says),
	// "ErrNotFound" (a refusal too) or "success": a failure for a replace,
	// which creates the object; allowed for a delete, which removes nothing.
	MissingReplace, MissingDelete string
	// Races is how the store answered each kind of concurrent race, in the
	// order run. A create or replace race that went wrong also has a line
	// in Failures; a race of deletes that went wrong has one in Caveats.
	Races []RaceResult
	// Caveats lists what the store gets wrong that objlease does not rely
	// on: a conditional DELETE that is not atomic against concurrent
	// writes (objlease deletes conditionally only to collect batch objects
	// orphaned below the committed token, which nothing writes again).
	Caveats []string
	// DeleteUnconditional: the store let a DELETE with a stale version
	// remove the object (it ignores If-Match on DELETE, as MinIO does). No
	// lease write and no fenced write is a delete (a fenced delete writes a
	// tombstone by conditional replace), and fence.Collect deletes only
	// orphans no commit can reach, so the store stays safe for objlease; a
	// caveat says so.
	DeleteUnconditional bool
}

// Run checks, with scratch objects under prefix, that store refuses the
// writes the lease protocol relies on it to refuse.
//
// One request at a time: a second create, a replace or delete with a stale
// version, a replace and a delete of a missing object; and that the object
// is intact after the stale delete. Each check is answered by the store
// itself, not by a client-side comparison. A stale delete that succeeds is
// a caveat, not a failure (Report.DeleteUnconditional).
//
// Then concurrently, since a store may check a precondition and write
// without holding the object in between: Writers writers released
// together race to create one fresh key, to replace one object at one
// version, to delete or replace it (half each), and to delete it, each for
// Rounds rounds on a fresh object (see RaceResult). A round with more
// than one winner (unless all were deletes and the object is gone), without
// a winner while some writer was refused as stale, or after which the object
// is not as its winner left it, makes the store unsafe, except in the races
// of deletes, which only add a caveat (see Report.Caveats). A store that declares a minimum interval between writes to one
// object (Properties.MinWriteInterval) gets it once between creating the
// race objects and racing on them, and once before they are removed.
//
// It removes what it wrote (as far as the store allows). It returns a
// report, and an error matching ErrStoreUnsafe if any check failed; any
// other error means the store could not be checked (a race in which the
// store refused every writer of every round as conflicting or throttled
// included). Run it before trusting a store, especially an S3-compatible
// one: some accept conditional headers and ignore them, some enforce them
// non-atomically.
func Run(ctx context.Context, store providers.Store, prefix string) (*Report, error) {
	key := fmt.Sprintf("%s_objlease-probe-%016x", prefix, rand.Uint64())
	missing := key + "-missing"
	r := &Report{Store: store.Properties().Name, Latency: map[string][]time.Duration{}}
	var offsets []time.Duration
	timed := func(op string, f func() (time.Time, error)) error {
		start := time.Now()
		storeTime, err := f()
		d := time.Since(start)
		r.Latency[op] = append(r.Latency[op], d)
		if !storeTime.IsZero() {
			offsets = append(offsets, storeTime.Sub(start.Add(d/2)))
		}
		return err
	}
	create := func(data string) (providers.WriteResult, error) {
		var res providers.WriteResult
		err := timed("create", func() (time.Time, error) {
			var err error
			res, err = store.Create(ctx, key, []byte(data), nil)
			return res.StoreTime, err
		})
		return res, err
	}
	replace := func(k, data, ifVersion string) (providers.WriteResult, error) {
		var res providers.WriteResult
		err := timed("replace", func() (time.Time, error) {
			var err error
			res, err = store.Replace(ctx, k, []byte(data), nil, ifVersion)
			return res.StoreTime, err
		})
		return res, err
	}
	// refused checks that a write the store must refuse was refused.
	refused := func(what string, err error) error {
		switch {
		case errors.Is(err, providers.ErrPrecondition):
			return nil
		case strings.Contains(what, "missing") && errors.Is(err, providers.ErrNotFound):
			return nil
		case err == nil:
			r.Failures = append(r.Failures, what+" succeeded")
			return nil
		default:
			return fmt.Errorf("probe %q: %s: %w", key, what, err)
		}
	}

	// Read before writing: a store that cannot answer a read (an endpoint
	// that is not the store's API, where an upload may still land) would
	// keep the probe's object, which could then not be removed.
	if err := timed("stat", func() (time.Time, error) {
		_, err := store.Stat(ctx, missing)
		return time.Time{}, err
	}); err != nil && !errors.Is(err, providers.ErrNotFound) {
		return r, fmt.Errorf("probe: %w", err)
	}
	v1, err := create("objlease probe 1")
	if err != nil {
		return r, fmt.Errorf("probe: %w", err)
	}
	written := []string{key, missing}
	raced := false
	defer func() {
		if raced {
			// Removing a race's object is one more write to it.
			time.Sleep(store.Properties().MinWriteInterval)
		}
		cleanup(store, written...)
	}()
	if err := refused("create of an existing object (If-None-Match: * ignored)", ignore(create("objlease probe 2"))); err != nil {
		return r, err
	}
	v2, err := replace(key, "objlease probe 3", v1.Version)
	if errors.Is(err, providers.ErrPrecondition) {
		if a, serr := store.Stat(ctx, key); serr == nil && a.Version == v1.Version {
			return r, fmt.Errorf("probe %q: %w: If-Match with version %s was refused while the store shows that version", key, ErrCurrentVersionRefused, v1.Version)
		}
	}
	if err != nil {
		return r, fmt.Errorf("probe: replace with the current version: %w", err)
	}
	if v2.Version == v1.Version {
		r.Failures = append(r.Failures, "the version did not change when the object changed")
	}
	if err := refused("replace with a stale version (If-Match ignored)", ignore(replace(key, "objlease probe 4", v1.Version))); err != nil {
		return r, err
	}
	err = ignore(replace(missing, "objlease probe 5", v2.Version))
	r.MissingReplace = answer(err)
	if err := refused("replace of a missing object", err); err != nil {
		return r, err
	}
	err = timed("delete", func() (time.Time, error) {
		return time.Time{}, store.Delete(ctx, missing, v2.Version)
	})
	r.MissingDelete = answer(err)
	if err != nil {
		if err := refused("delete of a missing object", err); err != nil {
			return r, err
		}
	}
	// The stale delete must reach the store and be refused there; the read
	// below then checks that the object survived it. A store that lets it
	// through only gets a caveat: objlease never relies on a conditional
	// DELETE to keep a lease or a fence (see DeleteUnconditional).
	err = timed("delete", func() (time.Time, error) {
		return time.Time{}, store.Delete(ctx, key, v1.Version)
	})
	if err == nil {
		r.DeleteUnconditional = true
		r.Caveats = append(r.Caveats, "delete with a stale version succeeded (If-Match ignored on DELETE): "+
			"objlease's leases, fenced puts, fenced deletes (tombstones written by conditional replace) and batch commits do not rely on it, "+
			"and batch collect deletes only orphans no commit can reach; do not rely on this store's conditional DELETE for data of your own")
	} else if err := refused("delete with a stale version", err); err != nil {
		return r, err
	}
	var obj *providers.Object
	err = timed("get", func() (time.Time, error) {
		var err error
		obj, err = store.Get(ctx, key, 1<<10)
		if obj != nil {
			return obj.StoreTime, err
		}
		return time.Time{}, err
	})
	switch {
	case errors.Is(err, providers.ErrNotFound) && r.DeleteUnconditional:
		// Gone by the stale delete, as its caveat says.
	case errors.Is(err, providers.ErrNotFound):
		r.Failures = append(r.Failures, "the object is gone after a delete with a stale version")
	case err != nil:
		return r, fmt.Errorf("probe: %w", err)
	case !bytes.Equal(obj.Data, []byte("objlease probe 3")):
		r.Failures = append(r.Failures, fmt.Sprintf("the object holds %q, not what the last permitted write wrote", obj.Data))
	}
	raced = true
	if err := probeRaces(ctx, store, key, r, func(k ...string) { written = append(written, k...) }); err != nil {
		return r, err
	}
	if len(r.Failures) == 0 {
		for _, race := range r.Races {
			if race.Verdict() == RaceInconclusive {
				return r, fmt.Errorf("probe: %s race: the store refused every writer of all %d rounds as conflicting or throttled, so it could not be checked", race.Kind, race.Rounds)
			}
		}
	}
	if len(offsets) > 0 {
		sort.Slice(offsets, func(i, j int) bool { return offsets[i] < offsets[j] })
		r.ClockOffset, r.ClockKnown = offsets[len(offsets)/2], true
	}
	if len(r.Failures) > 0 {
		return r, fmt.Errorf("%w: store %q at %q: %s", ErrStoreUnsafe, r.Store, key, strings.Join(r.Failures, "; "))
	}
	return r, nil
}

func ignore(_ providers.WriteResult, err error) error { return err }

// cleanup removes the probe's objects, whatever state the probe left them in.
func cleanup(store providers.Store, keys ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fs := make([]func() error, len(keys))
	for i, k := range keys {
		fs[i] = func() error {
			if a, err := store.Stat(ctx, k); err == nil {
				_ = store.Delete(ctx, k, a.Version)
			}
			return nil
		}
	}
	_ = parallel(Writers, fs)
}
