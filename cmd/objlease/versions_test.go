package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/driver"
	"github.com/objlease/objlease/providers/mem"
)

// TestVersionCost: what a bucket keeps of one lease's renewals, by its
// settings: the formula of docs/scale.md#versioned-buckets.
func TestVersionCost(t *testing.T) {
	const d = 24 * time.Hour
	on, off, unknown := providers.SettingEnabled, providers.SettingOff, providers.SettingUnknown
	settings := func(versioning, lifecycle, soft providers.Setting) providers.BucketSettings {
		return providers.BucketSettings{Versioning: versioning, Lifecycle: lifecycle, SoftDelete: soft, ObjectLock: off}
	}
	withExpiry := func(s providers.BucketSettings, e time.Duration) providers.BucketSettings {
		s.NoncurrentExpiry = e
		return s
	}
	withSoft := func(s providers.BucketSettings, r time.Duration) providers.BucketSettings {
		s.SoftDeleteRetention = r
		return s
	}
	locked := settings(on, on, off)
	locked.NoncurrentExpiry, locked.ObjectLock, locked.ObjectLockRetention = d, on, 30*d
	wasabi := settings(off, off, off)
	wasabi.OverwriteBilled = 90 * d
	for _, c := range []struct {
		name string
		s    providers.BucketSettings
		kept string
		days float64
	}{
		{"nothing kept", settings(off, off, off), "none", 0},
		{"suspended", settings(providers.SettingSuspended, off, off), "none", 0},
		{"versioned, no rule", settings(on, off, off), "forever", 0},
		{"versioned, rule of 1 day", withExpiry(settings(on, on, off), d), "days", 2},
		{"versioned, rule, soft delete", withSoft(withExpiry(settings(on, on, on), d), 7*d), "days", 9},
		{"soft delete only (GCS's default)", withSoft(settings(off, off, on), 7*d), "days", 7},
		{"object lock's retention above the rule", locked, "days", 30},
		{"a minimum storage duration (Wasabi)", wasabi, "days", 90},
		{"versioning unknown", settings(unknown, unknown, unknown), "unknown", 0},
		{"versioned, rules unknown", settings(on, unknown, off), "unknown", 0},
		{"versioning off, soft delete unknown", settings(off, off, unknown), "unknown", 0},
	} {
		got := versionCost(c.s, 30*time.Second, 300)
		if got.Kept != c.kept || got.WritesPerDay != 8640 || got.BytesPerDay != 8640*300 {
			t.Errorf("%s: %+v, want kept %s", c.name, got, c.kept)
			continue
		}
		if c.kept == "days" {
			if *got.KeptDays != c.days || *got.KeptVersions != 8640*c.days || *got.KeptBytes != 8640*300*c.days {
				t.Errorf("%s: kept %v days, %v versions, %v bytes; want %v days", c.name, *got.KeptDays, *got.KeptVersions, *got.KeptBytes, c.days)
			}
		} else if got.KeptDays != nil || got.KeptBytes != nil {
			t.Errorf("%s: kept days %v, bytes %v; want none", c.name, got.KeptDays, got.KeptBytes)
		}
	}
	if got := versionCost(settings(on, off, off), 10*time.Second, 300); got.WritesPerDay != 25920 {
		t.Errorf("TTL 10s: %v writes a day, want 25,920", got.WritesPerDay)
	}
	if n := recordSize("leases/", 30*time.Second); n < 200 || n > 400 {
		t.Errorf("a record of %d bytes", n)
	}
}

// versionedDriver is a mem driver whose bucket says it is versioned, with
// no lifecycle rule, and gives a rule.
type versionedDriver struct{ driver.Driver }

func (versionedDriver) BucketSettings(context.Context, string) (driver.BucketSettings, error) {
	return driver.BucketSettings{Versioning: driver.SettingEnabled, SoftDelete: driver.SettingOff, ObjectLock: driver.SettingOff, Lifecycle: driver.SettingOff,
		Notes: []string{"a note from the store"}}, nil
}

