package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/providers"
)

// What a bucket keeps of the records leases overwrite: every renewal
// replaces the record, and a bucket with versioning, soft delete or a
// minimum storage duration keeps (and bills) what was replaced. doctor
// reports it; none of it makes a store unsafe.

// day is the unit of retention.
const day = 24 * time.Hour

// lifecycleDays is how long after a record is overwritten the lifecycle
// rule doctor prints deletes it: the shortest every store takes.
const lifecycleDays = 1

// millionVersions: AWS documents 503 Slow Down for PUT and DELETE on a key
// with millions of versions ("Troubleshooting versioning", S3 User Guide).
const millionVersions = 1e6

// bucketJSON is the bucket's settings in doctor's JSON output.
type bucketJSON struct {
	Versioning          string   `json:"versioning"`
	SoftDelete          string   `json:"soft_delete"`
	SoftDeleteDays      float64  `json:"soft_delete_days"`
	ObjectLock          string   `json:"object_lock"`
	ObjectLockDetail    string   `json:"object_lock_detail,omitempty"`
	ObjectLockDays      float64  `json:"object_lock_days"`
	Lifecycle           string   `json:"lifecycle"`
	NoncurrentExpiry    float64  `json:"noncurrent_expiry_days"`
	OverwriteBilledDays float64  `json:"overwrite_billed_days"`
	Notes               []string `json:"notes"`
	Error               string   `json:"error,omitempty"`
}

// costJSON is what the bucket keeps of one lease's renewals.
type costJSON struct {
	TTLMs        int64   `json:"ttl_ms"`
	WritesPerDay float64 `json:"writes_per_day"`
	RecordBytes  int     `json:"record_bytes"`
	BytesPerDay  float64 `json:"bytes_per_day"`
	// Kept is "none", "days" (KeptDays, KeptBytes and KeptVersions say
	// how much), "forever" (it grows by BytesPerDay each day) or
	// "unknown".
	Kept         string   `json:"kept"`
	KeptDays     *float64 `json:"kept_days"`
	KeptBytes    *float64 `json:"kept_bytes"`
	KeptVersions *float64 `json:"kept_versions"`
	Why          string   `json:"why"`
}

// ruleJSON is the lifecycle rule doctor proposes.
type ruleJSON struct {
	Format string `json:"format"`
	Text   string `json:"text"`
	Apply  string `json:"apply"`
	Note   string `json:"note"`
}

// versionCost is what a bucket with settings s keeps of the renewals of
// one lease at TTL ttl whose record has recordBytes bytes.
func versionCost(s providers.BucketSettings, ttl time.Duration, recordBytes int) costJSON {
	c := costJSON{TTLMs: ttl.Milliseconds(), RecordBytes: recordBytes}
	// A renewal every RenewInterval, TTL/3 by default.
	c.WritesPerDay = 3 * float64(day) / float64(ttl)
	c.BytesPerDay = c.WritesPerDay * float64(recordBytes)
	kept, why, known, forever := keptFor(s)
	switch {
	case !known:
		c.Kept, c.Why = "unknown", why
	case forever:
		c.Kept, c.Why = "forever", why
	case kept <= 0:
		c.Kept, c.Why = "none", why
	default:
		days := kept.Hours() / 24
		bytes, versions := c.BytesPerDay*days, c.WritesPerDay*days
		c.Kept, c.KeptDays, c.KeptBytes, c.KeptVersions, c.Why = "days", &days, &bytes, &versions, why
	}
	return c
}

