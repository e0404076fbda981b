package faulty_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/driver"
	"github.com/objlease/objlease/providers/faulty"
	"github.com/objlease/objlease/providers/mem"
	"github.com/objlease/objlease/providers/providertest"
)

// faultyStore is the Bucket over a faulty driver, with the driver at hand
// for its counters.
type faultyStore struct {
	*providers.Bucket
	f *faulty.Driver
}

func newFaulty(t *testing.T, inner driver.Driver, cfg faulty.Config) faultyStore {
	t.Helper()
	f, err := faulty.New(inner, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return faultyStore{providers.NewBucket(f), f}
}

// newMem returns a memory store and its driver, for a faulty driver over
// it while the test looks at the store directly.
func newMem() (*providers.Bucket, driver.Driver) {
	d := mem.NewDriver()
	return providers.NewBucket(d), d
}

// Without faults configured the wrapper must be invisible.
func TestConformanceWithoutFaults(t *testing.T) {
	f1, err := faulty.New(mem.NewDriver(), faulty.Config{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	f2, err := faulty.New(mem.NewDriver(), faulty.Config{Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	providertest.Run(t, providertest.Config{Bucket: providers.NewBucket(f1), MissingBucket: providers.NewBucket(f2), CreatesBuckets: true})
}

// writeOp runs one write of op against s on key "k", whose object (if
// any) is at version v.
func writeOp(s providers.Store, op faulty.Op, v string) error {
	ctx := context.Background()
	var err error
	switch op {
	case faulty.Create:
		_, err = s.Create(ctx, "k", []byte("new"), nil)
	case faulty.Replace:
		_, err = s.Replace(ctx, "k", []byte("new"), nil, v)
	case faulty.Delete:
		err = s.Delete(ctx, "k", v)
	}
	return err
}

// seed puts the object a write of op needs and returns its version.
func seed(t *testing.T, m *providers.Bucket, op faulty.Op) string {
	t.Helper()
	if op == faulty.Create {
		return ""
	}
	res, err := m.Create(context.Background(), "k", []byte("old"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return res.Version
}

// contents returns what m holds at "k" ("" if absent) and its version.
func contents(t *testing.T, m *providers.Bucket) (string, string) {
	t.Helper()
	o, err := m.Get(context.Background(), "k", 0)
	if errors.Is(err, providers.ErrNotFound) {
		return "", ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(o.Data), o.Version
}

func checkInjected(t *testing.T, err error, op faulty.Op, sentinel error) {
	t.Helper()
	var pe *providers.Error
	if !errors.Is(err, sentinel) || !errors.Is(err, faulty.ErrInjected) || !errors.As(err, &pe) || pe.Op != string(op) || pe.Key != "k" {
		t.Fatalf("%s: error %v, want an injected %v naming %s of \"k\"", op, err, sentinel, op)
	}
}

func TestRefusalsApplyNothing(t *testing.T) {
	for _, tc := range []struct {
		kind     faulty.Kind
		rates    faulty.Rates
		sentinel error
	}{
		{faulty.KindPrecondition, faulty.Rates{Precondition: 1}, providers.ErrPrecondition},
		{faulty.KindConflict, faulty.Rates{Conflict: 1}, providers.ErrConflict},
		{faulty.KindThrottled, faulty.Rates{Throttled: 1}, providers.ErrThrottled},
		{faulty.KindUnknown, faulty.Rates{Unknown: 1}, providers.ErrUnknownOutcome},
	} {
		for _, op := range []faulty.Op{faulty.Create, faulty.Replace, faulty.Delete} {
			t.Run(fmt.Sprintf("%v/%s", tc.kind, op), func(t *testing.T) {
				m, md := newMem()
				v := seed(t, m, op)
				beforeData, beforeVersion := contents(t, m)
				s := newFaulty(t, md, faulty.Config{Seed: 7, Ops: map[faulty.Op]faulty.Rates{op: tc.rates}})
				checkInjected(t, writeOp(s, op, v), op, tc.sentinel)
				if d, ver := contents(t, m); d != beforeData || ver != beforeVersion {
					t.Fatalf("%s was applied: object is %q at version %s, was %q at %s", op, d, ver, beforeData, beforeVersion)
				}
				if c := s.f.Counts(); c[tc.kind] != 1 || c.Total() != 1 {
					t.Fatalf("counts %v, want one %v", c, tc.kind)
				}
			})
		}
	}
	// Reads meet refusals too, except those that only make sense for writes.
	s := newFaulty(t, mem.NewDriver(), faulty.Config{Seed: 7, Default: faulty.Rates{Precondition: 0.5, Throttled: 0.5}})
	for range 20 {
		if _, err := s.Get(context.Background(), "k", 0); !errors.Is(err, providers.ErrThrottled) && !errors.Is(err, providers.ErrNotFound) {
			t.Fatalf("get: %v, want throttled or not found", err)
		}
	}
	if c := s.f.Counts(); c[faulty.KindPrecondition] != 0 || c[faulty.KindThrottled] == 0 {
		t.Fatalf("reads: counts %v: want no precondition faults and some throttling", c)
	}
}

func TestLostReplyAfterApply(t *testing.T) {
	for _, tc := range []struct {
		op   faulty.Op
		want string // object after the write; "" = absent
	}{
		{faulty.Create, "new"},
		{faulty.Replace, "new"},
		{faulty.Delete, ""},
	} {
		t.Run(string(tc.op), func(t *testing.T) {
			m, md := newMem()
			v := seed(t, m, tc.op)
			s := newFaulty(t, md, faulty.Config{Seed: 3, Default: faulty.Rates{LostReply: 1}})
			checkInjected(t, writeOp(s, tc.op, v), tc.op, providers.ErrUnknownOutcome)
			if got, _ := contents(t, m); got != tc.want {
				t.Fatalf("%s whose reply was lost: object %q, want %q (the write must have been applied)", tc.op, got, tc.want)
			}
			// Repeating the write meets the first one's effect: the store
			// itself refuses it, and there is no reply to lose.
			if err := writeOp(s, tc.op, v); !errors.Is(err, providers.ErrPrecondition) || errors.Is(err, faulty.ErrInjected) {
				t.Fatalf("%s repeated: %v, want the store's own precondition failure", tc.op, err)
			}
			if c := s.f.Counts(); c[faulty.KindLostReply] != 1 || c.Total() != 1 {
				t.Fatalf("counts %v, want one lost reply", c)
			}
		})
	}
}

func TestStall(t *testing.T) {
	cfg := faulty.Config{Seed: 1, Default: faulty.Rates{Stall: 1}}
	t.Run("released", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m, md := newMem()
			s := newFaulty(t, md, cfg)
			done := make(chan error, 1)
			go func() {
				_, err := s.Create(context.Background(), "k", []byte("new"), nil)
				done <- err
			}()
			synctest.Wait()
			select {
			case err := <-done:
				t.Fatalf("stalled create returned %v before its release", err)
			default:
			}
			if got, _ := contents(t, m); got != "" {
				t.Fatal("a stalled create reached the store")
			}
			s.f.ReleaseStalls()
			if err := <-done; err != nil {
				t.Fatalf("released create: %v", err)
			}
			if got, _ := contents(t, m); got != "new" {
				t.Fatalf("released create: object %q", got)
			}
		})
	})
	t.Run("context ends", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m, md := newMem()
			s := newFaulty(t, md, cfg)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			start := time.Now()
			_, err := s.Create(ctx, "k", []byte("new"), nil)
			if !errors.Is(err, providers.ErrUnknownOutcome) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("stalled create whose context ended: %v, want an unknown outcome caused by the deadline", err)
			}
			if waited := time.Since(start); waited != time.Minute {
				t.Fatalf("stalled for %v, want until the deadline (1m)", waited)
			}
			if got, _ := contents(t, m); got != "" {
				t.Fatal("a stalled create whose context ended reached the store")
			}
			// A request whose context is already done is refused before
			// it is sent: it meets no fault.
			if _, err := s.Get(ctx, "k", 0); !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, providers.ErrUnknownOutcome) {
				t.Fatalf("get with an ended context: %v, want the context's error", err)
			}
			if c, n := s.f.Counts(), s.f.Requests(); c[faulty.KindStall] != 1 || n != 1 {
				t.Fatalf("counts %v after %d requests, want one stall after one request", c, n)
			}
		})
	})
}

