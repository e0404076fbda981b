package integration

// objlease on versioned buckets, where every renewal keeps the record it
// overwrites as a noncurrent version, and where several S3-compatible
// servers have broken conditional writes: the conformance, protocol and
// fence suites on a bucket with versioning enabled (MinIO, and versitygw
// with its versioning directory), the versions renewals leave, what each
// store's driver reads of the bucket's settings, and what doctor says of
// them (docs/scale.md#versioned-buckets, docs/stores.md).

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/aws/aws-sdk-go-v2/aws"
	s3sdk "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/objlease/objlease/integration/emulator"
	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/fence/fencetest"
	"github.com/objlease/objlease/objlease/leasetest"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/gcsstore"
	"github.com/objlease/objlease/providers/providertest"
	"github.com/objlease/objlease/providers/s3store"
)

// versionedServer is an S3 server that can version a bucket.
type versionedServer struct {
	name  string
	start func(testing.TB) *emulator.S3
}

var versionedServers = []versionedServer{
	{"MinIO", emulator.MinIO},
	{"versitygw", emulator.VersityGWVersioned},
}

// newBucket creates a bucket of its own on e, with S3 Object Lock if lock
// (which MinIO allows only on a new bucket, and which enables versioning),
// and returns a target on it.
func newBucket(t *testing.T, e *emulator.S3, lock bool) s3Target {
	t.Helper()
	var b [6]byte
	rand.Read(b[:])
	own := *e
	own.Bucket = "objlease-v-" + hex.EncodeToString(b[:])
	target := s3Target{bucket: own.Bucket, prefix: emulator.Prefix(t), emu: &own}
	in := &s3sdk.CreateBucketInput{Bucket: aws.String(own.Bucket)}
	if lock {
		in.ObjectLockEnabledForBucket = aws.Bool(true)
	}
	if _, err := target.client(t, nil).CreateBucket(t.Context(), in); err != nil {
		t.Fatalf("create bucket %s: %v", own.Bucket, err)
	}
	return target
}

// versioned is a new bucket on e with versioning set to status.
func versioned(t *testing.T, e *emulator.S3, status types.BucketVersioningStatus) s3Target {
	t.Helper()
	target := newBucket(t, e, false)
	setVersioning(t, target, status)
	return target
}

func setVersioning(t *testing.T, target s3Target, status types.BucketVersioningStatus) {
	t.Helper()
	_, err := target.client(t, nil).PutBucketVersioning(t.Context(), &s3sdk.PutBucketVersioningInput{
		Bucket:                  aws.String(target.bucket),
		VersioningConfiguration: &types.VersioningConfiguration{Status: status},
	})
	if err != nil {
		t.Fatalf("versioning %s on %s: %v", status, target.bucket, err)
	}
}

// settings reads st's bucket settings for prefix.
func settings(t *testing.T, st *providers.Bucket, prefix string) providers.BucketSettings {
	t.Helper()
	s, err := st.BucketSettings(t.Context(), prefix)
	if err != nil {
		t.Fatalf("bucket settings: %v", err)
	}
	t.Logf("settings: %+v", s)
	return s
}

// TestVersionedConformance: the store contract on a versioned MinIO
// bucket, DELETE with a stale version left out as on any MinIO bucket.
// versitygw fails it on a versioned bucket, for the reasons
// TestVersitygwVersionedDeleteMarker pins down.
func TestVersionedConformance(t *testing.T) {
	target := versioned(t, emulator.MinIO(t), types.BucketVersioningStatusEnabled)
	providertest.Run(t, providertest.Config{
		Bucket:              target.store(t, nil),
		Prefix:              target.prefix,
		MissingBucket:       s3store.New(target.client(t, nil), randomName()),
		DeleteUnconditional: true,
	})
}