// keptFor is how long a bucket with settings s keeps (or bills) a record
// a renewal overwrote, and why; known is false if a setting that decides
// it is unknown, forever true if nothing ever deletes it.
func keptFor(s providers.BucketSettings) (kept time.Duration, why string, known, forever bool) {
	var parts []string
	switch s.Versioning {
	case providers.SettingEnabled:
		switch s.Lifecycle {
		case providers.SettingEnabled:
			// Lifecycle actions run once a day or so (S3 rounds up to the
			// next midnight UTC): up to a day more.
			kept = s.NoncurrentExpiry + day
			parts = append(parts, fmt.Sprintf("a noncurrent version until the lifecycle rule deletes it, %s after, up to a day later", days(s.NoncurrentExpiry)))
		case providers.SettingOff:
			return 0, "versioning keeps each record a renewal overwrites as a noncurrent version, and no lifecycle rule deletes them", true, true
		default:
			return 0, "versioning is enabled and the lifecycle rules could not be read: without a rule that expires noncurrent versions they are kept for ever", false, false
		}
		if s.ObjectLock == providers.SettingEnabled && s.ObjectLockRetention > kept {
			kept = s.ObjectLockRetention
			parts = append(parts, fmt.Sprintf("locked for %s by the default retention", days(s.ObjectLockRetention)))
		}
	case providers.SettingOff, providers.SettingSuspended:
		// An overwrite keeps nothing (suspended: it replaces the null
		// version), unless soft delete keeps it.
	default:
		return 0, "versioning is unknown", false, false
	}
	switch s.SoftDelete {
	case providers.SettingEnabled:
		kept += s.SoftDeleteRetention
		parts = append(parts, fmt.Sprintf("then soft-deleted for %s", days(s.SoftDeleteRetention)))
	case providers.SettingOff:
	default:
		if kept == 0 {
			return 0, "soft delete is unknown", false, false
		}
		parts = append(parts, "then soft-deleted, if soft delete is on (it is unknown)")
	}
	if s.OverwriteBilled > kept {
		kept = s.OverwriteBilled
		parts = append(parts, fmt.Sprintf("billed for %s whatever is kept (the store's minimum storage duration)", days(s.OverwriteBilled)))
	}
	if kept == 0 {
		return 0, "an overwritten record is not kept", true, false
	}
	return kept, strings.Join(parts, "; "), true, false
}

// days is d in days, for a reader: "1 day", "7 days", "36 hours".
func days(d time.Duration) string {
	switch {
	case d == day:
		return "1 day"
	case d%day == 0:
		return fmt.Sprintf("%d days", d/day)
	}
	return fmt.Sprintf("%v", d.Round(time.Hour))
}

// recordSize is the size of a typical record of a lease under prefix held
// by this machine, renewed for a year: what each renewal writes.
func recordSize(prefix string, ttl time.Duration) int {
	host, _ := os.Hostname()
	now := time.Now().UTC()
	b, _ := json.Marshal(objlease.Record{Schema: 1, Name: prefix + "lease", Token: 1000, Holder: host + "/12345/abcd",
		Nonce: strings.Repeat("0", 32), State: objlease.StateHeld, TTLMillis: ttl.Milliseconds(),
		AcquiredAt: now, WrittenAt: now, Renewals: 1_000_000})
	return len(b)
}

// bucketReport is what doctor says of the bucket's settings: its JSON
// parts, and the lines of its text.
type bucketReport struct {
	bucket bucketJSON
	cost   *costJSON
	rule   *ruleJSON
}

// readBucket reads the settings of store's bucket for prefix and what they
// cost at TTL ttl. A store that is not a *providers.Bucket, or whose
// settings cannot be read, is reported as such: it never changes doctor's
// verdict.
func readBucket(ctx context.Context, store providers.Store, prefix string, ttl time.Duration) bucketReport {
	var b *providers.Bucket
	if !store.As(&b) {
		return bucketReport{bucket: bucketJSON{Versioning: "unknown", SoftDelete: "unknown", ObjectLock: "unknown", Lifecycle: "unknown",
			Notes: []string{}, Error: "the store reports no bucket settings"}}
	}
	s, err := b.BucketSettings(ctx, prefix)
	if err != nil {
		return bucketReport{bucket: bucketJSON{Versioning: "unknown", SoftDelete: "unknown", ObjectLock: "unknown", Lifecycle: "unknown",
			Notes: []string{}, Error: err.Error()}}
	}
	r := bucketReport{bucket: bucketJSON{
		Versioning: string(s.Versioning), SoftDelete: string(s.SoftDelete), SoftDeleteDays: s.SoftDeleteRetention.Hours() / 24,
		ObjectLock: string(s.ObjectLock), ObjectLockDetail: s.ObjectLockDetail, ObjectLockDays: s.ObjectLockRetention.Hours() / 24,
		Lifecycle: string(s.Lifecycle), NoncurrentExpiry: s.NoncurrentExpiry.Hours() / 24,
		OverwriteBilledDays: s.OverwriteBilled.Hours() / 24, Notes: append([]string{}, s.Notes...),
	}}
	c := versionCost(s, ttl, recordSize(prefix, ttl))
	r.cost = &c
	if c.Kept != "none" && s.Lifecycle != providers.SettingEnabled {
		if rule, ok := b.NoncurrentRule(prefix, lifecycleDays); ok {
			r.rule = &ruleJSON{Format: rule.Format, Text: rule.Text, Apply: rule.Apply, Note: rule.Note}
		}
	}
	return r
}