func TestDelay(t *testing.T) {
	var slept []time.Duration
	sleep := func(ctx context.Context, d time.Duration) error { slept = append(slept, d); return nil }
	md := mem.NewDriver()
	s := newFaulty(t, md, faulty.Config{Seed: 5, Default: faulty.Rates{Delay: 1}, MinDelay: 10 * time.Millisecond, MaxDelay: 20 * time.Millisecond, Sleep: sleep})
	ctx := context.Background()
	for i := range 50 {
		slept = slept[:0]
		if _, err := s.Create(ctx, fmt.Sprint("k", i), nil, nil); err != nil {
			t.Fatal(err)
		}
		var total time.Duration
		for _, d := range slept {
			total += d
		}
		if total < 10*time.Millisecond || total > 20*time.Millisecond {
			t.Fatalf("request %d delayed %v in total (%v), want within [10ms, 20ms]", i, total, slept)
		}
	}
	if c := s.f.Counts(); c[faulty.KindDelay] != 50 || c.Total() != 50 {
		t.Fatalf("counts %v, want 50 delays", c)
	}

	// The default sleep is real time; in a bubble that time is simulated.
	synctest.Test(t, func(t *testing.T) {
		s := newFaulty(t, mem.NewDriver(), faulty.Config{Seed: 5, Default: faulty.Rates{Delay: 1}, MinDelay: time.Second, MaxDelay: time.Second})
		start := time.Now()
		if _, err := s.Create(ctx, "k", nil, nil); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != time.Second {
			t.Fatalf("delayed %v, want 1s", d)
		}
	})

	// A context that ends during the delay cuts the request short: before
	// the store, nothing is applied; after it, the write is applied but
	// its outcome is unknown to the caller. The split is drawn per request.
	synctest.Test(t, func(t *testing.T) {
		m, md := newMem()
		s := newFaulty(t, md, faulty.Config{Seed: 5, Default: faulty.Rates{Delay: 1}, MinDelay: time.Hour, MaxDelay: time.Hour})
		applied, notApplied := 0, 0
		for i := range 20 {
			key := fmt.Sprint("k", i)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
			_, err := s.Create(ctx, key, []byte("new"), nil)
			cancel()
			if !errors.Is(err, providers.ErrUnknownOutcome) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("create cut short: %v, want an unknown outcome caused by the deadline", err)
			}
			if _, err := m.Stat(context.Background(), key); err == nil {
				applied++
			} else {
				notApplied++
			}
		}
		if applied == 0 || notApplied == 0 {
			t.Fatalf("of 20 writes cut short, %d were applied and %d not: want both cases", applied, notApplied)
		}
	})
}

