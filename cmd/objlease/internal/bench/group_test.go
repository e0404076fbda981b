package bench

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

// A settled group's requests an hour: renewals of every shard and
// heartbeat, one member listing per member and round, one shard listing
// per member every 2.5 TTLs, no read.
func TestGroupFormula(t *testing.T) {
	ttl, r := 6*time.Second, 2*time.Second
	for _, tc := range []struct {
		n, m int
		want float64
	}{
		{2, 10, 21600 + 3600 + 480},           // (10+2)/2 s, 2/2 s, 2/15 s
		{50, 10, 108000 + 90000 + 12000},      // (10+50)/2 s, 50/2 s, 50/15 s
		{2, 1000, 1803600 + 3600 + 480},       // 1,000 shards: one page
		{200, 1001, 2161800 + 360000 + 96000}, // 1,001 shards: two pages
	} {
		if got := groupFormula(tc.n, tc.m, ttl, r, r); math.Abs(got-tc.want) > 1e-6*tc.want {
			t.Errorf("%d members on %d shards: %.0f requests an hour, want %.0f", tc.n, tc.m, got, tc.want)
		}
	}
}

// The group section is run only when --only names it.
func TestGroupOnlyWhenNamed(t *testing.T) {
	b := &bench{samples: 1, trials: 1, leases: 1, duration: time.Second, groupTTLs: 1}
	if err := b.parse(strings.Join(defaultSections, ","), "1", "2", "10"); err != nil {
		t.Fatal(err)
	}
	if b.only["group"] || !b.only["many"] {
		t.Errorf("default sections %v: want every section but group", defaultSections)
	}
	if err := b.parse("group", "1", "2,50", "10,1000"); err != nil || !b.only["group"] ||
		len(b.groupMembers) != 2 || b.groupShards[1] != 1000 {
		t.Errorf("--only group --members 2,50 --shards 10,1000: %v, members %v, shards %v", err, b.groupMembers, b.groupShards)
	}
}

// Small groups on the file store: each is balanced, counted over whole
// TTLs (renewals and listings, no reads once settled), and a member cut
// off loses its shards to the others.
func TestBenchGroupJSON(t *testing.T) {
	dir := t.TempDir()
	out, stderr, err := runBench(t, "-o", "json", "--only", "group", "--members", "2,3", "--shards", "4",
		"--ttl", "1s", "--group-ttls", "2", "file://"+dir+"/")
	if err != nil {
		t.Fatalf("bench: %v; stderr:\n%s", err, stderr)
	}
	var r benchReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("stdout is not the JSON report: %v\n%s", err, out)
	}
	g := r.Group
	if g == nil || len(g.Rows) != 2 || g.WindowTTLs != 2 || len(g.Goals) != 0 || len(g.Prices) != 3 {
		t.Fatalf("group section %+v, want two groups counted over 2 TTLs, no goal without 50 members", g)
	}
	for i, row := range g.Rows {
		if row.Members != 2+i || row.Shards != 4 || !row.Balanced || !row.Settled || row.WindowS < 2 || row.Writes == 0 || row.Lists == 0 ||
			row.FormulaPerH == 0 || row.DollarsMonth["s3"] <= 0 || row.DollarsMonth["azure"] <= row.DollarsMonth["s3"] {
			t.Errorf("group %d: %+v", i, row)
		}
		if !row.Moved || row.KilledShards == 0 || row.MovedShards != row.KilledShards || row.MovedS <= 0 {
			t.Errorf("group %d: the cut member's shards did not all move: %+v", i, row)
		}
	}
	if keys := objectsUnder(t, dir, r.Scratch); len(keys) != 0 {
		t.Errorf("left behind under %s: %q", r.Scratch, keys)
	}
}
