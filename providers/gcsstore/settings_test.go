package gcsstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	raw "google.golang.org/api/storage/v1"

	"github.com/objlease/objlease/providers"
)

// TestBucketSettings: what BucketSettings reads of a bucket resource as
// GCS sends it, and of a refusal and a missing bucket.
func TestBucketSettings(t *testing.T) {
	const bucket = `{"kind":"storage#bucket","name":%q,"versioning":{"enabled":true},
"softDeletePolicy":{"retentionDurationSeconds":"604800","effectiveTime":"2026-01-01T00:00:00Z"},
"retentionPolicy":{"retentionPeriod":"86400","effectiveTime":"2026-01-01T00:00:00Z"},
"lifecycle":{"rule":[
 {"action":{"type":"Delete"},"condition":{"isLive":false,"daysSinceNoncurrentTime":3,"matchesPrefix":["logs/"]}},
 {"action":{"type":"SetStorageClass","storageClass":"COLDLINE"},"condition":{"isLive":false,"daysSinceNoncurrentTime":1}},
 {"action":{"type":"Delete"},"condition":{"isLive":false,"numNewerVersions":3}},
 {"action":{"type":"Delete"},"condition":{"isLive":false,"daysSinceNoncurrentTime":5,"matchesPrefix":["leases/"]}},
 {"action":{"type":"Delete"},"condition":{"isLive":false,"age":2}}
]}}`
	f := newFakeGCS(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		fmt.Fprintf(w, bucket, testBucket)
	})
	got, err := New(f.client(t, nil), testBucket).BucketSettings(t.Context(), "leases/job")
	if err != nil {
		t.Fatal(err)
	}
	if got.Versioning != providers.SettingEnabled || got.SoftDelete != providers.SettingEnabled || got.SoftDeleteRetention != 7*24*time.Hour ||
		got.ObjectLock != providers.SettingEnabled || got.ObjectLockRetention != 24*time.Hour ||
		got.Lifecycle != providers.SettingEnabled || got.NoncurrentExpiry != 2*24*time.Hour {
		t.Fatalf("%+v", got)
	}

	f = newFakeGCS(t, gcsError(403, "forbidden", "alice does not have storage.buckets.get access to the Google Cloud Storage bucket."))
	got, err = New(f.client(t, nil), testBucket).BucketSettings(t.Context(), "leases/")
	if err != nil || got.Versioning != providers.SettingUnknown || got.SoftDelete != providers.SettingUnknown ||
		len(got.Notes) != 1 || !strings.Contains(got.Notes[0], "storage.buckets.get): 403 alice does not have") {
		t.Fatalf("refused: %+v, %v", got, err)
	}

	f = newFakeGCS(t, gcsError(404, "notFound", "The specified bucket does not exist."))
	_, err = New(f.client(t, nil), testBucket).BucketSettings(t.Context(), "leases/")
	if !errors.Is(err, providers.ErrNoBucket) {
		t.Fatalf("missing bucket: %v, want ErrNoBucket", err)
	}
}

func TestDeletesNoncurrent(t *testing.T) {
	del := storage.LifecycleAction{Type: storage.DeleteAction}
	for _, c := range []struct {
		name string
		rule storage.LifecycleRule
		want time.Duration
	}{
		{"days since noncurrent", storage.LifecycleRule{Action: del, Condition: storage.LifecycleCondition{Liveness: storage.Archived, DaysSinceNoncurrentTime: 1}}, 24 * time.Hour},
		{"prefix", storage.LifecycleRule{Action: del, Condition: storage.LifecycleCondition{DaysSinceNoncurrentTime: 1, MatchesPrefix: []string{"x/", "leases/"}}}, 24 * time.Hour},
		{"archived by age", storage.LifecycleRule{Action: del, Condition: storage.LifecycleCondition{Liveness: storage.Archived, AgeInDays: 4}}, 4 * 24 * time.Hour},
		{"live objects", storage.LifecycleRule{Action: del, Condition: storage.LifecycleCondition{Liveness: storage.Live, AgeInDays: 4}}, 0},
		{"any object by age", storage.LifecycleRule{Action: del, Condition: storage.LifecycleCondition{AgeInDays: 4}}, 0},
		{"other prefix", storage.LifecycleRule{Action: del, Condition: storage.LifecycleCondition{DaysSinceNoncurrentTime: 1, MatchesPrefix: []string{"logs/"}}}, 0},
		{"suffix", storage.LifecycleRule{Action: del, Condition: storage.LifecycleCondition{DaysSinceNoncurrentTime: 1, MatchesSuffix: []string{".log"}}}, 0},
		{"newer versions", storage.LifecycleRule{Action: del, Condition: storage.LifecycleCondition{DaysSinceNoncurrentTime: 1, NumNewerVersions: 2}}, 0},
		{"storage class", storage.LifecycleRule{Action: storage.LifecycleAction{Type: storage.SetStorageClassAction, StorageClass: "COLDLINE"}, Condition: storage.LifecycleCondition{DaysSinceNoncurrentTime: 1}}, 0},
	} {
		got, ok := deletesNoncurrent(c.rule, "leases/job")
		if got != c.want || ok != (c.want > 0) {
			t.Errorf("%s: %v, %v; want %v", c.name, got, ok, c.want)
		}
	}
}

// TestNoncurrentRule: the rule is the JSON API's lifecycle resource,
// under "lifecycle" as gcloud's lifecycle file has it.
func TestNoncurrentRule(t *testing.T) {
	f := newFakeGCS(t, func(w http.ResponseWriter, r *http.Request) {})
	rule, ok := New(f.client(t, nil), testBucket).NoncurrentRule("leases/", 1)
	var doc struct {
		Lifecycle raw.BucketLifecycle `json:"lifecycle"`
	}
	if !ok || json.Unmarshal([]byte(rule.Text), &doc) != nil || len(doc.Lifecycle.Rule) != 1 {
		t.Fatalf("%+v", rule)
	}
	r := doc.Lifecycle.Rule[0]
	if r.Action.Type != "Delete" || r.Condition.IsLive == nil || *r.Condition.IsLive || r.Condition.DaysSinceNoncurrentTime != 1 ||
		fmt.Sprint(r.Condition.MatchesPrefix) != "[leases/]" {
		t.Fatalf("%s", rule.Text)
	}
	if rule.Apply != "gcloud storage buckets update gs://"+testBucket+" --lifecycle-file=lifecycle.json" || !strings.Contains(rule.Note, "--clear-soft-delete") {
		t.Errorf("%+v", rule)
	}
}