// The same seed and the same requests meet the same faults.
func TestDeterministic(t *testing.T) {
	cfg := faulty.Config{Seed: 42, Default: faulty.Rates{Precondition: 0.1, Conflict: 0.1, Throttled: 0.1, Unknown: 0.1, LostReply: 0.1}}
	run := func(cfg faulty.Config) (string, faulty.Counts) {
		s := newFaulty(t, mem.NewDriver(), cfg)
		var trace bytes.Buffer
		ctx := context.Background()
		for i := range 300 {
			key := fmt.Sprint("k", i%7)
			var err error
			switch i % 3 {
			case 0:
				_, err = s.Create(ctx, key, []byte{byte(i)}, nil)
			case 1:
				_, err = s.Get(ctx, key, 0)
			case 2:
				var a *providers.Attrs
				if a, err = s.Stat(ctx, key); err == nil {
					_, err = s.Replace(ctx, key, []byte{byte(i)}, nil, a.Version)
				}
			}
			fmt.Fprintln(&trace, i, err)
		}
		return trace.String(), s.f.Counts()
	}
	t1, c1 := run(cfg)
	t2, c2 := run(cfg)
	if t1 != t2 || c1 != c2 {
		t.Fatal("two runs with the same seed met different faults")
	}
	cfg.Seed++
	if t3, _ := run(cfg); t3 == t1 {
		t.Fatal("another seed met exactly the same faults")
	}
	// Each error rate is 10 %; 200 writes and reads must show each kind.
	for _, k := range []faulty.Kind{faulty.KindPrecondition, faulty.KindConflict, faulty.KindThrottled, faulty.KindUnknown, faulty.KindLostReply} {
		if c1[k] == 0 {
			t.Errorf("no %v fault in 300 requests at 10 %%: counts %v", k, c1)
		}
	}
}

