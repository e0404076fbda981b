package s3store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	s3sdk "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/driver"
)

var _ driver.BucketInspector = (*store)(nil)

// day is the unit of S3's lifecycle rules.
const day = 24 * time.Hour

// wasabiBilled is how long Wasabi bills an object that is overwritten or
// deleted: its minimum storage duration ("Billing for Overwrites and
// Deleted Storage", Wasabi's documentation).
const wasabiBilled = 90 * day

// BucketSettings reads the bucket's versioning (GetBucketVersioning), object
// lock (GetObjectLockConfiguration) and lifecycle rules
// (GetBucketLifecycleConfiguration), each needing its own permission
// (s3:GetBucketVersioning, s3:GetBucketObjectLockConfiguration,
// s3:GetLifecycleConfiguration); one refused, or not implemented by an
// S3-compatible store, leaves that setting unknown with a note. S3 has no
// soft delete. On Wasabi's endpoints OverwriteBilled is 90 days.
func (s *store) BucketSettings(ctx context.Context, prefix string) (driver.BucketSettings, error) {
	bs := driver.BucketSettings{SoftDelete: driver.SettingOff}
	unknown := func(what string, err error) error {
		if fatal := s.settingsFailed(prefix, err); fatal != nil {
			return fatal
		}
		bs.Notes = append(bs.Notes, fmt.Sprintf("%s: %s", what, answerOf(err)))
		return nil
	}

	v, err := s.client.GetBucketVersioning(ctx, &s3sdk.GetBucketVersioningInput{Bucket: &s.bucket}, s.opts...)
	switch {
	case err != nil:
		bs.Versioning = driver.SettingUnknown
		if err := unknown("versioning (GetBucketVersioning)", err); err != nil {
			return bs, err
		}
	case v.Status == types.BucketVersioningStatusEnabled:
		bs.Versioning = driver.SettingEnabled
	case v.Status == types.BucketVersioningStatusSuspended:
		bs.Versioning = driver.SettingSuspended
	default: // never enabled: no status at all
		bs.Versioning = driver.SettingOff
	}

	ol, err := s.client.GetObjectLockConfiguration(ctx, &s3sdk.GetObjectLockConfigurationInput{Bucket: &s.bucket}, s.opts...)
	switch {
	case err != nil && inspect(err).code == "ObjectLockConfigurationNotFoundError":
		bs.ObjectLock = driver.SettingOff
	case err != nil:
		bs.ObjectLock = driver.SettingUnknown
		if err := unknown("object lock (GetObjectLockConfiguration)", err); err != nil {
			return bs, err
		}
	case ol.ObjectLockConfiguration == nil || ol.ObjectLockConfiguration.ObjectLockEnabled != types.ObjectLockEnabledEnabled:
		bs.ObjectLock = driver.SettingOff
	default:
		bs.ObjectLock = driver.SettingEnabled
		bs.ObjectLockDetail = "no default retention"
		if r := ol.ObjectLockConfiguration.Rule; r != nil && r.DefaultRetention != nil {
			d := r.DefaultRetention
			switch {
			case d.Days != nil:
				bs.ObjectLockDetail = fmt.Sprintf("default retention %s, %d days", d.Mode, *d.Days)
				bs.ObjectLockRetention = time.Duration(*d.Days) * day
			case d.Years != nil:
				bs.ObjectLockDetail = fmt.Sprintf("default retention %s, %d years", d.Mode, *d.Years)
				bs.ObjectLockRetention = time.Duration(*d.Years) * 365 * day
			}
		}
	}

	lc, err := s.client.GetBucketLifecycleConfiguration(ctx, &s3sdk.GetBucketLifecycleConfigurationInput{Bucket: &s.bucket}, s.opts...)
	switch {
	case err != nil && inspect(err).code == "NoSuchLifecycleConfiguration":
		bs.Lifecycle = driver.SettingOff
	case err != nil:
		bs.Lifecycle = driver.SettingUnknown
		if err := unknown("lifecycle (GetBucketLifecycleConfiguration)", err); err != nil {
			return bs, err
		}
	default:
		bs.Lifecycle = driver.SettingOff
		for _, r := range lc.Rules {
			days, kept, ok := expiresNoncurrent(r, prefix)
			if !ok {
				continue
			}
			if bs.Lifecycle == driver.SettingOff || days < bs.NoncurrentExpiry {
				bs.Lifecycle, bs.NoncurrentExpiry = driver.SettingEnabled, days
			}
			if kept > 0 {
				bs.Notes = append(bs.Notes, fmt.Sprintf("lifecycle rule %q keeps the newest %d noncurrent versions of each object whatever their age", aws.ToString(r.ID), kept))
			}
		}
	}

	if s.client != nil && isWasabi(s.client.Options().BaseEndpoint) {
		bs.OverwriteBilled = wasabiBilled
		bs.Notes = append(bs.Notes, "Wasabi bills an overwritten or deleted object for 90 days from its upload, whatever the bucket's settings")
	}
	return bs, nil
}

