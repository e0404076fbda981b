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
// validity must be returned ended. Found by the model (which starts such a
// lease ended): the code returned it past its validity with a live
// context, which ended only when the scheduler's expiry ran, after
// TryAcquire had returned, so work started on Context in that window ran
// while another holder could already have taken over.
func TestLeaseBornExpiredHasEndedContext(t *testing.T) {
	m := mem.New()
	h := newHooks(m)
	clk := clock.NewFake(epoch)
	c := newClient(t, h, "c1", clk)
	h.after["create"] = func(err error) error {
		clk.Advance(10 * time.Second) // the reply takes a whole TTL
		return err
	}
	l, err := c.TryAcquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	// The context first: ValidFor ends a lease it finds over.
	if l.Context().Err() == nil {
		t.Fatalf("TryAcquire returned a lease %v past its validity whose context is still live", -l.ValidFor())
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, objlease.ErrLeaseLost) {
		t.Fatalf("context ended with %v, want ErrLeaseLost", cause)
	}
}