// TestVersitygwVersionedDeleteMarker pins down where versitygw breaks
// conditional writes on a versioned bucket, once an object was deleted
// (a delete marker now its current version): If-None-Match: * on its key
// is refused with 412 although the object is gone, and If-Match with the
// ETag of the version before the delete is accepted although that is not
// the current version. No lease operation deletes its record (release
// writes it back), so leases and fences never meet it; a record deleted by
// hand does. It fails the day versitygw answers as S3 does, so that
// docs/stores.md changes.
func TestVersitygwVersionedDeleteMarker(t *testing.T) {
	// MinIO, for comparison, answers as S3 does.
	t.Run("MinIO", func(t *testing.T) {
		target := versioned(t, emulator.MinIO(t), types.BucketVersioningStatusEnabled)
		cerr, rerr := afterDelete(t, target)
		if cerr != nil || !errors.Is(rerr, providers.ErrPrecondition) {
			t.Fatalf("after the delete: create %v, want success; replace at the deleted version %v, want ErrPrecondition", cerr, rerr)
		}
	})
	target := versioned(t, emulator.VersityGWVersioned(t), types.BucketVersioningStatusEnabled)
	st := target.store(t, nil)
	ctx := t.Context()
	cerr, rerr := afterDelete(t, target)
	if !errors.Is(cerr, providers.ErrPrecondition) || rerr != nil {
		t.Fatalf("this versitygw answers as S3 does after a delete on a versioned bucket (create: %v, replace at the deleted version: %v): docs/stores.md must change", cerr, rerr)
	}

	// What leases make of it, their record deleted by hand: a client
	// that never saw the key cannot acquire it; the one that released it
	// takes it back, by a write at the version before the delete.
	lkey := target.prefix + "lease"
	opts := objlease.Options{TTL: time.Second}
	last, err := objlease.New(st, lkey, opts)
	if err != nil {
		t.Fatal(err)
	}
	l, err := last.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := target.client(t, nil).DeleteObject(ctx, &s3sdk.DeleteObjectInput{Bucket: aws.String(target.bucket), Key: aws.String(lkey)}); err != nil {
		t.Fatal(err)
	}
	fresh, err := objlease.New(st, lkey, opts)
	if err != nil {
		t.Fatal(err)
	}
	_, ferr := fresh.TryAcquire(ctx)
	l2, lerr := last.TryAcquire(ctx)
	t.Logf("record deleted by hand: a new client's acquire %v; the last holder's %v", ferr, lerr)
	if ferr == nil || lerr != nil {
		t.Fatalf("a new client's acquire: %v, want an error; the last holder's: %v, want the lease", ferr, lerr)
	}
	l2.Release(ctx)
}

// afterDelete creates an object on target, deletes it at its version,
// and returns what a create of its key then answers and what a replace at
// the deleted version answers, each on a key of its own.
func afterDelete(t *testing.T, target s3Target) (createErr, replaceErr error) {
	t.Helper()
	st := target.store(t, nil)
	ctx := t.Context()
	deleted := func(key string) string {
		v := mustCreateS3(t, st, key, []byte("one"))
		if err := st.Delete(ctx, key, v); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Get(ctx, key, 0); !errors.Is(err, providers.ErrNotFound) {
			t.Fatalf("get after the delete: %v, want ErrNotFound", err)
		}
		return v
	}
	deleted(target.prefix + "created")
	_, createErr = st.Create(ctx, target.prefix+"created", []byte("two"), nil)
	v := deleted(target.prefix + "replaced")
	_, replaceErr = st.Replace(ctx, target.prefix+"replaced", []byte("stale"), nil, v)
	t.Logf("after the delete: create %v; replace at the deleted version %v", createErr, replaceErr)
	return createErr, replaceErr
}

func TestVersionedProtocol(t *testing.T) {
	for _, srv := range versionedServers {
		t.Run(srv.name, func(t *testing.T) {
			target := versioned(t, srv.start(t), types.BucketVersioningStatusEnabled)
			st := target.store(t, nil)
			leasetest.Run(t, leasetest.Config{Store: st, Prefix: target.prefix + "lease/"})
			fencetest.Run(t, fencetest.Config{Store: st, Prefix: target.prefix + "fence/"})
		})
	}
}

