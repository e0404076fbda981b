package spin_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/providers/mem"
)

// A lease whose acquiring write's reply took longer than the holder's safe
// validity must never be held: another holder may already have taken
// over. Found by the model (which starts such a lease ended): the code
// returned it past its validity with a live context. Ending it before
// returning it was not enough: the long simulation (seed 2100) then saw an
// elector start leading on such a lease while another led. TryAcquire now
// reports the acquisition lost, gives the record back (its token kept),
// and the next attempt takes the next token.
func TestLeaseBornExpiredIsNotHeld(t *testing.T) {
	m := mem.New()
	h := newHooks(m)
	clk := clock.NewFake(epoch)
	c := newClient(t, h, "c1", clk)
	h.after["create"] = func(err error) error {
		clk.Advance(10 * time.Second) // the reply takes a whole TTL
		return err
	}
	ctx := context.Background()
	l, err := c.TryAcquire(ctx)
	if err == nil {
		t.Fatalf("TryAcquire returned a lease (token %d, context ended: %v) whose validity ended before its reply came; want ErrLeaseLost", l.Token(), l.Context().Err() != nil)
	}
	if !errors.Is(err, objlease.ErrLeaseLost) || l != nil {
		t.Fatalf("TryAcquire: %v, %v; want no lease and ErrLeaseLost", l, err)
	}
	st, err := c.Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Record == nil || st.Record.State != objlease.StateReleased || st.Record.Token != 1 {
		t.Fatalf("record after the lost acquisition: %+v; want released, token 1", st.Record)
	}
	l, err = c.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	if l.Token() != 2 {
		t.Fatalf("next acquisition took token %d, want 2", l.Token())
	}
}