// expiresNoncurrent says whether lifecycle rule r deletes the noncurrent
// versions of every object under prefix, after how long, and how many of
// the newest it keeps whatever their age.
func expiresNoncurrent(r types.LifecycleRule, prefix string) (after time.Duration, kept int, ok bool) {
	e := r.NoncurrentVersionExpiration
	if r.Status != types.ExpirationStatusEnabled || e == nil || e.NoncurrentDays == nil {
		return 0, 0, false
	}
	rulePrefix := aws.ToString(r.Prefix) // the form before filters
	if f := r.Filter; f != nil {
		// A tag or a size bound leaves out a lease record (no tags,
		// a few hundred bytes).
		if f.Tag != nil || f.And != nil && len(f.And.Tags) > 0 ||
			f.ObjectSizeGreaterThan != nil && *f.ObjectSizeGreaterThan > 0 || f.ObjectSizeLessThan != nil ||
			f.And != nil && (f.And.ObjectSizeGreaterThan != nil && *f.And.ObjectSizeGreaterThan > 0 || f.And.ObjectSizeLessThan != nil) {
			return 0, 0, false
		}
		rulePrefix = aws.ToString(f.Prefix)
		if f.And != nil {
			rulePrefix = aws.ToString(f.And.Prefix)
		}
	}
	if !strings.HasPrefix(prefix, rulePrefix) {
		return 0, 0, false
	}
	return time.Duration(*e.NoncurrentDays) * day, int(aws.ToInt32(e.NewerNoncurrentVersions)), true
}

// settingsFailed is the error that ends BucketSettings, or nil for an
// answer that only leaves one setting unknown (a request refused or not
// implemented).
func (s *store) settingsFailed(prefix string, err error) error {
	m := s.mapError("settings", prefix, read, err)
	a := inspect(err)
	switch {
	case errors.Is(m, providers.ErrNoBucket), errors.Is(m, providers.ErrUnreachable),
		errors.Is(m, providers.ErrWrongEndpoint), errors.Is(m, providers.ErrBadURL),
		errors.Is(m, providers.ErrPermission) && !errors.Is(m, providers.ErrAccessDenied),
		a.ctxErr, a.status == 0:
		return m
	}
	return nil
}

// answerOf is a store's answer in a few words: "403 AccessDenied".
func answerOf(err error) string {
	var ae smithy.APIError
	if a := inspect(err); a.status != 0 && errors.As(err, &ae) {
		return fmt.Sprintf("%d %s", a.status, ae.ErrorCode())
	}
	return err.Error()
}

// NoncurrentRule is an S3 lifecycle configuration (the JSON of the AWS CLI)
// with one rule for prefix: noncurrent versions are deleted days days after
// they became noncurrent, and delete markers left with no version behind
// them are removed.
func (s *store) NoncurrentRule(prefix string, days int) driver.LifecycleRule {
	type filter struct {
		Prefix string `json:"Prefix"`
	}
	type rule struct {
		ID         string `json:"ID"`
		Filter     filter `json:"Filter"`
		Status     string `json:"Status"`
		Noncurrent struct {
			NoncurrentDays int `json:"NoncurrentDays"`
		} `json:"NoncurrentVersionExpiration"`
		Expiration struct {
			ExpiredObjectDeleteMarker bool `json:"ExpiredObjectDeleteMarker"`
		} `json:"Expiration"`
	}
	r := rule{ID: ruleID(prefix), Filter: filter{Prefix: prefix}, Status: "Enabled"}
	r.Noncurrent.NoncurrentDays = max(days, 1)
	r.Expiration.ExpiredObjectDeleteMarker = true
	text, _ := json.MarshalIndent(struct {
		Rules []rule `json:"Rules"`
	}{[]rule{r}}, "", "  ")
	apply := "aws s3api put-bucket-lifecycle-configuration --bucket " + s.bucket + " --lifecycle-configuration file://lifecycle.json"
	if s.client != nil {
		if ep := aws.ToString(s.client.Options().BaseEndpoint); ep != "" {
			apply += " --endpoint-url " + ep
		}
	}
	return driver.LifecycleRule{
		Format: "S3 lifecycle configuration (JSON)",
		Text:   string(text),
		Apply:  apply,
		Note: "it replaces the bucket's whole lifecycle configuration: add the rule to the rules " +
			"aws s3api get-bucket-lifecycle-configuration lists, if there are any",
	}
}

// ruleID names the rule after the prefix, within S3's 255 characters.
func ruleID(prefix string) string {
	id := "objlease-noncurrent-" + strings.Trim(unsafeID.ReplaceAllString(prefix, "-"), "-")
	if id == "objlease-noncurrent-" {
		id = "objlease-noncurrent"
	}
	return id[:min(len(id), 255)]
}

var unsafeID = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// wasabiDomain is the domain of Wasabi's S3 endpoints
// (s3.wasabisys.com, s3.eu-central-1.wasabisys.com, ...).
const wasabiDomain = "wasabisys.com"

// isWasabi reports whether endpoint, a client's BaseEndpoint, is Wasabi's.
func isWasabi(endpoint *string) bool {
	u, err := url.Parse(aws.ToString(endpoint))
	if err != nil {
		return false
	}
	h := u.Hostname()
	return h == wasabiDomain || strings.HasSuffix(h, "."+wasabiDomain)
}