// TestVersionedRenewalsKeepVersions: what docs/scale.md counts. On a
// versioned bucket the acquisition, each renewal and the release each
// leave a version of the record: 1 + 9 + 1 = 11 for 9 renewals.
func TestVersionedRenewalsKeepVersions(t *testing.T) {
	for _, srv := range versionedServers {
		t.Run(srv.name, func(t *testing.T) {
			target := versioned(t, srv.start(t), types.BucketVersioningStatusEnabled)
			ctx := t.Context()
			key := target.prefix + "lease"
			c, err := objlease.New(target.store(t, nil), key, objlease.Options{TTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			l, err := c.TryAcquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			const renewals = 9
			for range renewals {
				if err := l.Renew(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			out, err := target.client(t, nil).ListObjectVersions(ctx, &s3sdk.ListObjectVersionsInput{Bucket: aws.String(target.bucket), Prefix: aws.String(key)})
			if err != nil {
				t.Fatal(err)
			}
			var sizes []int64
			for _, v := range out.Versions {
				sizes = append(sizes, aws.ToInt64(v.Size))
			}
			if want := 1 + renewals + 1; len(out.Versions) != want {
				t.Fatalf("%d versions of the record (sizes %v), want %d", len(out.Versions), sizes, want)
			}
			t.Logf("%d versions of the record after %d renewals, of %v bytes", len(out.Versions), renewals, sizes)
		})
	}
}

// TestVersionedBucketSettings: what the S3 driver reads of a bucket's
// settings on each server: versioning (off, enabled, suspended), the
// lifecycle rule its NoncurrentRule proposes once applied, and object
// lock with a default retention.
func TestVersionedBucketSettings(t *testing.T) {
	t.Run("MinIO", func(t *testing.T) {
		e := emulator.MinIO(t)
		plain := newBucket(t, e, false)
		if s := settings(t, plain.store(t, nil), plain.prefix); s.Versioning != providers.SettingOff || s.ObjectLock != providers.SettingOff {
			t.Fatalf("a new bucket: versioning %s, object lock %s; want off, off", s.Versioning, s.ObjectLock)
		}

		target := versioned(t, e, types.BucketVersioningStatusEnabled)
		st := target.store(t, nil)
		s := settings(t, st, target.prefix)
		if s.Versioning != providers.SettingEnabled || s.Lifecycle != providers.SettingOff || s.SoftDelete != providers.SettingOff {
			t.Fatalf("versioning %s, lifecycle %s, soft delete %s; want enabled, off, off", s.Versioning, s.Lifecycle, s.SoftDelete)
		}
		applyRule(t, target, st)
		if s := settings(t, st, target.prefix); s.Lifecycle != providers.SettingEnabled || s.NoncurrentExpiry != 24*time.Hour {
			t.Fatalf("after the rule: lifecycle %s after %v; want enabled after 24h", s.Lifecycle, s.NoncurrentExpiry)
		}
		// Another prefix is not covered by the rule.
		if s := settings(t, st, "elsewhere/"); s.Lifecycle != providers.SettingOff {
			t.Fatalf("a prefix the rule does not cover: lifecycle %s, want off", s.Lifecycle)
		}

		setVersioning(t, target, types.BucketVersioningStatusSuspended)
		if s := settings(t, st, target.prefix); s.Versioning != providers.SettingSuspended {
			t.Fatalf("suspended: versioning %s", s.Versioning)
		}

		locked := newBucket(t, e, true)
		_, err := locked.client(t, nil).PutObjectLockConfiguration(t.Context(), &s3sdk.PutObjectLockConfigurationInput{
			Bucket: aws.String(locked.bucket),
			ObjectLockConfiguration: &types.ObjectLockConfiguration{ObjectLockEnabled: types.ObjectLockEnabledEnabled,
				Rule: &types.ObjectLockRule{DefaultRetention: &types.DefaultRetention{Mode: types.ObjectLockRetentionModeGovernance, Days: aws.Int32(1)}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		s = settings(t, locked.store(t, nil), locked.prefix)
		if s.Versioning != providers.SettingEnabled || s.ObjectLock != providers.SettingEnabled || s.ObjectLockRetention != 24*time.Hour {
			t.Fatalf("object lock: versioning %s, object lock %s (%s, %v); want enabled, enabled, 24h", s.Versioning, s.ObjectLock, s.ObjectLockDetail, s.ObjectLockRetention)
		}
	})

	t.Run("versitygw", func(t *testing.T) {
		e := emulator.VersityGWVersioned(t)
		plain := newBucket(t, e, false)
		settings(t, plain.store(t, nil), plain.prefix)
		target := versioned(t, e, types.BucketVersioningStatusEnabled)
		if s := settings(t, target.store(t, nil), target.prefix); s.Versioning != providers.SettingEnabled {
			t.Fatalf("versioning %s, want enabled", s.Versioning)
		}
	})

	t.Run("versitygw without a versioning directory", func(t *testing.T) {
		target := newS3Target(t)
		if target.real() {
			t.Skip("a real bucket")
		}
		settings(t, target.store(t, nil), target.prefix)
	})
}

// applyRule applies the lifecycle rule st proposes for target's prefix, as
// a user would with the AWS CLI: the JSON as it is printed.
func applyRule(t *testing.T, target s3Target, st *providers.Bucket) {
	t.Helper()
	rule, ok := st.NoncurrentRule(target.prefix, 1)
	if !ok {
		t.Fatal("no lifecycle rule")
	}
	var lc types.BucketLifecycleConfiguration
	if err := json.Unmarshal([]byte(rule.Text), &lc); err != nil {
		t.Fatalf("the rule does not parse as an S3 lifecycle configuration: %v\n%s", err, rule.Text)
	}
	_, err := target.client(t, nil).PutBucketLifecycleConfiguration(t.Context(), &s3sdk.PutBucketLifecycleConfigurationInput{
		Bucket: aws.String(target.bucket), LifecycleConfiguration: &lc,
	})
	if err != nil {
		t.Fatalf("apply the rule:\n%s\n%v", rule.Text, err)
	}
}

// TestVersionedDoctor: on a versioned MinIO bucket doctor still says safe
// and exits 0, and reports versioning, the versions kept for ever, and the
// lifecycle rule to apply; once it is applied, the versions kept for two
// days at most and no rule.
func TestVersionedDoctor(t *testing.T) {
	target := versioned(t, emulator.MinIO(t), types.BucketVersioningStatusEnabled)
	e := target.emu
	env := s3CLIEnv(e, e.AccessKey, e.SecretKey)
	u := s3CLIURL(e.Endpoint, e.Bucket, target.prefix)

	o := runCLI(t, env, "doctor", u)
	if o.code != 0 {
		t.Fatalf("doctor: exit %d; stderr:\n%s", o.code, o.stderr)
	}
	t.Logf("doctor:\n%s", o.stdout)
	prefix := regexp.QuoteMeta(`"` + target.prefix + `"`)
	for _, want := range []string{
		`(?m)^bucket: +versioning enabled, soft delete off, object lock off; no lifecycle rule expires noncurrent versions under ` + prefix + `$`,
		`(?m)^caveat: +the bucket keeps every record a renewal overwrites, for ever`,
		`(?m)^cost: +at TTL 30s a lease writes its record \(about \d+ bytes\) 8,640 times a day, .*each lease adds 8,640 versions \(.*\) a day, for ever`,
		`(?m)^lifecycle: +this S3 lifecycle configuration \(JSON\) deletes what leases under ` + prefix + ` overwrite 1 day after; it replaces`,
		`(?m)^ +"NoncurrentDays": 1$`,
		`(?m)^ +` + regexp.QuoteMeta("aws s3api put-bucket-lifecycle-configuration --bucket "+target.bucket+" --lifecycle-configuration file://lifecycle.json --endpoint-url "+e.Endpoint) + `$`,
	} {
		if !regexp.MustCompile(want).MatchString(o.stdout) {
			t.Errorf("doctor's output lacks %s", want)
		}
	}

	var d struct {
		Safe   bool `json:"safe"`
		Bucket struct {
			Versioning string `json:"versioning"`
			Lifecycle  string `json:"lifecycle"`
		} `json:"bucket"`
		Cost *struct {
			WritesPerDay float64  `json:"writes_per_day"`
			Kept         string   `json:"kept"`
			KeptDays     *float64 `json:"kept_days"`
		} `json:"cost"`
		Rule *struct {
			Text string `json:"text"`
		} `json:"lifecycle_rule"`
	}
	doctorJSON := func(args ...string) {
		t.Helper()
		o := runCLI(t, env, append([]string{"doctor", "-o", "json"}, append(args, u)...)...)
		d.Cost, d.Rule = nil, nil
		if err := json.Unmarshal([]byte(o.stdout), &d); err != nil || o.code != 0 || !d.Safe {
			t.Fatalf("doctor -o json: exit %d, %v, safe %v\n%s\n%s", o.code, err, d.Safe, o.stdout, o.stderr)
		}
	}
	doctorJSON("--ttl", "10s")
	if d.Bucket.Versioning != "enabled" || d.Bucket.Lifecycle != "off" || d.Cost == nil || d.Cost.Kept != "forever" || d.Cost.WritesPerDay != 25920 || d.Rule == nil {
		t.Fatalf("doctor -o json --ttl 10s: %+v, cost %+v, rule %v", d.Bucket, d.Cost, d.Rule != nil)
	}

	applyRule(t, target, target.store(t, nil))
	doctorJSON()
	if d.Bucket.Lifecycle != "enabled" || d.Cost == nil || d.Cost.Kept != "days" || d.Cost.KeptDays == nil || *d.Cost.KeptDays != 2 || d.Rule != nil {
		t.Fatalf("doctor -o json with the rule applied: %+v, cost %+v, rule %v", d.Bucket, d.Cost, d.Rule != nil)
	}
}

// TestGCSVersionedSettings: what the GCS driver reads of a bucket made
// with Object Versioning on fake-gcs-server, and of one without.
func TestGCSVersionedSettings(t *testing.T) {
	g := newGCSTarget(t)
	if g.real() {
		t.Skip("a real bucket: the bucket is not created here")
	}
	c := g.client(t, nil)
	for _, on := range []bool{false, true} {
		var b [6]byte
		rand.Read(b[:])
		name := "objlease-v-" + hex.EncodeToString(b[:])
		if err := c.Bucket(name).Create(t.Context(), "objlease", &storage.BucketAttrs{VersioningEnabled: on}); err != nil {
			t.Fatal(err)
		}
		s := settings(t, gcsstore.New(c, name), "leases/")
		want := providers.SettingOff
		if on {
			want = providers.SettingEnabled
		}
		if s.Versioning != want {
			t.Errorf("bucket made with versioning %v: versioning %s, want %s", on, s.Versioning, want)
		}
	}
	// The rule is the JSON gcloud takes.
	rule, ok := gcsstore.New(c, g.bucket).NoncurrentRule("leases/", 1)
	var doc struct {
		Lifecycle storage.Lifecycle `json:"lifecycle"`
	}
	if !ok || json.Unmarshal([]byte(rule.Text), &doc) != nil || !strings.Contains(rule.Text, `"daysSinceNoncurrentTime": 1`) {
		t.Fatalf("rule %+v", rule)
	}
}

// TestAzuriteSettings: the Azure driver knows versioning once a write's
// reply said it (Azurite keeps no versions: off), and says soft delete
// and lifecycle are the account's, unknown to a container client.
func TestAzuriteSettings(t *testing.T) {
	a := newAzTarget(t)
	if a.real() {
		t.Skip("a real account")
	}
	st := a.store(t, nil)
	s := settings(t, st, a.prefix)
	if s.Versioning != providers.SettingUnknown || s.SoftDelete != providers.SettingUnknown || s.ObjectLock != providers.SettingOff {
		t.Fatalf("before a write: versioning %s, soft delete %s, object lock %s; want unknown, unknown, off", s.Versioning, s.SoftDelete, s.ObjectLock)
	}
	if _, err := st.Create(t.Context(), a.prefix+"x", []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	if s := settings(t, st, a.prefix); s.Versioning != providers.SettingOff {
		t.Fatalf("after a write: versioning %s, want off", s.Versioning)
	}
	if rule, ok := st.NoncurrentRule(a.prefix, 1); !ok || !strings.Contains(rule.Text, `"daysAfterCreationGreaterThan": 1`) ||
		!strings.Contains(rule.Text, a.container+"/"+a.prefix) {
		t.Fatalf("rule %+v", rule)
	}
}
