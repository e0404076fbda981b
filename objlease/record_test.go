package objlease_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/providers"
)

func TestBadRecordsAreReportedAndKept(t *testing.T) {
	valid := `{"objlease":1,"name":"jobs/nightly","token":7,"holder":"x","nonce":"n","state":"held","ttl_ms":1000,"written_at":"2026-01-01T00:00:00Z","renewals":0}`
	for _, tc := range []struct {
		name, body string
		want       error
		reason     string
		forcedTok  uint64        // token after a forced acquire (1: only with a floor of 0, for nothing shows a token)
		forceWait  time.Duration // how long force waits first: its ttl_ms, else the client's TTL (10 s), × 1.01
	}{
		{"not JSON", "hello world", objlease.ErrBadRecord, "not JSON", 1, 10100 * time.Millisecond},
		{"foreign JSON", `{"kind":"config","token":41}`, objlease.ErrBadRecord, "not an objlease record", 42, 10100 * time.Millisecond},
		{"newer schema", `{"objlease":2,"token":9,"fancy":true}`, objlease.ErrNewerSchema, "schema 2", 10, 10100 * time.Millisecond},
		{"unknown state", strings.Replace(valid, `"held"`, `"zombie"`, 1), objlease.ErrBadRecord, `unknown state "zombie"`, 8, 1010 * time.Millisecond},
		{"token zero", strings.Replace(valid, `"token":7`, `"token":0`, 1), objlease.ErrBadRecord, "token is 0", 1, 1010 * time.Millisecond},
		{"unknown field", strings.Replace(valid, `"renewals":0`, `"renewals":0,"x":1`, 1), objlease.ErrBadRecord, "unknown field", 8, 1010 * time.Millisecond},
		{"trailing data", valid + `{}`, objlease.ErrBadRecord, "not JSON", 8, 1010 * time.Millisecond},
		{"oversized", `{"objlease":1,"pad":"` + strings.Repeat("x", objlease.MaxRecordSize) + `"}`, objlease.ErrBadRecord, "larger than", 1, 10100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			m, _ := newMem()
			if _, err := m.Create(ctx, "jobs/nightly", []byte(tc.body), nil); err != nil {
				t.Fatal(err)
			}
			clk := clock.NewFake(epoch)
			c := newClient(t, m, "a", clk)
			check := func(what string, err error) {
				t.Helper()
				var re *objlease.Error
				if !errors.Is(err, tc.want) || !errors.As(err, &re) || re.Key != "jobs/nightly" {
					t.Fatalf("%s: %v, want %v naming the key", what, err, tc.want)
				}
				if !strings.Contains(err.Error(), tc.reason) || !strings.Contains(err.Error(), `"jobs/nightly"`) {
					t.Fatalf("%s: message %q lacks %q or the key", what, err, tc.reason)
				}
			}
			_, err := c.TryAcquire(ctx)
			check("TryAcquire", err)
			_, err = c.Acquire(ctx) // permanent: must not wait
			check("Acquire", err)
			_, err = c.Break(ctx)
			check("Break", err)
			_, err = c.Inspect(ctx)
			check("Inspect", err)
			if obj, _ := m.Get(ctx, "jobs/nightly", 0); !bytes.Equal(obj.Data, []byte(tc.body)) {
				t.Fatal("the object was changed without force")
			}

			// Force waits out the object's TTL first: it may be a live
			// holder's record. Where nothing shows a token, it refuses
			// rather than start again from 1, unless told that no token
			// was ever issued.
			var floor *uint64
			if tc.forcedTok == 1 {
				f := newClient(t, m, "a", clk, func(o *objlease.Options) { o.Force = true })
				if _, err := f.TryAcquire(ctx); !errors.Is(err, objlease.ErrTokenUnknown) {
					t.Fatalf("forced acquire over an object that shows no token: %v, want ErrTokenUnknown", err)
				}
				floor = new(uint64(0))
			}
			f := newClient(t, m, "a", clk, func(o *objlease.Options) { o.Force, o.MinToken = true, floor })
			var he *objlease.Error
			if _, err := f.TryAcquire(ctx); !errors.Is(err, objlease.ErrHeld) || !errors.As(err, &he) || he.Wait != tc.forceWait || !strings.Contains(he.Reason, tc.want.Error()) {
				t.Fatalf("forced acquire at first sight: %v, want to wait %v", err, tc.forceWait)
			}
			clk.Advance(he.Wait)
			l, err := f.TryAcquire(ctx)
			if err != nil {
				t.Fatalf("forced acquire: %v", err)
			}
			defer l.Release(ctx)
			if l.Token() != tc.forcedTok {
				t.Fatalf("forced token %d, want %d", l.Token(), tc.forcedTok)
			}
		})
	}
}

