package recordwrite_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/objlease/objlease/internal/recordwrite"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/mem"
)

const key = "leases/k"

// What a scripted write does, one per write in turn; once the script is
// done, writes go through.
type step int

const (
	lose     step = iota + 1 // lands, and its reply is lost
	drop                     // lost on the way: never lands, outcome unknown
	conflict                 // refused as S3's 409: nothing written
	other                    // someone else's write lands instead, and the reply is lost
)

// scriptedStore is an in-memory store whose writes follow a script.
type scriptedStore struct {
	providers.Store
	mu     sync.Mutex
	script []step
	writes []time.Time // when each write was sent
}

func (s *scriptedStore) Create(ctx context.Context, k string, data []byte, md map[string]string) (providers.WriteResult, error) {
	return s.write(ctx, k, data, func(d []byte) (providers.WriteResult, error) { return s.Store.Create(ctx, k, d, md) })
}

func (s *scriptedStore) Replace(ctx context.Context, k string, data []byte, md map[string]string, v string) (providers.WriteResult, error) {
	return s.write(ctx, k, data, func(d []byte) (providers.WriteResult, error) { return s.Store.Replace(ctx, k, d, md, v) })
}

func (s *scriptedStore) write(_ context.Context, k string, data []byte, do func([]byte) (providers.WriteResult, error)) (providers.WriteResult, error) {
	s.mu.Lock()
	s.writes = append(s.writes, time.Now())
	var st step
	if len(s.script) > 0 {
		st, s.script = s.script[0], s.script[1:]
	}
	s.mu.Unlock()
	unknown := providers.Wrap("write", k, providers.ErrUnknownOutcome, errors.New("connection reset"))
	switch st {
	case lose:
		if _, err := do(data); err != nil {
			return providers.WriteResult{}, err
		}
		return providers.WriteResult{}, unknown
	case drop:
		return providers.WriteResult{}, unknown
	case conflict:
		return providers.WriteResult{}, providers.Wrap("write", k, providers.ErrConflict, nil)
	case other:
		if _, err := do([]byte("someone else's")); err != nil {
			return providers.WriteResult{}, err
		}
		return providers.WriteResult{}, unknown
	}
	return do(data)
}

func (s *scriptedStore) sent() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.writes...)
}