func TestConfigValidated(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  faulty.Config
		want string
	}{
		{"rate above 1", faulty.Config{Default: faulty.Rates{Stall: 1.5}}, "rate 1.5 is not in [0, 1]"},
		{"negative rate", faulty.Config{Ops: map[faulty.Op]faulty.Rates{faulty.Get: {Delay: -0.1}}}, "get: rate -0.1"},
		{"sum above 1", faulty.Config{Default: faulty.Rates{Throttled: 0.6, Unknown: 0.6}}, "add up to 1.2"},
		{"write-only fault on a read", faulty.Config{Ops: map[faulty.Op]faulty.Rates{faulty.Stat: {LostReply: 0.1}}}, "stat: Precondition, Conflict and LostReply apply to writes only"},
		{"unknown op", faulty.Config{Ops: map[faulty.Op]faulty.Rates{"put": {}}}, `unknown operation "put"`},
		{"bad delays", faulty.Config{MinDelay: time.Second, MaxDelay: time.Millisecond}, "delay bounds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := faulty.New(mem.NewDriver(), tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// With CheckThenWrite the store enforces preconditions one request at a time
// and lets every writer of a concurrent race through.
func TestCheckThenWrite(t *testing.T) {
	cfg := faulty.Config{Seed: 1, CheckThenWrite: time.Millisecond}
	t.Run("sequential", func(t *testing.T) {
		ctx := context.Background()
		s := newFaulty(t, mem.NewDriver(), cfg)
		v1, err := s.Create(ctx, "k", []byte("1"), nil)
		if err != nil {
			t.Fatal(err)
		}
		v2, err := s.Replace(ctx, "k", []byte("2"), nil, v1.Version)
		if err != nil {
			t.Fatal(err)
		}
		for what, err := range map[string]error{
			"second create":      ignore(s.Create(ctx, "k", []byte("x"), nil)),
			"stale replace":      ignore(s.Replace(ctx, "k", []byte("x"), nil, v1.Version)),
			"stale delete":       s.Delete(ctx, "k", v1.Version),
			"replace of missing": ignore(s.Replace(ctx, "gone", []byte("x"), nil, v1.Version)),
			"delete of missing":  s.Delete(ctx, "gone", v1.Version),
		} {
			if !errors.Is(err, providers.ErrPrecondition) {
				t.Errorf("%s: %v, want ErrPrecondition", what, err)
			}
		}
		if err := s.Delete(ctx, "k", v2.Version); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Stat(ctx, "k"); !errors.Is(err, providers.ErrNotFound) {
			t.Fatalf("after delete: %v, want ErrNotFound", err)
		}
	})
	race := func(t *testing.T, op faulty.Op) {
		synctest.Test(t, func(t *testing.T) {
			m, md := newMem()
			s := newFaulty(t, md, cfg)
			v := seed(t, m, op)
			const writers = 4
			errs := make(chan error, writers)
			for range writers {
				go func() { errs <- writeOp(s, op, v) }()
			}
			for range writers {
				if err := <-errs; err != nil {
					t.Fatalf("%s race: %v, want every writer to succeed", op, err)
				}
			}
		})
	}
	for _, op := range []faulty.Op{faulty.Create, faulty.Replace, faulty.Delete} {
		t.Run(string(op)+" race", func(t *testing.T) { race(t, op) })
	}
	if _, err := faulty.New(mem.NewDriver(), faulty.Config{CheckThenWrite: -1}); err == nil {
		t.Error("a negative CheckThenWrite was accepted")
	}
}

func ignore(_ providers.WriteResult, err error) error { return err }