func TestOptionsValidated(t *testing.T) {
	m, _ := newMem()
	for _, tc := range []struct {
		name string
		o    objlease.Options
		want string
	}{
		{"renew too slow", objlease.Options{TTL: 10 * time.Second, RenewInterval: 5 * time.Second}, "RenewInterval 5s must be at most half"},
		{"drift too big", objlease.Options{DriftBound: 0.5}, "DriftBound 0.5"},
		{"negative ttl", objlease.Options{TTL: -time.Second}, "must not be negative"},
		{"tiny ttl", objlease.Options{TTL: time.Microsecond}, "a TTL must be from 100ms to"},
		{"big data", objlease.Options{Data: make([]byte, objlease.MaxDataSize+1)}, "Data is"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := objlease.New(m, "k", tc.o)
			if !errors.Is(err, objlease.ErrInvalidOptions) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `"k"`) {
				t.Fatalf("%v, want ErrInvalidOptions mentioning %q and the key", err, tc.want)
			}
		})
	}
	if _, err := objlease.New(m, "k", objlease.Options{}); err != nil {
		t.Fatalf("zero options: %v", err)
	}
	slow := storeWithProps{m, providers.Properties{Name: "slow", MinWriteInterval: time.Second}}
	if _, err := objlease.New(slow, "k", objlease.Options{TTL: 2 * time.Second, RenewInterval: 500 * time.Millisecond}); err == nil || !strings.Contains(err.Error(), "minimum interval between writes") {
		t.Fatalf("renewing faster than the store allows: %v", err)
	}
}

type storeWithProps struct {
	providers.Store
	p providers.Properties
}

func (s storeWithProps) Properties() providers.Properties { return s.p }

func TestBreakBumpsTokenAndFencesHolder(t *testing.T) {
	ctx := context.Background()
	m, _ := newMem()
	clk := clock.NewFake(epoch)
	a := newClient(t, m, "a", clk)
	l, err := a.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	op := newClient(t, m, "operator", clk)
	tok, err := op.Break(ctx)
	if err != nil || tok != 2 {
		t.Fatalf("break: token %d, %v; want 2", tok, err)
	}
	if rec := readRecord(t, m); rec.State != objlease.StateReleased || rec.Token != 2 {
		t.Fatalf("after break: %+v", rec)
	}
	// The holder learns at its next renewal.
	if err := l.Renew(ctx); !errors.Is(err, objlease.ErrLeaseLost) {
		t.Fatalf("renew after break: %v, want ErrLeaseLost", err)
	}
	if !errors.Is(context.Cause(l.Context()), objlease.ErrLeaseLost) {
		t.Fatal("context not cancelled with ErrLeaseLost")
	}
	if err := l.Release(ctx); !errors.Is(err, objlease.ErrLeaseLost) {
		t.Fatalf("release after loss: %v", err)
	}
	if rec := readRecord(t, m); rec.Token != 2 || rec.Holder != "" {
		t.Fatalf("a lost holder's release changed the record: %+v", rec)
	}
	b := newClient(t, m, "b", clk)
	lb, err := b.TryAcquire(ctx)
	if err != nil || lb.Token() != 3 {
		t.Fatalf("after break: %v, token %d; want 3", err, lb.Token())
	}
	lb.Release(ctx)
	// Breaking an absent lease starts its record.
	if _, err := newClient(t, m, "x", clk).Break(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestAcquireWaitsForExpiry(t *testing.T) {
	ctx := context.Background()
	m, _ := newMem()
	dead := newClient(t, m, "dead", clock.NewFake(epoch))
	if _, err := dead.TryAcquire(ctx); err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(epoch)
	c := newClient(t, m, "c", clk)
	got := make(chan *objlease.Lease)
	go func() {
		l, err := c.Acquire(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	var elapsed time.Duration
	for {
		select {
		case l := <-got:
			defer l.Release(ctx)
			// The loop may have advanced the clock to the new lease's own
			// timers before the lease reached this channel: count to the
			// moment the acquiring write was sent, which its validity
			// (sent + TTL × (1 − b) − 100 ms) gives back.
			o := c.Options()
			sent := clk.Now().Add(l.ValidFor()).Add(-time.Duration(float64(o.TTL)*(1-o.DriftBound)) + 100*time.Millisecond)
			elapsed = sent.Sub(epoch)
			// Expiry at TTL × 1.01 = 10.1 s after the first sighting; the
			// waiter wakes 1 ms later, not a whole poll interval later.
			if elapsed < 10100*time.Millisecond || elapsed > 10100*time.Millisecond+2*time.Second {
				t.Fatalf("acquired after %v, want 10.1 s (+ at most one poll)", elapsed)
			}
			t.Logf("acquired after %v of fake time", elapsed)
			return
		default:
		}
		if next, ok := clk.NextDeadline(); ok {
			d := next.Sub(clk.Now())
			clk.Advance(d)
			elapsed += d
		} else {
			time.Sleep(time.Millisecond)
		}
	}
}

func TestAcquireHonoursContext(t *testing.T) {
	m, _ := newMem()
	if _, err := newClient(t, m, "a", clock.NewFake(epoch)).TryAcquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	clk := clock.NewFake(epoch)
	go func() { waitTimers(t, clk, 1); cancel() }()
	_, err := newClient(t, m, "b", clk).Acquire(ctx)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "held by") {
		t.Fatalf("%v, want context.Canceled with the last attempt", err)
	}
}