// caveat is the doctor caveat for the report, or "": a bucket that keeps
// what leases overwrite for ever is safe, and its cost grows without end.
func (r bucketReport) caveat() string {
	if r.cost == nil || r.cost.Kept != "forever" {
		return ""
	}
	return "the bucket keeps every record a renewal overwrites, for ever (versioning without a lifecycle rule for the prefix): " +
		"leases on it are safe, and their storage and version count grow without end (see cost: and lifecycle:)"
}

// print writes the report's lines for doctor's text output, each a
// "name:\tvalue" row of w.
func (r bucketReport) print(w io.Writer, prefix string) {
	b := r.bucket
	if b.Error != "" {
		fmt.Fprintf(w, "bucket:\tsettings could not be read: %s\n", b.Error)
		return
	}
	line := fmt.Sprintf("versioning %s, soft delete %s", b.Versioning, b.SoftDelete)
	if b.SoftDelete == string(providers.SettingEnabled) {
		line += fmt.Sprintf(" (%s)", days(time.Duration(b.SoftDeleteDays*float64(day))))
	}
	line += ", object lock " + b.ObjectLock
	if b.ObjectLockDetail != "" {
		line += " (" + b.ObjectLockDetail + ")"
	}
	if b.Versioning != string(providers.SettingOff) {
		switch b.Lifecycle {
		case string(providers.SettingEnabled):
			line += fmt.Sprintf("; a lifecycle rule deletes noncurrent versions %s %s after they are overwritten", under(prefix), days(time.Duration(b.NoncurrentExpiry*float64(day))))
		case string(providers.SettingOff):
			line += fmt.Sprintf("; no lifecycle rule expires noncurrent versions %s", under(prefix))
		default:
			line += "; lifecycle rules unknown"
		}
	}
	fmt.Fprintf(w, "bucket:\t%s\n", line)
	for _, n := range b.Notes {
		fmt.Fprintf(w, "bucket:\t%s\n", n)
	}
	if c := r.cost; c != nil {
		fmt.Fprintf(w, "cost:\t%s\n", c.line())
	}
	if r.rule != nil {
		fmt.Fprintf(w, "lifecycle:\tthis %s deletes what leases %s overwrite %s after; %s; the command below applies it:\n", r.rule.Format, under(prefix), days(lifecycleDays*day), r.rule.Note)
		for _, l := range strings.Split(r.rule.Text, "\n") {
			fmt.Fprintf(w, "\t%s\n", l)
		}
		fmt.Fprintf(w, "\t%s\n", r.rule.Apply)
	}
}

// line is the cost in a sentence.
func (c costJSON) line() string {
	ttl := time.Duration(c.TTLMs) * time.Millisecond
	perDay := fmt.Sprintf("at TTL %v a lease writes its record (about %d bytes) %s times a day, %s", ttl, c.RecordBytes, count(c.WritesPerDay), size(c.BytesPerDay))
	switch c.Kept {
	case "none":
		return fmt.Sprintf("none: %s (a lease at TTL %v writes its record %s times a day)", c.Why, ttl, count(c.WritesPerDay))
	case "forever":
		return fmt.Sprintf("%s; %s: each lease adds %s versions (%s) a day, for ever, and its key has a million versions after %.0f days (AWS documents 503 Slow Down for keys with millions of versions)",
			perDay, c.Why, count(c.WritesPerDay), size(c.BytesPerDay), math.Ceil(millionVersions/c.WritesPerDay))
	case "days":
		return fmt.Sprintf("%s; each is kept %.1f days (%s): about %s versions, %s, per lease", perDay, *c.KeptDays, c.Why, count(*c.KeptVersions), size(*c.KeptBytes))
	}
	return fmt.Sprintf("%s; unknown what the bucket keeps of them (%s): if it keeps every overwritten record, each lease adds %s a day", perDay, c.Why, size(c.BytesPerDay))
}

// under is where prefix's objects are, for a reader.
func under(prefix string) string {
	if prefix == "" {
		return "in the bucket"
	}
	return fmt.Sprintf("under %q", prefix)
}

// count is n rounded, with thousands separated: "8,640".
func count(n float64) string {
	s := fmt.Sprintf("%.0f", math.Round(n))
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// size is a byte count for a reader, in decimal units: "2.2 MB".
func size(b float64) string {
	for _, u := range []struct {
		unit string
		n    float64
	}{{"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"kB", 1e3}} {
		if b >= u.n {
			return fmt.Sprintf("%.1f %s", b/u.n, u.unit)
		}
	}
	return fmt.Sprintf("%.0f bytes", b)
}
