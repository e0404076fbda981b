package main

import (
	"strings"
	"testing"
	"time"

	"github.com/objlease/objlease/objlease"
)

// The tracker names each change from two sightings; the times are given
// and expiry is the judgement passed to tick, so no clock runs.
func TestTrackerEvents(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rec := func(token uint64, holder string, state objlease.State, renewals uint64) *objlease.Record {
		return &objlease.Record{Token: token, Holder: holder, State: state, TTLMillis: 10000, Renewals: renewals}
	}
	held, released := objlease.StateHeld, objlease.StateReleased
	tr := newTracker(false, false)
	expiresIn := time.Hour
	judge := func(string) (time.Duration, time.Duration, bool, bool) {
		return expiresIn, 0, false, true
	}
	var got []string
	see := func(at time.Duration, version string, r *objlease.Record, notLease string) {
		for _, ev := range tr.observe(t0.Add(at), "k", version, r, notLease) {
			got = append(got, ev.Event)
		}
		tr.started = true
		for _, ev := range tr.tick(t0.Add(at), judge) {
			got = append(got, ev.Event)
		}
	}
	see(0, "", nil, "")
	see(time.Second, "", nil, "")                      // unchanged: nothing
	see(2*time.Second, "v1", rec(1, "a", held, 0), "") // acquired
	see(3*time.Second, "v2", rec(1, "a", held, 1), "") // renewed, not shown
	expiresIn = 0
	see(14*time.Second, "v2", rec(1, "a", held, 1), "") // expired, once
	see(15*time.Second, "v2", rec(1, "a", held, 1), "")
	expiresIn = time.Hour
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
	tr = newTracker(true, false)
	tr.observe(t0, "k", "v1", rec(1, "a", held, 0), "")
	if evs := tr.observe(t0.Add(time.Second), "k", "v2", rec(1, "a", held, 1), ""); len(evs) != 1 || evs[0].Event != "renewed" {
		t.Errorf("renewal with --renewals: %+v", evs)
	}
}

// Each pair of records seen one after the other gives the events that
// follow from them, and nothing more.
func TestEventsBetween(t *testing.T) {
	rec := func(token uint64, holder string, state objlease.State) *objlease.Record {
		return &objlease.Record{Token: token, Holder: holder, State: state, TTLMillis: 10000}
	}
	held, released := objlease.StateHeld, objlease.StateReleased
	for _, tc := range []struct {
		name    string
		p       *objlease.Record
		expired bool
		rec     *objlease.Record
		want    string
	}{
		{"acquired from absent", nil, false, rec(1, "a", held), "acquired 1 a\n"},
		{"broken from absent", nil, false, rec(1, "", released), "broken 1 \n"},
		{"acquired and released from absent", nil, false, rec(1, "a", released), "acquired 1 a (acquired and released between two reads)\nreleased 1 a\n"},
		{"acquired after release", rec(1, "a", released), false, rec(2, "b", held), "acquired 2 b prev=a/1\n"},
		{"acquired after break", rec(2, "", released), false, rec(3, "b", held), "acquired 3 b\n"},
		{"acquired and released after release", rec(1, "a", released), false, rec(2, "b", released), "acquired 2 b prev=a/1 (acquired and released between two reads)\nreleased 2 b\n"},
		{"taken over after expiry", rec(1, "a", held), true, rec(2, "b", held), "taken-over 2 b prev=a/1\n"},
		{"taken over after expiry and released", rec(1, "a", held), true, rec(2, "b", released), "taken-over 2 b prev=a/1 (acquired and released between two reads)\nreleased 2 b\n"},
		{"new holder, expiry not seen", rec(1, "a", held), false, rec(2, "b", held), "acquired 2 b prev=a/1 (token 1 ended (released, broken or expired) between two reads)\n"},
		{"same holder again", rec(1, "a", held), false, rec(2, "a", held), "acquired 2 a prev=a/1 (token 1 ended (released, broken or expired) between two reads)\n"},
		{"expired, tokens skipped", rec(1, "a", held), true, rec(4, "b", held), "acquired 4 b prev=a/1 (token 1 ended (released, broken or expired); tokens 2 to 3 were issued and ended between two reads)\n"},
		{"broken while held", rec(1, "a", held), false, rec(2, "", released), "broken 2  prev=a/1\n"},
		{"broken, tokens skipped", rec(1, "a", released), false, rec(3, "", released), "broken 3  prev=a/1 (token 2 was issued and ended between two reads)\n"},
		{"released", rec(1, "a", held), false, rec(1, "a", released), "released 1 a\n"},
		{"released rewritten", rec(1, "a", released), false, rec(1, "a", released), ""},
		{"renewed", rec(1, "a", held), false, rec(1, "a", held), ""},
		{"same token, another holder", rec(1, "a", held), false, rec(1, "b", held), "rewritten 1 b (token 1 rewritten from held by a by held by b: objlease writes a new token for a new holder, and never holds a released token again)\n"},
		{"token went back", rec(5, "a", held), false, rec(4, "b", held), "rewritten 4 b (token went back from 5: written by something other than objlease)\n"},
	} {
		ev := watchEvent{Key: "k", State: string(tc.rec.State), Token: tc.rec.Token, Holder: tc.rec.Holder}
		if got := summary(eventsBetween(ev, tc.p, tc.expired, tc.rec, false)); got != tc.want {
			t.Errorf("%s: got\n%s\nwant\n%s", tc.name, got, tc.want)
		}
	}
}

// Under a prefix, keys that appear after the first poll are new, objects
// that are not leases are skipped, and a key no longer listed is deleted.
func TestTrackerPrefix(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tr := newTracker(false, true)
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
	judge := func(key string) (time.Duration, time.Duration, bool, bool) {
		return map[string]time.Duration{"a": 510 * time.Millisecond, "b": 700 * time.Millisecond}[key], 0, false, true
	}
	if d, ok := tr.nextExpiry(judge); !ok || d != 510*time.Millisecond {
		t.Errorf("next expiry %v %v, want 510ms", d, ok)
	}
	if evs := tr.observe(t0, "a", "", nil, ""); len(evs) != 1 || evs[0].Event != "deleted" {
		t.Errorf("key gone: %+v", evs)
	}
}
