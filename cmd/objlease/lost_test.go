package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/mem"
)

// A lease lost while held is told by what replaced it: a takeover names
// the new holder and token, a break the operator, a release the process
// that released it; never versions or ETags.
func TestLostLeaseNamesWhatHappened(t *testing.T) {
	ctx := context.Background()
	epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	client := func(t *testing.T, store providers.Store, holder string, clk *clock.Fake, force bool) *objlease.Client {
		c, err := newOn(store, "job", objlease.SessionOptions{Clock: clk}, objlease.Options{TTL: 10 * time.Second, Holder: holder, Force: force})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, store providers.Store)
		want   string
	}{
		{"taken over", func(t *testing.T, store providers.Store) {
			clk := clock.NewFake(epoch)
			carol := client(t, store, "carol", clk, false)
			if _, err := carol.TryAcquire(ctx); !errors.Is(err, objlease.ErrHeld) {
				t.Fatalf("first look: %v", err)
			}
			clk.Advance(11 * time.Second)
			if _, err := carol.TryAcquire(ctx); err != nil {
				t.Fatal(err)
			}
		}, "lease lost: taken over by carol after it expired, new token 2"},
		{"broken", func(t *testing.T, store providers.Store) {
			if _, err := client(t, store, "op", clock.NewFake(epoch), true).Break(ctx); err != nil {
				t.Fatal(err)
			}
		}, "lease lost: broken by an operator, new token 2"},
		{"broken, then acquired by a waiter", func(t *testing.T, store providers.Store) {
			// Nothing expired: the waiter took the broken lease at once.
			if _, err := client(t, store, "op", clock.NewFake(epoch), true).Break(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := client(t, store, "bob", clock.NewFake(epoch), false).TryAcquire(ctx); err != nil {
				t.Fatal(err)
			}
		}, "lease lost: broken by an operator, new token 2, then acquired by bob, new token 3"},
		{"broken, then acquired and released", func(t *testing.T, store providers.Store) {
			if _, err := client(t, store, "op", clock.NewFake(epoch), true).Break(ctx); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				l, err := client(t, store, "bob", clock.NewFake(epoch), false).TryAcquire(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if err := l.Release(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}, "lease lost: broken by an operator, new token 2, then acquired and released since by bob (token 4)"},
		{"released", func(t *testing.T, store providers.Store) {
			if err := client(t, store, "alice", clock.NewFake(epoch), false).Release(ctx); err != nil {
				t.Fatal(err)
			}
		}, "lease lost: released by another process as alice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := mem.New()
			l, err := client(t, store, "alice", clock.NewFake(epoch), false).TryAcquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			tc.change(t, store)
			err = l.Renew(ctx)
			if got := reason(err, ""); got != tc.want {
				t.Fatalf("reason %q, want %q (error: %v)", got, tc.want, err)
			}
		})
	}
}

// The recorded session in docs/watch-session.txt shows the line a broken
// holder prints as the command prints it now: what replaced the record,
// not the store's precondition failure and versions.
func TestWatchSessionShowsTheLostLeaseLine(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "watch-session.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var lost []string
	for line := range strings.SplitSeq(string(b), "\n") {
		if strings.Contains(line, "lease lost") {
			lost = append(lost, line)
		}
	}
	want := "objlease: hold file:///tmp/ws/leases/nightly: lease lost: broken by an operator, new token 4"
	if len(lost) != 1 || !strings.HasSuffix(lost[0], want) {
		t.Errorf("the session's lost-lease lines: %q; want one ending %q", lost, want)
	}
}
