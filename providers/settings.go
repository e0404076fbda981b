package providers

import (
	"context"
	"fmt"

	"github.com/objlease/objlease/providers/driver"
)

// Bucket settings, the same types as package driver's (see there).
type (
	// BucketSettings are the settings of a bucket that decide what the
	// store keeps of an object it overwrites.
	BucketSettings = driver.BucketSettings
	// Setting is the state of one bucket setting.
	Setting = driver.Setting
	// LifecycleRule is a store's lifecycle configuration as its own tools
	// take it.
	LifecycleRule = driver.LifecycleRule
)

// Settings' states.
const (
	SettingUnknown   = driver.SettingUnknown
	SettingOff       = driver.SettingOff
	SettingEnabled   = driver.SettingEnabled
	SettingSuspended = driver.SettingSuspended
)

// BucketSettings reads the settings of the store's bucket that decide what
// it keeps of an object it overwrites, for objects under prefix:
// versioning, soft delete, object lock and a lifecycle rule that expires
// noncurrent versions. Every renewal of a lease overwrites its record, so
// these say what leases cost in storage there. A setting the driver cannot
// read, on a driver that reads none (driver.BucketInspector), is
// SettingUnknown, with a note saying why. The call, which may send a few
// requests, is bounded by the request timeout; it is not counted in
// objlease.store.requests.
func (b *Bucket) BucketSettings(ctx context.Context, prefix string) (BucketSettings, error) {
	bi, ok := b.d.(driver.BucketInspector)
	if !ok {
		s := BucketSettings{Notes: []string{fmt.Sprintf("the %s store reports no bucket settings", b.d.Properties().Name)}}
		return known(s), nil
	}
	if b.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, b.timeout, &TimeoutError{After: b.timeout})
		defer cancel()
	}
	s, err := bi.BucketSettings(ctx, prefix)
	if err != nil {
		if c := context.Cause(ctx); c != nil && ctx.Err() != nil {
			err = fmt.Errorf("%w: %w", c, err)
		}
		return BucketSettings{}, wrap("settings", prefix, err)
	}
	return known(s), nil
}

// known fills the settings a driver left zero with SettingUnknown.
func known(s BucketSettings) BucketSettings {
	for _, p := range []*Setting{&s.Versioning, &s.SoftDelete, &s.ObjectLock, &s.Lifecycle} {
		if *p == "" {
			*p = SettingUnknown
		}
	}
	return s
}

// NoncurrentRule is the store's lifecycle configuration that deletes the
// noncurrent versions of objects under prefix once they have been
// noncurrent for days days, and how to apply it; ok is false on a driver
// that has none (driver.BucketInspector).
func (b *Bucket) NoncurrentRule(prefix string, days int) (rule LifecycleRule, ok bool) {
	bi, ok := b.d.(driver.BucketInspector)
	if !ok {
		return LifecycleRule{}, false
	}
	rule = bi.NoncurrentRule(prefix, days)
	return rule, rule.Text != ""
}