// setup returns a store holding "before" at key, its version, and a
// writer on it whose waits between re-reads are recorded in sleeps.
func setup(t *testing.T, script ...step) (*scriptedStore, string, *recordwrite.Writer, *[]time.Duration) {
	t.Helper()
	base := mem.New()
	res, err := base.Create(context.Background(), key, []byte("before"), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &scriptedStore{Store: base, script: script}
	var sleeps []time.Duration
	w := &recordwrite.Writer{
		Store: s, Key: key, Noun: "lease",
		Permanent: func(err error) bool { return errors.Is(err, providers.ErrNoBucket) },
		Sleep: func(ctx context.Context, d time.Duration) error {
			sleeps = append(sleeps, d)
			return ctx.Err()
		},
	}
	return s, res.Version, w, &sleeps
}

// readBack recognises body at key as the write's own.
func readBack(store providers.Store, body []byte) func(context.Context) (recordwrite.Found, error) {
	return func(ctx context.Context) (recordwrite.Found, error) {
		obj, err := store.Get(ctx, key, 0)
		if errors.Is(err, providers.ErrNotFound) {
			return recordwrite.Found{}, nil
		}
		if err != nil {
			return recordwrite.Found{}, err
		}
		f := recordwrite.Found{Version: obj.Version, Own: bytes.Equal(obj.Data, body)}
		if f.Own {
			f.Result = providers.WriteResult{Version: obj.Version}
		}
		return f, nil
	}
}

func TestWriteGoesThrough(t *testing.T) {
	s, v, w, _ := setup(t)
	r, err := w.Write(context.Background(), []byte("mine"), v, readBack(s, []byte("mine")))
	if err != nil || r.Uncertain || r.ReadBack || r.Version == "" || r.Version == v {
		t.Fatalf("Write: %+v, %v; want written from the store's reply", r, err)
	}
}

func TestLostReplyLandedIsFoundByReadingBack(t *testing.T) {
	s, v, w, _ := setup(t, lose)
	var logged []string
	w.Log = func(level slog.Level, msg string, _ ...any) { logged = append(logged, level.String()+" "+msg) }
	r, err := w.Write(context.Background(), []byte("mine"), v, readBack(s, []byte("mine")))
	if err != nil || !r.Uncertain || !r.ReadBack || r.Version == "" || r.Version == v {
		t.Fatalf("Write: %+v, %v; want landed, found by reading back", r, err)
	}
	if n := len(s.sent()); n != 1 {
		t.Fatalf("%d writes sent, want 1", n)
	}
	if len(logged) != 1 || logged[0] != "WARN write outcome unknown; re-reading" {
		t.Fatalf("logged %q", logged)
	}
}

func TestUnchangedIsSentAgain(t *testing.T) {
	s, v, w, _ := setup(t, drop, drop)
	r, err := w.Write(context.Background(), []byte("mine"), v, readBack(s, []byte("mine")))
	if err != nil || !r.Uncertain || r.ReadBack {
		t.Fatalf("Write: %+v, %v; want the third attempt written", r, err)
	}
	if n := len(s.sent()); n != 3 {
		t.Fatalf("%d writes sent, want 3", n)
	}
}

func TestUnchangedAfterEveryAttemptReportsTheCause(t *testing.T) {
	s, v, w, _ := setup(t, drop, drop, drop, drop)
	_, err := w.Write(context.Background(), []byte("mine"), v, readBack(s, []byte("mine")))
	if !errors.Is(err, providers.ErrUnknownOutcome) || errors.Is(err, recordwrite.ErrAmbiguous) {
		t.Fatalf("Write: %v, want the store's ErrUnknownOutcome", err)
	}
	if n := len(s.sent()); n != recordwrite.Attempts {
		t.Fatalf("%d writes sent, want %d", n, recordwrite.Attempts)
	}
}

func TestCreateUnchangedWhileAbsent(t *testing.T) {
	s := &scriptedStore{Store: mem.New(), script: []step{drop}}
	w := &recordwrite.Writer{Store: s, Key: key, Noun: "lease"}
	r, err := w.Write(context.Background(), []byte("mine"), "", readBack(s, []byte("mine")))
	if err != nil || r.ReadBack || len(s.sent()) != 2 {
		t.Fatalf("Write: %+v, %v after %d writes; want created by the second", r, err, len(s.sent()))
	}
}

// A retry refused because the earlier attempt landed late is resolved by
// reading back too.
func TestLateOwnWriteIsFound(t *testing.T) {
	base := mem.New()
	res, err := base.Create(context.Background(), key, []byte("before"), nil)
	if err != nil {
		t.Fatal(err)
	}
	late := &lateStore{Store: base}
	w := &recordwrite.Writer{Store: late, Key: key, Noun: "lease",
		Sleep: func(context.Context, time.Duration) error { return nil }}
	// The first re-read sees nothing changed; the first attempt then lands
	// before the second is sent, which is refused.
	reads := 0
	rb := readBack(base, []byte("mine"))
	r, err := w.Write(context.Background(), []byte("mine"), res.Version, func(ctx context.Context) (recordwrite.Found, error) {
		reads++
		f, err := rb(ctx)
		if reads == 1 {
			late.land(ctx, res.Version)
		}
		return f, err
	})
	if err != nil || !r.ReadBack || reads != 2 {
		t.Fatalf("Write: %+v, %v after %d reads; want the late write found", r, err, reads)
	}
}

// lateStore loses its first Replace on the way and applies it later, when
// land is called.
type lateStore struct {
	providers.Store
	n    int
	body []byte
}

func (s *lateStore) Replace(ctx context.Context, k string, data []byte, md map[string]string, v string) (providers.WriteResult, error) {
	s.n++
	if s.n == 1 {
		s.body = data
		return providers.WriteResult{}, providers.Wrap("replace", k, providers.ErrUnknownOutcome, nil)
	}
	return s.Store.Replace(ctx, k, data, md, v)
}

func (s *lateStore) land(ctx context.Context, v string) {
	if _, err := s.Store.Replace(ctx, key, s.body, nil, v); err != nil {
		panic(err)
	}
}

func TestSomeoneElsesWriteIsARefusal(t *testing.T) {
	s, v, w, _ := setup(t, other)
	_, err := w.Write(context.Background(), []byte("mine"), v, readBack(s, []byte("mine")))
	if !errors.Is(err, providers.ErrPrecondition) || errors.Is(err, recordwrite.ErrAmbiguous) {
		t.Fatalf("Write: %v, want ErrPrecondition", err)
	}
	if n := len(s.sent()); n != 1 {
		t.Fatalf("%d writes sent, want 1", n)
	}
}

func TestUnusableObjectEndsResolving(t *testing.T) {
	s, v, w, sleeps := setup(t, lose)
	errBad := errors.New("not a record")
	w.Unusable = func(err error) bool { return errors.Is(err, errBad) }
	_, err := w.Write(context.Background(), []byte("mine"), v, func(context.Context) (recordwrite.Found, error) {
		return recordwrite.Found{}, errBad
	})
	if err != errBad || len(*sleeps) != 0 || len(s.sent()) != 1 {
		t.Fatalf("Write: %v after %d waits; want the read's error as it is, at once", err, len(*sleeps))
	}
}

func TestPermanentReadErrorEndsResolvingAtOnce(t *testing.T) {
	s, v, w, sleeps := setup(t, lose)
	_, err := w.Write(context.Background(), []byte("mine"), v, func(context.Context) (recordwrite.Found, error) {
		return recordwrite.Found{}, providers.Wrap("get", key, providers.ErrNoBucket, nil)
	})
	if !errors.Is(err, recordwrite.ErrAmbiguous) || !errors.Is(err, providers.ErrNoBucket) ||
		!errors.Is(err, providers.ErrUnknownOutcome) || !strings.HasPrefix(err.Error(), `lease "leases/k": `) {
		t.Fatalf("Write: %v, want ErrAmbiguous naming the key, matching the cause and the read's error", err)
	}
	if len(*sleeps) != 0 || len(s.sent()) != 1 {
		t.Fatalf("%d waits, %d writes; want none and 1", len(*sleeps), len(s.sent()))
	}
}

// Re-reads that fail for a while back off from ResolveWait, doubling to a
// second; the context's end leaves the outcome unknown.
func TestContextEndsResolving(t *testing.T) {
	s, v, w, sleeps := setup(t, lose)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w.Sleep = func(ctx context.Context, d time.Duration) error {
		*sleeps = append(*sleeps, d)
		if len(*sleeps) == 7 {
			cancel()
		}
		return ctx.Err()
	}
	_, err := w.Write(ctx, []byte("mine"), v, func(context.Context) (recordwrite.Found, error) {
		return recordwrite.Found{}, providers.Wrap("get", key, providers.ErrThrottled, nil)
	})
	if !errors.Is(err, recordwrite.ErrAmbiguous) || !errors.Is(err, providers.ErrUnknownOutcome) ||
		!strings.HasPrefix(err.Error(), `lease "leases/k": `) {
		t.Fatalf("Write: %v, want ErrAmbiguous naming the key and matching the cause", err)
	}
	want := []time.Duration{50, 100, 200, 400, 800, 1000, 1000}
	for i := range want {
		want[i] *= time.Millisecond
	}
	if !equal(*sleeps, want) {
		t.Fatalf("waits %v, want %v", *sleeps, want)
	}
	if len(s.sent()) != 1 {
		t.Fatalf("%d writes, want 1", len(s.sent()))
	}
}

func equal(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A write refused as conflicting (S3's 409) waits ConflictWait, doubling,
// jittered, on Go's timers, before it is sent again; the re-reads between
// do not wait at all.
func TestConflictWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, v, w, sleeps := setup(t, conflict, conflict, conflict)
		var jittered []time.Duration
		w.Jitter = func(d time.Duration) time.Duration {
			jittered = append(jittered, d)
			return d * 9 / 10
		}
		var logged []string
		w.Log = func(level slog.Level, msg string, _ ...any) { logged = append(logged, level.String()+" "+msg) }
		start := time.Now()
		r, err := w.Write(context.Background(), []byte("mine"), v, readBack(s, []byte("mine")))
		if !errors.Is(err, providers.ErrConflict) || r.Uncertain {
			t.Fatalf("Write: %+v, %v; want the third 409", r, err)
		}
		sent := s.sent()
		if len(sent) != 3 || sent[1].Sub(start) != 27*time.Millisecond || sent[2].Sub(sent[1]) != 54*time.Millisecond {
			t.Fatalf("writes sent at %v after start, want 0, 27ms, 81ms", offsets(start, sent))
		}
		if !equal(jittered, []time.Duration{30 * time.Millisecond, 60 * time.Millisecond}) || len(*sleeps) != 0 {
			t.Fatalf("conflict waits %v, re-read waits %v", jittered, *sleeps)
		}
		if len(logged) != 3 || logged[0] != "INFO write refused by a racing write; re-reading" {
			t.Fatalf("logged %q", logged)
		}
	})
}

