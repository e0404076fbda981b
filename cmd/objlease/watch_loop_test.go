package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/mem"
)

// watchOutput is what the watcher prints, read by the test while it runs.
type watchOutput struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *watchOutput) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *watchOutput) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// watchLoop runs the watch loop on a fake clock over a store, and lets a
// test act between two polls.
type watchLoop struct {
	t     *testing.T
	clk   *clock.Fake
	out   *watchOutput
	store providers.Store
	done  chan error
	seen  int // events already returned by events
}

func startWatch(t *testing.T, store providers.Store, key string, poll time.Duration) *watchLoop {
	t.Helper()
	wl := &watchLoop{t: t, clk: clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), out: &watchOutput{}, store: store, done: make(chan error, 1)}
	c := &cli{stdin: strings.NewReader(""), stdout: wl.out, stderr: io.Discard, log: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithCancel(context.Background())
	w := newWatcher(c, store, key, newTracker(false, strings.HasSuffix(key, "/")), wl.clk, objlease.Options{DriftBound: 0.01}, true)
	go func() { wl.done <- w.run(ctx, poll) }()
	t.Cleanup(func() {
		cancel()
		<-wl.done
	})
	wl.waitIdle()
	return wl
}

// waitIdle waits until the watcher waits on its timer: a poll is over.
func (wl *watchLoop) waitIdle() {
	wl.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); wl.clk.Timers() != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			wl.t.Fatal("the watcher did not come to wait for its next poll")
		}
	}
}

// next lets the watcher's next poll happen and returns the events it
// printed.
func (wl *watchLoop) next() []watchEvent {
	wl.t.Helper()
	when, ok := wl.clk.NextDeadline()
	if !ok {
		wl.t.Fatal("the watcher has no timer")
	}
	wl.clk.Advance(when.Sub(wl.clk.Now()))
	wl.waitIdle()
	return wl.events()
}

// events returns the events printed since the last call.
func (wl *watchLoop) events() []watchEvent {
	wl.t.Helper()
	var evs []watchEvent
	lines := strings.Split(strings.TrimSuffix(wl.out.String(), "\n"), "\n")
	for _, line := range lines[wl.seen:] {
		if line == "" {
			continue
		}
		var ev watchEvent
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			wl.t.Fatalf("watch printed %q: %v", line, err)
		}
		evs = append(evs, ev)
	}
	wl.seen = len(lines)
	return evs
}

// summary is events as "event token holder [previous] (detail)" lines.
func summary(evs []watchEvent) string {
	var b strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&b, "%s %d %s", ev.Event, ev.Token, ev.Holder)
		if ev.PrevHolder != "" || ev.PrevToken != 0 {
			fmt.Fprintf(&b, " prev=%s/%d", ev.PrevHolder, ev.PrevToken)
		}
		if ev.Detail != "" {
			fmt.Fprintf(&b, " (%s)", ev.Detail)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// holder is a lease client on a fake clock of its own, which the test
// advances: its holder never renews unless told to.
type holder struct {
	c   *objlease.Client
	clk *clock.Fake
}

func newHolder(t *testing.T, store providers.Store, key, name string) *holder {
	t.Helper()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c, err := newOn(store, key, objlease.SessionOptions{Clock: clk}, objlease.Options{Holder: name, TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return &holder{c: c, clk: clk}
}

func (h *holder) acquire(t *testing.T) *objlease.Lease {
	t.Helper()
	l, err := h.c.TryAcquire(t.Context())
	if err != nil {
		t.Fatalf("%s: %v", h.c.Options().Holder, err)
	}
	return l
}

func release(t *testing.T, l *objlease.Lease) {
	t.Helper()
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// Every event watch prints follows from the two records it saw, however
// many writes landed between two polls: a lease acquired and released
// within one poll interval is acquired then released, not broken; a new
// holder over a record this observer has not seen expire is acquired (with
// what was not seen said), and taken-over only after expired.
func TestWatchEventsFromRecords(t *testing.T) {
	store := mem.New()
	const key = "jobs/nightly"
	w := startWatch(t, store, key, time.Second)
	check := func(step string, got []watchEvent, want string) {
		t.Helper()
		if g := summary(got); g != want {
			t.Errorf("%s: events\n%s\nwant\n%s", step, g, want)
		}
	}
	check("start", w.events(), "observed 0 \n")

	// Acquired and released within one poll interval.
	alice := newHolder(t, store, key, "alice")
	release(t, alice.acquire(t))
	check("quick acquire and release", w.next(), "acquired 1 alice (acquired and released between two reads)\nreleased 1 alice\n")

	// A break: a released record with the next token and no holder.
	if _, err := newHolder(t, store, key, "breaker").c.Break(t.Context()); err != nil {
		t.Fatal(err)
	}
	check("break", w.next(), "broken 2  prev=alice/1\n")

	// Acquired, then never renewed: expired once this observer has seen it
	// unchanged for TTL × (1 + drift), as the library judges it.
	bob := newHolder(t, store, key, "bob")
	bob.acquire(t)
	check("acquire", w.next(), "acquired 3 bob\n")
	var evs []watchEvent
	for i := 0; i < 20 && len(evs) == 0; i++ {
		evs = w.next()
	}
	check("expiry", evs, "expired 3 bob (unchanged for 10.1s, TTL × (1 + drift), by this observer's clock)\n")
	if at := evs[0].Time.Sub(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)); at < 3*time.Second+10100*time.Millisecond || at > 3*time.Second+10200*time.Millisecond {
		t.Errorf("expired at %v after the start, want just after 3s + 10.1s", at)
	}

	// Taken over after it expired.
	carol := newHolder(t, store, key, "carol")
	if _, err := carol.c.TryAcquire(t.Context()); err == nil {
		t.Fatal("carol took over at first sight")
	}
	carol.clk.Advance(10100 * time.Millisecond)
	lc := carol.acquire(t)
	check("takeover after expiry", w.next(), "taken-over 4 carol prev=bob/3\n")

	// Released and acquired by another within one poll: not a takeover.
	release(t, lc)
	dave := newHolder(t, store, key, "dave")
	ld := dave.acquire(t)
	check("hand-over within a poll", w.next(), "acquired 5 dave prev=carol/4 (token 4 ended (released, broken or expired) between two reads)\n")

	// Several acquisitions between two polls: the skipped tokens are said.
	release(t, ld)
	release(t, newHolder(t, store, key, "erin").acquire(t))
	frank := newHolder(t, store, key, "frank")
	frank.acquire(t)
	check("skipped tokens", w.next(), "acquired 7 frank prev=dave/5 (token 5 ended (released, broken or expired); token 6 was issued and ended between two reads)\n")

	// A break of a held lease names its holder.
	if _, err := newHolder(t, store, key, "breaker").c.Break(t.Context()); err != nil {
		t.Fatal(err)
	}
	check("break of a held lease", w.next(), "broken 8  prev=frank/7\n")

	if err := store.Delete(t.Context(), key, mustVersion(t, store, key)); err != nil {
		t.Fatal(err)
	}
	check("delete", w.next(), "deleted 0 \n")
}

func mustVersion(t *testing.T, store providers.Store, key string) string {
	t.Helper()
	a, err := store.Stat(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	return a.Version
}
