package gcsstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"

	"github.com/objlease/objlease/providers/driver"
)

var _ driver.BucketInspector = (*store)(nil)

// day is the unit of GCS's lifecycle conditions.
const day = 24 * time.Hour

// BucketSettings reads the bucket's attributes (one request, which needs
// storage.buckets.get: roles/storage.objectUser lacks it, and then every
// setting is unknown with a note): Object Versioning, the soft delete
// policy, a retention policy or object retention (ObjectLock), and
// lifecycle rules that delete noncurrent versions under prefix.
func (s *store) BucketSettings(ctx context.Context, prefix string) (driver.BucketSettings, error) {
	ctx, slot := withReplySlot(ctx)
	a, err := s.bucket.Attrs(ctx)
	if err != nil {
		var ge *googleapi.Error
		if errors.As(err, &ge) && (ge.Code == http.StatusForbidden || ge.Code == http.StatusNotImplemented) {
			return driver.BucketSettings{Notes: []string{fmt.Sprintf("bucket attributes (storage.buckets.get): %d %s", ge.Code, firstLine(ge.Message))}}, nil
		}
		if errors.Is(err, storage.ErrBucketNotExist) {
			err = fmt.Errorf("%w: %w", driver.ErrNoBucket, err)
		}
		return driver.BucketSettings{}, s.mapErr(ctx, slot, "settings", prefix, err)
	}
	s.seen.Store(true)
	bs := driver.BucketSettings{
		Versioning: driver.SettingOff,
		SoftDelete: driver.SettingOff,
		ObjectLock: driver.SettingOff,
		Lifecycle:  driver.SettingOff,
	}
	if a.VersioningEnabled {
		bs.Versioning = driver.SettingEnabled
	}
	if p := a.SoftDeletePolicy; p != nil && p.RetentionDuration > 0 {
		bs.SoftDelete, bs.SoftDeleteRetention = driver.SettingEnabled, p.RetentionDuration
	}
	var lock []string
	if p := a.RetentionPolicy; p != nil {
		state := "unlocked"
		if p.IsLocked {
			state = "locked"
		}
		lock = append(lock, fmt.Sprintf("retention policy of %v (%s): an object cannot be overwritten before it is that old", p.RetentionPeriod, state))
		bs.ObjectLockRetention = p.RetentionPeriod
	}
	if a.ObjectRetentionMode == "Enabled" {
		lock = append(lock, "object retention enabled")
	}
	if len(lock) > 0 {
		bs.ObjectLock, bs.ObjectLockDetail = driver.SettingEnabled, strings.Join(lock, "; ")
	}
	for _, r := range a.Lifecycle.Rules {
		after, ok := deletesNoncurrent(r, prefix)
		if ok && (bs.Lifecycle == driver.SettingOff || after < bs.NoncurrentExpiry) {
			bs.Lifecycle, bs.NoncurrentExpiry = driver.SettingEnabled, after
		}
	}
	return bs, nil
}

// deletesNoncurrent says whether lifecycle rule r deletes every noncurrent
// version under prefix, and how long after it became noncurrent at most.
func deletesNoncurrent(r storage.LifecycleRule, prefix string) (time.Duration, bool) {
	c := r.Condition
	if r.Action.Type != storage.DeleteAction || c.Liveness == storage.Live ||
		len(c.MatchesStorageClasses) > 0 || len(c.MatchesSuffix) > 0 || c.NumNewerVersions > 0 ||
		!c.CreatedBefore.IsZero() || !c.NoncurrentTimeBefore.IsZero() || !c.CustomTimeBefore.IsZero() || c.DaysSinceCustomTime > 0 {
		return 0, false
	}
	if len(c.MatchesPrefix) > 0 && !anyPrefixOf(c.MatchesPrefix, prefix) {
		return 0, false
	}
	switch {
	case c.DaysSinceNoncurrentTime > 0:
		// AgeInDays, if set too, is counted from the version's creation,
		// before it became noncurrent: it never delays the deletion more.
		return time.Duration(c.DaysSinceNoncurrentTime) * day, true
	case c.Liveness == storage.Archived && c.AgeInDays > 0:
		// Counted from creation: a noncurrent version is deleted at most
		// that long after it became noncurrent.
		return time.Duration(c.AgeInDays) * day, true
	}
	return 0, false
}

func anyPrefixOf(prefixes []string, prefix string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(prefix, p) {
			return true
		}
	}
	return false
}

// NoncurrentRule is a GCS lifecycle configuration (the JSON file gcloud
// takes) with one rule: delete a version under prefix days days after it
// became noncurrent. Soft delete is a setting of the whole bucket, not of
// a prefix: the note says how to turn it off.
func (s *store) NoncurrentRule(prefix string, days int) driver.LifecycleRule {
	type condition struct {
		IsLive                  bool     `json:"isLive"`
		DaysSinceNoncurrentTime int      `json:"daysSinceNoncurrentTime"`
		MatchesPrefix           []string `json:"matchesPrefix,omitempty"`
	}
	type rule struct {
		Action struct {
			Type string `json:"type"`
		} `json:"action"`
		Condition condition `json:"condition"`
	}
	r := rule{Condition: condition{DaysSinceNoncurrentTime: max(days, 1)}}
	r.Action.Type = "Delete"
	if prefix != "" {
		r.Condition.MatchesPrefix = []string{prefix}
	}
	var doc struct {
		Lifecycle struct {
			Rule []rule `json:"rule"`
		} `json:"lifecycle"`
	}
	doc.Lifecycle.Rule = []rule{r}
	text, _ := json.MarshalIndent(doc, "", "  ")
	return driver.LifecycleRule{
		Format: "GCS lifecycle configuration (JSON)",
		Text:   string(text),
		Apply:  "gcloud storage buckets update gs://" + s.name + " --lifecycle-file=lifecycle.json",
		Note: "it replaces the bucket's lifecycle configuration: add the rule to the rules " +
			"gcloud storage buckets describe gs://" + s.name + " --format='default(lifecycle_config)' lists, if there are any. " +
			"Soft delete keeps every overwritten record for its retention whatever the rules: keep leases in a bucket without it " +
			"(gcloud storage buckets update gs://" + s.name + " --clear-soft-delete)",
	}
}
