package probe_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/faulty"
	"github.com/objlease/objlease/providers/file"
	"github.com/objlease/objlease/providers/mem"
	"github.com/objlease/objlease/providers/probe"
)

// ignoringStore accepts conditional writes and ignores their conditions, as
// some S3-compatible servers do.
type ignoringStore struct{ *providers.Bucket }

func (s ignoringStore) current(ctx context.Context, key string) string {
	if a, err := s.Stat(ctx, key); err == nil {
		return a.Version
	}
	return ""
}

func (s ignoringStore) Create(ctx context.Context, key string, data []byte, md map[string]string) (providers.WriteResult, error) {
	if v := s.current(ctx, key); v != "" {
		return s.Bucket.Replace(ctx, key, data, md, v)
	}
	return s.Bucket.Create(ctx, key, data, md)
}

func (s ignoringStore) Replace(ctx context.Context, key string, data []byte, md map[string]string, _ string) (providers.WriteResult, error) {
	return s.Create(ctx, key, data, md)
}

func (s ignoringStore) Delete(ctx context.Context, key, _ string) error {
	return s.Bucket.Delete(ctx, key, s.current(ctx, key))
}

// safeReport checks what Run reports about a correct store.
func safeReport(t *testing.T, r *probe.Report, err error, missingDelete string) {
	t.Helper()
	if err != nil || len(r.Failures) != 0 {
		t.Fatalf("%v %v", err, r.Failures)
	}
	if r.MissingReplace != "ErrPrecondition" || r.MissingDelete != missingDelete {
		t.Errorf("missing object: replace answered %q, delete %q; want ErrPrecondition, %s", r.MissingReplace, r.MissingDelete, missingDelete)
	}
	kinds := []string{probe.RaceCreate, probe.RaceReplace, probe.RaceDeleteReplace, probe.RaceDeleteDelete}
	if len(r.Races) != len(kinds) {
		t.Fatalf("%d races, want %d: %+v", len(r.Races), len(kinds), r.Races)
	}
	for i, race := range r.Races {
		if race.Kind != kinds[i] || race.Verdict() != probe.RaceSafe || race.Rounds != probe.Rounds ||
			race.Writers != probe.Writers || race.Winners[1] != race.Rounds {
			t.Errorf("race %+v: want %s, safe, one winner in each of %d rounds", race, kinds[i], probe.Rounds)
		}
	}
}

