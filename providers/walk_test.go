package providers_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/mem"
)

// Walk visits every object under the prefix across pages, none outside
// it, and stops at fn's first error.
func TestWalkPagesAndStops(t *testing.T) {
	ctx := context.Background()
	store := mem.New()
	for i := range 2500 {
		if _, err := store.Create(ctx, fmt.Sprintf("p/%05d", i), nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := store.Create(ctx, "q/outside", nil, nil); err != nil {
		t.Fatal(err)
	}
	var keys []string
	if err := providers.Walk(ctx, store, "p/", func(a providers.Attrs) error {
		keys = append(keys, a.Key)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2500 || keys[0] != "p/00000" || keys[2499] != "p/02499" {
		t.Fatalf("walked %d keys (%v … %v), want p/00000 … p/02499", len(keys), keys[0], keys[len(keys)-1])
	}
	stop := errors.New("stop")
	n := 0
	err := providers.Walk(ctx, store, "p/", func(providers.Attrs) error {
		if n++; n == 1200 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 1200 {
		t.Fatalf("Walk after fn failed at the 1200th: %v after %d calls, want stop after 1200", err, n)
	}
}
