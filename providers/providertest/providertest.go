// Package providertest is the conformance suite every store driver runs
// from its own tests. It runs on the driver through the portable
// *providers.Bucket (as the provider's New or Open returns it, or
// providers.NewBucket over the driver) and uses only the providers.Store
// contract, so a driver that passes it behaves the way the lease protocol
// expects. It takes a Bucket, not any Store, so that what it tests is a
// driver and not a layer that could stand in for the Bucket's checks.
package providertest

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"testing"

	"github.com/objlease/objlease/providers"
)

// Config describes the driver under test.
type Config struct {
	// Bucket is the portable Bucket over the driver under test.
	Bucket *providers.Bucket
	// Prefix starts every key the suite writes (unique per run, so shared
	// buckets are safe); may be "".
	Prefix string
	// Racers and Rounds size the race tests (defaults 20 and 20).
	Racers, Rounds int

	// MissingBucket is a Bucket like Bucket on a bucket that does not exist.
	// It is required: a store without buckets of its own (mem, file) gives
	// one on a namespace nobody has made, and sets CreatesBuckets.
	MissingBucket *providers.Bucket
	// CreatesBuckets: the store has no buckets to be missing; a namespace
	// nobody made (MissingBucket) reads as empty and can be written to.
	CreatesBuckets bool
	// Unordered: the store lists keys out of lexical order (S3 Express One
	// Zone directory buckets); List must still return each key once.
	Unordered bool
	// DeleteUnconditional: the store is known to ignore the version of a
	// conditional DELETE (MinIO removes the object whatever If-Match
	// says; probe.Run reports it as probe.Report.DeleteUnconditional).
	// Preconditions then sends no DELETE with a stale or made-up version,
	// which would remove the object; every other check stays.
	DeleteUnconditional bool
	// UnknownLosers: the store may answer a racer that lost a
	// conditional write with a server error (Ceph RGW's 500, which the
	// driver reports as providers.ErrUnknownOutcome) instead of a refusal.
	// The races then judge such a racer by reading the object: it lost if
	// the object does not hold what it wrote.
	UnknownLosers bool
	// As checks what Bucket reaches with As and errors.As; nil for a driver
	// that reaches nothing native (As must refuse a target of no known
	// type either way).
	As *AsCheck
}

// AsCheck is how a provider's native types are reached.
type AsCheck struct {
	// Store fails unless s.As reaches the native client.
	Store func(s providers.Store) error
	// Error fails unless errors.As reaches the native error in err, the
	// error of a Get of a missing key.
	Error func(err error) error
}

// Run runs every conformance test as subtests of t.
func Run(t *testing.T, cfg Config) {
	if cfg.Bucket == nil || cfg.MissingBucket == nil {
		t.Fatal("providertest: Config.Bucket and Config.MissingBucket are required (MissingBucket: on a bucket that does not exist, with CreatesBuckets for a store without buckets)")
	}
	if cfg.Racers <= 0 {
		cfg.Racers = 20
	}
	if cfg.Rounds <= 0 {
		cfg.Rounds = 20
	}
	s := &suite{Config: cfg}
	t.Run("NotFound", s.testNotFound)
	t.Run("CreateGet", s.testCreateGet)
	t.Run("CreateRace", s.testCreateRace)
	t.Run("ReplaceRace", s.testReplaceRace)
	t.Run("Preconditions", s.testPreconditions)
	t.Run("Delete", s.testDelete)
	t.Run("Metadata", s.testMetadata)
	t.Run("MaxBytes", s.testMaxBytes)
	t.Run("List", s.testList)
	t.Run("UnicodeKeys", s.testUnicodeKeys)
	t.Run("KeysAsGiven", s.testKeysAsGiven)
	t.Run("StreamedWrites", s.testStreamedWrites)
	t.Run("Versions", s.testVersions)
	t.Run("Timestamps", s.testTimestamps)
	t.Run("CancelledBeforeSending", s.testCancelledBeforeSending)
	t.Run("MissingBucket", s.testMissingBucket)
	t.Run("As", s.testAs)
}

type suite struct{ Config }

func (s *suite) key(name string) string { return s.Prefix + name }

// wantErr fails t unless err matches sentinel and is a *providers.Error for
// op on key.
func wantErr(t *testing.T, err error, op, key string, sentinel error) {
	t.Helper()
	if err == nil {
		t.Errorf("%s %q: got success, want %v", op, key, sentinel)
		return
	}
	if !errors.Is(err, sentinel) {
		t.Errorf("%s %q: got %v, want %v", op, key, err, sentinel)
	}
	checkError(t, err, op, key)
}

// checkError fails t unless err is a *providers.Error naming op and key.
func checkError(t *testing.T, err error, op, key string) {
	t.Helper()
	var pe *providers.Error
	if !errors.As(err, &pe) {
		t.Errorf("%s %q: error %v (%T) is not a *providers.Error", op, key, err, err)
		return
	}
	if pe.Op != op || pe.Key != key {
		t.Errorf("%s %q: error names op %q key %q: %v", op, key, pe.Op, pe.Key, err)
	}
}

// create writes a new object and removes it when the test ends.
func (s *suite) create(t *testing.T, key string, data []byte, md map[string]string) providers.WriteResult {
	t.Helper()
	res, err := s.Bucket.Create(t.Context(), key, data, md)
	if err != nil {
		t.Fatalf("create %q: %v", key, err)
	}
	s.cleanup(t, key)
	return res
}

// cleanup deletes key, at whatever version it then has, when the test ends.
func (s *suite) cleanup(t *testing.T, key string) {
	t.Cleanup(func() {
		// t.Context is already cancelled when cleanups run.
		ctx := context.Background()
		a, err := s.Bucket.Stat(ctx, key)
		if errors.Is(err, providers.ErrNotFound) {
			return
		}
		if err == nil {
			err = s.Bucket.Delete(ctx, key, a.Version)
		}
		if err != nil {
			t.Logf("cleanup of %q: %v", key, err)
		}
	})
}

func (s *suite) get(t *testing.T, key string) *providers.Object {
	t.Helper()
	o, err := s.Bucket.Get(t.Context(), key, 0)
	if err != nil {
		t.Fatalf("get %q: %v", key, err)
	}
	return o
}

// checkObject fails t unless o holds data and md at version.
func checkObject(t *testing.T, o *providers.Object, key string, data []byte, md map[string]string, version string) {
	t.Helper()
	if o.Key != key {
		t.Errorf("get %q: Attrs.Key = %q", key, o.Key)
	}
	if !bytes.Equal(o.Data, data) {
		t.Errorf("get %q: data = %q, want %q", key, o.Data, data)
	}
	if o.Size != int64(len(data)) {
		t.Errorf("get %q: Size = %d, want %d", key, o.Size, len(data))
	}
	checkMetadata(t, "get", key, o.Metadata, md)
	if o.Version != version {
		t.Errorf("get %q: version = %q, want %q", key, o.Version, version)
	}
}

func checkMetadata(t *testing.T, op, key string, got, want map[string]string) {
	t.Helper()
	// nil and empty are the same: stores need not tell them apart.
	if len(got) != 0 || len(want) != 0 {
		if !maps.Equal(got, want) {
			t.Errorf("%s %q: metadata = %q, want %q", op, key, got, want)
		}
	}
}