func TestProbe(t *testing.T) {
	ctx := context.Background()
	m := mem.New()
	r, err := probe.Run(ctx, m, "probe/")
	safeReport(t, r, err, "ErrPrecondition")
	if !r.ClockKnown || len(r.Latency["create"]) != 2 || len(r.Latency["replace"]) != 3 || len(r.Latency["delete"]) != 2 {
		t.Fatalf("report %+v", r)
	}
	if page, _ := m.List(ctx, "", "", 100); len(page.Objects) != 0 {
		t.Fatalf("probe left %d objects behind", len(page.Objects))
	}

	r, err = probe.Run(ctx, ignoringStore{mem.New()}, "probe/")
	if !errors.Is(err, probe.ErrStoreUnsafe) {
		t.Fatalf("ignoring store: %v, want ErrStoreUnsafe", err)
	}
	for _, want := range []string{"If-None-Match: * ignored", "If-Match ignored", "replace of a missing object",
		"create race (If-None-Match: * is not atomic)", "replace race (If-Match is not atomic)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
	if !r.DeleteUnconditional || len(r.Caveats) == 0 || !strings.Contains(r.Caveats[0], "delete with a stale version succeeded") {
		t.Errorf("ignoring store: DeleteUnconditional %v, caveats %q; want the stale delete as a caveat", r.DeleteUnconditional, r.Caveats)
	}
	if r.MissingReplace != "success" {
		t.Errorf("ignoring store: replace of a missing object reported as %q, want success", r.MissingReplace)
	}
	t.Log(err)
}

func TestProbeFileStore(t *testing.T) {
	s, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r, err := probe.Run(context.Background(), s, "probe/")
	safeReport(t, r, err, "ErrPrecondition")
	if page, _ := s.List(context.Background(), "", "", 100); len(page.Objects) != 0 {
		t.Fatalf("probe left %d objects behind", len(page.Objects))
	}
	t.Logf("file store probed in %v", time.Since(start))
}

// TestProbeRacesNonAtomicStore: a store that checks a precondition and then
// writes, with a window between, is right one request at a time and wrong
// under concurrency; Run must race it to find out.
func TestProbeRacesNonAtomicStore(t *testing.T) {
	inner := mem.NewDriver()
	f, err := faulty.New(inner, faulty.Config{Seed: 1, CheckThenWrite: 2 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s := providers.NewBucket(f)
	r, err := probe.Run(context.Background(), s, "probe/")
	if !errors.Is(err, probe.ErrStoreUnsafe) {
		t.Fatalf("non-atomic store: %v, want ErrStoreUnsafe", err)
	}
	t.Log(err)
	// One request at a time the store is right: only the races fail.
	for _, f := range r.Failures {
		if !strings.Contains(f, " race (") {
			t.Errorf("sequential check failed: %s", f)
		}
	}
	for _, race := range r.Races {
		if race.Kind == probe.RaceDeleteDelete {
			// Deletes told they removed an object that was gone by then
			// overwrite nothing: counted, not unsafe.
			if race.Verdict() != probe.RaceSafe || race.RepeatedDeletes == 0 {
				t.Errorf("%s race on a non-atomic store: %s, %d rounds of repeated deletes, want safe and some", race.Kind, race.Verdict(), race.RepeatedDeletes)
			}
			continue
		}
		if race.Verdict() != probe.RaceUnsafe || race.Winners[1] == race.Rounds {
			t.Errorf("%s race on a non-atomic store: %s, winners %v", race.Kind, race.Verdict(), race.Winners)
		}
	}
	if len(r.Races) != 4 {
		t.Errorf("%d races, want 4", len(r.Races))
	}
	if page, _ := inner.List(context.Background(), "", "", 1000); len(page.Objects) != 0 {
		t.Fatalf("probe left %d objects behind", len(page.Objects))
	}
}

// riggedStore answers the writes match picks with answer, after applying
// them if apply is set.
type riggedStore struct {
	*providers.Bucket
	match  func(op, key string) bool
	answer error
	apply  bool
}

func (s riggedStore) write(op, key string, f func() error) error {
	if !s.match(op, key) {
		return f()
	}
	if s.apply {
		_ = f()
	}
	return s.answer
}

func (s riggedStore) Create(ctx context.Context, key string, data []byte, md map[string]string) (res providers.WriteResult, err error) {
	err = s.write("create", key, func() error { res, err = s.Bucket.Create(ctx, key, data, md); return err })
	return res, err
}

func (s riggedStore) Replace(ctx context.Context, key string, data []byte, md map[string]string, v string) (res providers.WriteResult, err error) {
	err = s.write("replace", key, func() error { res, err = s.Bucket.Replace(ctx, key, data, md, v); return err })
	return res, err
}

func (s riggedStore) Delete(ctx context.Context, key, v string) error {
	return s.write("delete", key, func() error { return s.Bucket.Delete(ctx, key, v) })
}

// A race in which the store refuses every writer as conflicting proves
// nothing: the store could not be checked, which is not unsafe.
func TestProbeRaceAllConflicts(t *testing.T) {
	r, err := probe.Run(context.Background(), riggedStore{mem.New(), func(op, key string) bool {
		return op == "delete" && strings.Contains(key, "-delete-delete-")
	}, providers.ErrConflict, false}, "probe/")
	if err == nil || errors.Is(err, probe.ErrStoreUnsafe) || !strings.Contains(err.Error(), "delete-delete race") || !strings.Contains(err.Error(), "could not be checked") {
		t.Fatalf("%v, want a delete-delete race that could not be checked", err)
	}
	race := r.Races[3]
	if race.Verdict() != probe.RaceInconclusive || race.AllRetryable != probe.Rounds || race.Conflicts != probe.Rounds*probe.Writers || race.Winners[0] != probe.Rounds {
		t.Fatalf("%+v", race)
	}
}

// A store that applies a replace and answers that it was refused has no
// winner, though writers were refused as if there had been one.
func TestProbeRaceNoWinnerButRefused(t *testing.T) {
	_, err := probe.Run(context.Background(), riggedStore{mem.New(), func(op, key string) bool {
		return op == "replace" && strings.Contains(key, "-replace-") && !strings.Contains(key, "-delete-replace-")
	}, providers.ErrPrecondition, true}, "probe/")
	if !errors.Is(err, probe.ErrStoreUnsafe) || !strings.Contains(err.Error(), "replace race (If-Match is not atomic): 8 of 8 rounds of 8 writers went wrong, first round 0: no writer succeeded, yet 8 were refused as if one had") {
		t.Fatalf("%v, want the replace race unsafe", err)
	}
	if strings.Contains(err.Error(), "delete-replace race") {
		t.Fatalf("%v: the delete-replace race went wrong too", err)
	}
}

// A store that answers success to a conditional delete of a missing object
// (as some S3-compatible servers do) removes nothing: reported, not unsafe.
func TestProbeDeleteOfMissingSucceeds(t *testing.T) {
	r, err := probe.Run(context.Background(), riggedStore{mem.New(), func(op, key string) bool {
		return op == "delete" && strings.HasSuffix(key, "-missing")
	}, nil, false}, "probe/")
	safeReport(t, r, err, "success")
}

// racyDeleteStore checks a conditional delete's version, then deletes
// whatever is there a moment later, as versitygw 1.8.0 was seen to do
// against a concurrent conditional replace.
type racyDeleteStore struct {
	*providers.Bucket
	mu    sync.Mutex
	races map[string]*deleteRace
}

// deleteRace makes one round of the probe's delete-replace race interleave
// the same way however the goroutines are scheduled: the replace lands
// between the delete's check and its delete.
type deleteRace struct{ checked, replaced chan struct{} }

func (s *racyDeleteStore) race(key string) *deleteRace {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.races == nil {
		s.races = map[string]*deleteRace{}
	}
	r := s.races[key]
	if r == nil {
		r = &deleteRace{checked: make(chan struct{}), replaced: make(chan struct{})}
		s.races[key] = r
	}
	return r
}

func (s *racyDeleteStore) Replace(ctx context.Context, key string, data []byte, md map[string]string, v string) (providers.WriteResult, error) {
	if !strings.Contains(key, probe.RaceDeleteReplace) {
		return s.Bucket.Replace(ctx, key, data, md, v)
	}
	r := s.race(key)
	<-r.checked
	res, err := s.Bucket.Replace(ctx, key, data, md, v)
	if err == nil {
		close(r.replaced)
	}
	return res, err
}

func (s *racyDeleteStore) Delete(ctx context.Context, key, ifVersion string) error {
	a, err := s.Stat(ctx, key)
	if err != nil {
		return err
	}
	if a.Version != ifVersion {
		return providers.ErrPrecondition
	}
	if strings.Contains(key, probe.RaceDeleteReplace) {
		r := s.race(key)
		s.mu.Lock()
		select {
		case <-r.checked:
		default:
			close(r.checked)
		}
		s.mu.Unlock()
		<-r.replaced
	}
	if a, err = s.Stat(ctx, key); err != nil {
		return err
	}
	return s.Bucket.Delete(ctx, key, a.Version)
}

// A conditional delete that is not atomic against a concurrent replace is a
// caveat, not a reason to call the store unsafe: objlease's conditional
// deletes only collect orphaned batch objects, which nothing writes again.
func TestProbeRacyDeleteIsACaveat(t *testing.T) {
	r, err := probe.Run(context.Background(), &racyDeleteStore{Bucket: mem.New()}, "probe/")
	if err != nil {
		t.Fatalf("store whose conditional deletes race replaces: %v, want safe with a caveat", err)
	}
	if len(r.Caveats) == 0 || !strings.Contains(r.Caveats[0], "delete-replace race") {
		t.Fatalf("caveats %q, want the delete-replace race", r.Caveats)
	}
}

// deleteIgnoringStore enforces If-None-Match and If-Match on writes and
// ignores If-Match on DELETE, as MinIO does (a stale conditional delete
// removes the object).
type deleteIgnoringStore struct{ *providers.Bucket }

func (s deleteIgnoringStore) Delete(ctx context.Context, key, _ string) error {
	a, err := s.Stat(ctx, key)
	if errors.Is(err, providers.ErrNotFound) {
		return nil // a DELETE of a missing key succeeds
	}
	if err != nil {
		return err
	}
	return s.Bucket.Delete(ctx, key, a.Version)
}

// A store that ignores the condition of a DELETE and enforces those of
// writes keeps leases exclusive (no lease write is a delete; a fenced
// delete writes a tombstone): the store is safe, the report names the
// capability it lacks, and a caveat says so.
func TestProbeUnconditionalDeleteIsACaveat(t *testing.T) {
	m := mem.New()
	r, err := probe.Run(context.Background(), deleteIgnoringStore{m}, "probe/")
	if err != nil {
		t.Fatalf("store that ignores If-Match on DELETE only: %v, want safe with a caveat", err)
	}
	if !r.DeleteUnconditional {
		t.Errorf("DeleteUnconditional is false on a store whose stale delete succeeded")
	}
	if len(r.Caveats) == 0 || !strings.Contains(r.Caveats[0], "delete with a stale version succeeded") {
		t.Errorf("caveats %q, want the stale delete first", r.Caveats)
	}
	if page, _ := m.List(context.Background(), "", "", 1000); len(page.Objects) != 0 {
		t.Fatalf("probe left %d objects behind", len(page.Objects))
	}
	r, err = probe.Run(context.Background(), mem.New(), "probe/")
	if err != nil || r.DeleteUnconditional {
		t.Fatalf("correct store: %v, DeleteUnconditional %v", err, r.DeleteUnconditional)
	}
}

// conditionsUnsupported refuses every conditional write, as S3-compatible
// servers without conditional writes do (501 NotImplemented).
type conditionsUnsupported struct{ *providers.Bucket }

func (s conditionsUnsupported) refuse(op, key string) error {
	return providers.Wrap(op, key, fmt.Errorf("%w: store does not implement conditional writes", errors.ErrUnsupported), errors.New("501 NotImplemented"))
}

func (s conditionsUnsupported) Create(_ context.Context, key string, _ []byte, _ map[string]string) (providers.WriteResult, error) {
	return providers.WriteResult{}, s.refuse("create", key)
}

func (s conditionsUnsupported) Replace(_ context.Context, key string, _ []byte, _ map[string]string, _ string) (providers.WriteResult, error) {
	return providers.WriteResult{}, s.refuse("replace", key)
}

func (s conditionsUnsupported) Delete(_ context.Context, key, _ string) error {
	return s.refuse("delete", key)
}

// TestBadInputUnsafeStores: Run names the probe object, lists every ignored
// precondition, and leaves the user's objects under the prefix untouched.
func TestBadInputUnsafeStores(t *testing.T) {
	ctx := context.Background()
	t.Run("ignores preconditions", func(t *testing.T) {
		m := mem.New()
		user, err := m.Create(ctx, "leases/keep-me", []byte("user data"), nil)
		if err != nil {
			t.Fatal(err)
		}
		r, err := probe.Run(ctx, ignoringStore{m}, "leases/")
		if !errors.Is(err, probe.ErrStoreUnsafe) || !strings.Contains(err.Error(), `"leases/`) || !strings.Contains(err.Error(), "objlease-probe-") {
			t.Fatalf("Probe: %v, want ErrStoreUnsafe naming the probe object", err)
		}
		for _, want := range []string{"If-None-Match: * ignored", "If-Match ignored", "replace of a missing object succeeded"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Probe's error %q does not say %q", err, want)
			}
		}
		// The stale delete is a caveat: no lease or fenced write deletes.
		if !r.DeleteUnconditional {
			t.Errorf("Probe did not report the stale delete that succeeded")
		}
		page, _ := m.List(ctx, "", "", 100)
		if len(page.Objects) != 1 || page.Objects[0].Version != user.Version {
			t.Fatalf("after Probe the store holds %+v, want only the untouched user object", page.Objects)
		}
	})
	t.Run("refuses conditional writes", func(t *testing.T) {
		m := mem.New()
		_, err := probe.Run(ctx, conditionsUnsupported{m}, "leases/")
		if !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), `"leases/`) || !strings.Contains(err.Error(), "objlease-probe-") || !strings.Contains(err.Error(), "conditional writes") {
			t.Fatalf("Run: %v, want errors.ErrUnsupported naming the probe object", err)
		}
		if page, _ := m.List(ctx, "", "", 100); len(page.Objects) != 0 {
			t.Fatalf("objects written: %+v", page.Objects)
		}
	})
}
