package driver

import (
	"context"
	"time"
)

// Setting is the state of one bucket setting as a driver could read it.
type Setting string

// Settings' states. The zero Setting reads as SettingUnknown.
const (
	// SettingUnknown: the store has no way to tell, or did not tell (no
	// permission to ask, not implemented): BucketSettings.Notes says which.
	SettingUnknown Setting = "unknown"
	SettingOff     Setting = "off"
	SettingEnabled Setting = "enabled"
	// SettingSuspended is for versioning only: it was enabled and is
	// suspended. Versions kept before stay; an overwrite keeps nothing.
	SettingSuspended Setting = "suspended"
)

// BucketSettings are the settings of a bucket that decide what the store
// keeps of an object it overwrites: what every renewal of a lease, which
// overwrites the record, costs in storage. None of them makes a store
// unsafe for leases; they make it costly.
type BucketSettings struct {
	// Versioning: enabled, every overwrite keeps the object's previous
	// bytes as a noncurrent version, billed as an object, until a
	// lifecycle rule or someone deletes it (S3 Versioning, GCS Object
	// Versioning, Azure blob versioning).
	Versioning Setting
	// SoftDelete: enabled, the store keeps an object's bytes for
	// SoftDeleteRetention after they are deleted or overwritten (GCS soft
	// delete; Azure blob soft delete, which keeps a blob overwritten
	// while versioning is off as a soft-deleted snapshot).
	SoftDelete          Setting
	SoftDeleteRetention time.Duration
	// ObjectLock: enabled, objects can be kept under a retention that
	// nobody may shorten (S3 Object Lock; a GCS retention policy or
	// object retention); ObjectLockDetail says which.
	// ObjectLockRetention is the retention every new object gets (S3's
	// default retention, a GCS retention policy's period), 0 if none:
	// no version of it can be deleted sooner.
	ObjectLock          Setting
	ObjectLockDetail    string
	ObjectLockRetention time.Duration
	// Lifecycle: enabled, a lifecycle rule of the bucket deletes
	// noncurrent versions of the objects under the prefix asked about
	// once they have been noncurrent for NoncurrentExpiry; off, none
	// does.
	Lifecycle        Setting
	NoncurrentExpiry time.Duration
	// OverwriteBilled is how long the store bills an object's bytes
	// after they are overwritten or deleted whatever the settings (a
	// minimum storage duration, such as Wasabi's 90 days); 0 if none is
	// known.
	OverwriteBilled time.Duration
	// Notes say, one line each, why a setting is unknown and anything
	// else the store said about them.
	Notes []string
}

// LifecycleRule is a store's lifecycle configuration as its own tools take
// it, with how to apply it.
type LifecycleRule struct {
	// Format names what Text is ("S3 lifecycle configuration, JSON").
	Format string
	// Text is the configuration.
	Text string
	// Apply is a command that applies it, reading Text from the file
	// lifecycle.json.
	Apply string
	// Note is what to know before applying it (it replaces the bucket's
	// configuration: merge it into the rules the bucket has).
	Note string
}

// BucketInspector is implemented by a driver that can read its bucket's
// settings. Middleware that wraps a Driver passes it on.
type BucketInspector interface {
	// BucketSettings reads the bucket's settings for objects under
	// prefix. A setting it cannot read (no permission to ask, a store
	// that does not implement the request) is SettingUnknown, with a
	// note; err is only for an answer that tells nothing at all (the
	// bucket does not exist, the store is unreachable).
	BucketSettings(ctx context.Context, prefix string) (BucketSettings, error)
	// NoncurrentRule is the store's lifecycle configuration that deletes
	// the noncurrent versions (and, where the store has them, the
	// soft-deleted snapshots) of objects under prefix once they have
	// been noncurrent for days days.
	NoncurrentRule(prefix string, days int) LifecycleRule
}
