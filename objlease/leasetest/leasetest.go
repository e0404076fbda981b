// Package leasetest runs the lease protocol's own tests against any store,
// so that every provider proves the protocol on its real backend, not only
// on the in-memory store. Expiry is driven by fake clocks: nothing sleeps.
package leasetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/probe"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Config says what the suite runs on, in the shape of providertest.Config.
type Config struct {
	// Store is the store under test, as its constructor returns it.
	Store providers.Store
	// Prefix starts every key the suite writes (unique per run, so shared
	// buckets are safe); may be "".
	Prefix string
}

// Run runs the protocol tests as subtests of t, on cfg.Store under
// cfg.Prefix.
func Run(t *testing.T, cfg Config) {
	if cfg.Store == nil {
		t.Fatal("leasetest: Config.Store is nil")
	}
	store, prefix := cfg.Store, cfg.Prefix
	newClient := func(t *testing.T, s providers.Store, key, holder string, clk clock.Clock) *objlease.Client {
		t.Helper()
		sess, err := objlease.NewSession(s, objlease.SessionOptions{Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		c, err := sess.Client(prefix+key, objlease.Options{TTL: 10 * time.Second, RenewInterval: 2 * time.Second, Holder: holder})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ctx := context.Background()

	t.Run("TokensIncreaseAcrossHolders", func(t *testing.T) {
		clk := clock.NewFake(epoch)
		a := newClient(t, store, "tokens", "a", clk)
		b := newClient(t, store, "tokens", "b", clk)
		for i, c := range []*objlease.Client{a, b, a, b} {
			l, err := c.TryAcquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if l.Token() != uint64(i+1) {
				t.Fatalf("acquisition %d: token %d", i+1, l.Token())
			}
			if err := l.Renew(ctx); err != nil {
				t.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		st, err := a.Inspect(ctx)
		if err != nil || st.Record.State != objlease.StateReleased || st.Record.Token != 4 {
			t.Fatalf("record after release: %+v %v (must be kept, released, token 4)", st, err)
		}
	})

	t.Run("TakeoverAfterExpiryFencesOldHolder", func(t *testing.T) {
		// A holder whose clock never moves is frozen: it never renews.
		old, err := newClient(t, store, "takeover", "old", clock.NewFake(epoch)).TryAcquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		clk := clock.NewFake(epoch)
		c := newClient(t, store, "takeover", "new", clk)
		if _, err := c.TryAcquire(ctx); !errors.Is(err, objlease.ErrHeld) {
			t.Fatalf("%v, want ErrHeld", err)
		}
		clk.Advance(10*time.Second + 99*time.Millisecond)
		if _, err := c.TryAcquire(ctx); !errors.Is(err, objlease.ErrHeld) {
			t.Fatalf("before TTL × (1 + drift): %v, want ErrHeld", err)
		}
		clk.Advance(time.Millisecond)
		l, err := c.TryAcquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release(ctx)
		if l.Token() != old.Token()+1 {
			t.Fatalf("token %d after %d", l.Token(), old.Token())
		}
		if err := old.Renew(ctx); !errors.Is(err, objlease.ErrLeaseLost) {
			t.Fatalf("old holder's renewal: %v, want ErrLeaseLost", err)
		}
	})

	t.Run("RaceHasOneWinner", func(t *testing.T) {
		for round := range 5 {
			key := fmt.Sprintf("race-%d", round)
			var wg sync.WaitGroup
			var mu sync.Mutex
			var winners []uint64
			start := make(chan struct{})
			for i := range 10 {
				c := newClient(t, store, key, fmt.Sprint("racer-", i), clock.NewFake(epoch))
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					l, err := c.TryAcquire(ctx)
					switch {
					case err == nil:
						mu.Lock()
						winners = append(winners, l.Token())
						mu.Unlock()
					case !errors.Is(err, objlease.ErrHeld):
						t.Error(err)
					}
				}()
			}
			close(start)
			wg.Wait()
			if len(winners) != 1 || winners[0] != 1 {
				t.Fatalf("round %d: winners with tokens %v, want exactly one with token 1", round, winners)
			}
		}
	})

	t.Run("LostReplyIsRecognised", func(t *testing.T) {
		ls := &lossyStore{Store: store}
		clk := clock.NewFake(epoch)
		c := newClient(t, ls, "lost-reply", "a", clk)
		ls.loseNext("create")
		l, err := c.TryAcquire(ctx)
		if err != nil {
			t.Fatalf("acquire whose reply was lost: %v", err)
		}
		ls.loseNext("replace")
		if err := l.Renew(ctx); err != nil {
			t.Fatalf("renew whose reply was lost: %v", err)
		}
		ls.loseNext("replace")
		if err := l.Release(ctx); err != nil {
			t.Fatalf("release whose reply was lost: %v", err)
		}
		st, err := c.Inspect(ctx)
		if err != nil || st.Record.State != objlease.StateReleased || st.Record.Token != 1 || st.Record.Renewals != 1 {
			t.Fatalf("record %+v, %v", st, err)
		}
		if ls.lost != 3 {
			t.Fatalf("%d replies lost, want 3", ls.lost)
		}
	})

	t.Run("ForeignObjectIsKept", func(t *testing.T) {
		body := []byte(`{"not":"a lease"}`)
		if _, err := store.Create(ctx, prefix+"foreign", body, nil); err != nil {
			t.Fatal(err)
		}
		_, err := newClient(t, store, "foreign", "a", clock.NewFake(epoch)).TryAcquire(ctx)
		var re *objlease.Error
		if !errors.Is(err, objlease.ErrBadRecord) || !errors.As(err, &re) || re.Key != prefix+"foreign" {
			t.Fatalf("%v, want an *Error (ErrBadRecord) naming the key", err)
		}
		obj, err := store.Get(ctx, prefix+"foreign", 0)
		if err != nil || !bytes.Equal(obj.Data, body) {
			t.Fatalf("foreign object changed: %v", err)
		}
	})

	t.Run("Probe", func(t *testing.T) {
		r, err := probe.Run(ctx, store, prefix)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("probe: clock offset %v (known %v)", r.ClockOffset, r.ClockKnown)
	})
}

// lossyStore drops the reply of the next write of a chosen kind after the
// store applied it, as a reset connection would.
type lossyStore struct {
	providers.Store
	mu   sync.Mutex
	op   string
	lost int
}

func (s *lossyStore) loseNext(op string) { s.mu.Lock(); s.op = op; s.mu.Unlock() }

func (s *lossyStore) drop(op, key string, err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && s.op == op {
		s.op = ""
		s.lost++
		return providers.Wrap(op, key, providers.ErrUnknownOutcome, errors.New("reply lost"))
	}
	return err
}

func (s *lossyStore) Create(ctx context.Context, key string, data []byte, md map[string]string) (providers.WriteResult, error) {
	r, err := s.Store.Create(ctx, key, data, md)
	return r, s.drop("create", key, err)
}

func (s *lossyStore) Replace(ctx context.Context, key string, data []byte, md map[string]string, v string) (providers.WriteResult, error) {
	r, err := s.Store.Replace(ctx, key, data, md, v)
	return r, s.drop("replace", key, err)
}
