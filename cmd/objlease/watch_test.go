package main

import (
	"strings"
	"testing"
	"time"

	"github.com/objlease/objlease/objlease"
)

// The tracker names each change from two sightings, and expiry from this
// observer's own times; the times are given, so no clock runs.
func TestTrackerEvents(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rec := func(token uint64, holder string, state objlease.State, renewals uint64) *objlease.Record {
		return &objlease.Record{Token: token, Holder: holder, State: state, TTLMillis: 10000, Renewals: renewals}
	}
	held, released := objlease.StateHeld, objlease.StateReleased
	tr := newTracker(0.01, false, false)
	var got []string
	see := func(at time.Duration, version string, r *objlease.Record, notLease string) {
		for _, ev := range tr.observe(t0.Add(at), "k", version, r, notLease) {
			got = append(got, ev.Event)
		}
		tr.started = true
		for _, ev := range tr.tick(t0.Add(at)) {
			got = append(got, ev.Event)
		}
	}
	see(0, "", nil, "")
	see(time.Second, "", nil, "")                               // unchanged: nothing
	see(2*time.Second, "v1", rec(1, "a", held, 0), "")          // acquired
	see(3*time.Second, "v2", rec(1, "a", held, 1), "")          // renewed, not shown
	see(13*time.Second, "v2", rec(1, "a", held, 1), "")         // 10 s unchanged: not yet 10.1 s
	see(13200*time.Millisecond, "v2", rec(1, "a", held, 1), "") // expired, once
	see(14*time.Second, "v2", rec(1, "a", held, 1), "")
	see(15*time.Second, "v3", rec(2, "b", held, 0), "")     // taken over
	see(16*time.Second, "v4", rec(2, "b", released, 0), "") // released
	see(17*time.Second, "v5", rec(3, "", released, 0), "")  // broken
	see(18*time.Second, "v6", rec(4, "c", held, 0), "")     // acquired
	see(19*time.Second, "v7", rec(1, "x", held, 0), "")     // token went back
	see(20*time.Second, "v8", nil, "not JSON")              // not a lease
	see(21*time.Second, "", nil, "")                        // deleted
	want := "observed acquired expired taken-over released broken acquired rewritten not-a-lease deleted"
	if g := strings.Join(got, " "); g != want {
		t.Errorf("events\n got %s\nwant %s", g, want)
	}

	// With --renewals every renewal is one.
	tr = newTracker(0.01, true, false)
	tr.observe(t0, "k", "v1", rec(1, "a", held, 0), "")
	if evs := tr.observe(t0.Add(time.Second), "k", "v2", rec(1, "a", held, 1), ""); len(evs) != 1 || evs[0].Event != "renewed" {
		t.Errorf("renewal with --renewals: %+v", evs)
	}
	// Taken over names the previous holder.
	evs := tr.observe(t0.Add(20*time.Second), "k", "v3", rec(2, "b", held, 0), "")
	if len(evs) != 1 || evs[0].PrevHolder != "a" || evs[0].PrevToken != 1 {
		t.Errorf("takeover: %+v", evs)
	}
}

// Under a prefix, keys that appear after the first poll are new, objects
// that are not leases are skipped, and a key no longer listed is deleted.
func TestTrackerPrefix(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tr := newTracker(0.01, false, true)
	r := &objlease.Record{Token: 1, Holder: "a", State: objlease.StateHeld, TTLMillis: 1000}
	if evs := tr.observe(t0, "a", "v1", r, ""); len(evs) != 1 || evs[0].Event != "observed" {
		t.Fatalf("first poll: %+v", evs)
	}
	if evs := tr.observe(t0, "notes", "n1", nil, "not JSON"); len(evs) != 0 {
		t.Errorf("foreign object under a prefix: %+v", evs)
	}
	tr.started = true
	if !tr.unchanged("notes", "n1") {
		t.Error("a skipped object is read again although unchanged")
	}
	if evs := tr.observe(t0, "b", "v1", r, ""); len(evs) != 1 || evs[0].Event != "acquired" {
		t.Errorf("new key: %+v", evs)
	}
	if evs := tr.observe(t0, "a", "", nil, ""); len(evs) != 1 || evs[0].Event != "deleted" {
		t.Errorf("key gone: %+v", evs)
	}
	if d, ok := tr.nextExpiry(t0.Add(500 * time.Millisecond)); !ok || d != 510*time.Millisecond {
		t.Errorf("next expiry %v %v, want 510ms", d, ok)
	}
}