func offsets(start time.Time, ts []time.Time) []time.Duration {
	var d []time.Duration
	for _, t := range ts {
		d = append(d, t.Sub(start))
	}
	return d
}

// The default jitter keeps a conflict's wait in [0.8, 1.0) of it.
func TestConflictWaitDefaultJitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, v, w, _ := setup(t, conflict)
		start := time.Now()
		if _, err := w.Write(context.Background(), []byte("mine"), v, readBack(s, []byte("mine"))); err != nil {
			t.Fatal(err)
		}
		sent := s.sent()
		if d := sent[1].Sub(start); d < 24*time.Millisecond || d >= 30*time.Millisecond {
			t.Fatalf("second write sent %v after the first, want in [24ms, 30ms)", d)
		}
	})
}

func TestConflictWaitEndsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, v, w, _ := setup(t, conflict)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		_, err := w.Write(ctx, []byte("mine"), v, readBack(s, []byte("mine")))
		if !errors.Is(err, context.DeadlineExceeded) || len(s.sent()) != 1 {
			t.Fatalf("Write: %v after %d writes, want the context's end after 1", err, len(s.sent()))
		}
	})
}

func TestNextToken(t *testing.T) {
	if n, err := recordwrite.NextToken("lease", key, 41); n != 42 || err != nil {
		t.Fatalf("NextToken(41) = %d, %v", n, err)
	}
	_, err := recordwrite.NextToken("lease", key, math.MaxUint64)
	if !errors.Is(err, recordwrite.ErrTokenExhausted) || !strings.HasPrefix(err.Error(), `lease "leases/k": `) {
		t.Fatalf("NextToken(max) = %v, want ErrTokenExhausted naming the key", err)
	}
}

func TestBackoff(t *testing.T) {
	for n, want := range []time.Duration{50, 100, 200, 400, 800, 1000, 1000} {
		if got := recordwrite.Backoff(50*time.Millisecond, time.Second, n); got != want*time.Millisecond {
			t.Errorf("Backoff(50ms, 1s, %d) = %v, want %v", n, got, want*time.Millisecond)
		}
	}
	if got := recordwrite.Backoff(time.Millisecond, time.Hour, 100); got != 1024*time.Millisecond {
		t.Errorf("Backoff(1ms, 1h, 100) = %v, want 1.024s (doubled at most 10 times)", got)
	}
}