func (versionedDriver) NoncurrentRule(prefix string, days int) driver.LifecycleRule {
	return driver.LifecycleRule{Format: "test lifecycle (JSON)", Text: "{\n  \"prefix\": \"" + prefix + "\"\n}", Apply: "apply lifecycle.json", Note: "it replaces what is there"}
}

// registerVersioned registers the scheme "versioned" once, however often
// the test runs.
var registerVersioned = sync.OnceValue(func() error {
	return providers.Register("versioned", func(_ context.Context, u *url.URL, _ providers.OpenOptions) (*providers.Bucket, string, error) {
		return providers.NewBucket(versionedDriver{mem.NewDriver()}), strings.TrimPrefix(u.Path, "/"), nil
	})
})

// TestDoctorVersionedBucket: on a versioned bucket without a lifecycle
// rule doctor still exits 0 and says safe, and reports the settings, a
// caveat, the cost and the rule; on a store that keeps nothing it says so
// in one line and adds nothing else.
func TestDoctorVersionedBucket(t *testing.T) {
	if err := registerVersioned(); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		c := &cli{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr}
		code := c.main(context.Background(), args)
		return code, stdout.String(), stderr.String()
	}
	code, out, errOut := run("doctor", "--ttl", "1m", "versioned://b/leases/")
	if code != 0 {
		t.Fatalf("doctor exited %d; stderr:\n%s", code, errOut)
	}
	for _, want := range []string{
		`(?m)^verdict: +safe: every conditional write that should fail was refused, alone and in races$`,
		`(?m)^caveat: +the bucket keeps every record a renewal overwrites, for ever \(versioning without a lifecycle rule for the prefix\): leases on it are safe`,
		`(?m)^bucket: +versioning enabled, soft delete off, object lock off; no lifecycle rule expires noncurrent versions under "leases/"$`,
		`(?m)^bucket: +a note from the store$`,
		`(?m)^cost: +at TTL 1m0s a lease writes its record \(about \d+ bytes\) 4,320 times a day, [\d.]+ MB; versioning keeps each record a renewal overwrites as a noncurrent version, and no lifecycle rule deletes them: each lease adds 4,320 versions \([\d.]+ MB\) a day, for ever, and its key has a million versions after 232 days`,
		`(?m)^lifecycle: +this test lifecycle \(JSON\) deletes what leases under "leases/" overwrite 1 day after; it replaces what is there; the command below applies it:\n +\{\n +"prefix": "leases/"\n +\}\n +apply lifecycle.json\n`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("stdout lacks %s:\n%s", want, out)
		}
	}

	code, out, _ = run("doctor", "-o", "json", "versioned://b/leases/")
	var d diagnosis
	if err := json.Unmarshal([]byte(out), &d); err != nil || code != 0 || !d.Safe {
		t.Fatalf("doctor -o json exited %d: %v: %s", code, err, out)
	}
	if d.Bucket.Versioning != "enabled" || d.Bucket.Lifecycle != "off" || d.Cost == nil || d.Cost.Kept != "forever" || d.Cost.WritesPerDay != 8640 ||
		d.LifecycleRule == nil || d.LifecycleRule.Apply != "apply lifecycle.json" || len(d.Caveats) != 1 {
		t.Fatalf("diagnosis %+v, cost %+v, rule %+v", d, d.Cost, d.LifecycleRule)
	}

	dir := t.TempDir()
	code, out, errOut = run("doctor", "file://"+dir+"/")
	if code != 0 {
		t.Fatalf("doctor on a directory exited %d; stderr:\n%s", code, errOut)
	}
	if !regexp.MustCompile(`(?m)^bucket: +versioning off, soft delete off, object lock off$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^cost: +none: an overwritten record is not kept \(a lease at TTL 30s writes its record 8,640 times a day\)$`).MatchString(out) ||
		strings.Contains(out, "caveat:") || strings.Contains(out, "lifecycle:") {
		t.Errorf("doctor on a directory:\n%s", out)
	}
}
