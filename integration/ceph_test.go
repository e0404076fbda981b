package integration

// objlease on Ceph RGW (S3 on a single-host Ceph cluster from Debian's
// packages, radosgw 16): the conformance, protocol and fence suites, the
// store self-test, each feature, and the command. Ceph 16 refuses If-Match
// with a quoted current ETag, which S3 clients send, and takes it
// unquoted; the s3 URL option unquoted_etag=true (s3store.UnquotedETags)
// sends it so, and objlease doctor finds the need and names the URL. It
// also answers If-Match on a missing key with 412 (S3: 404), ignores
// If-Match on DELETE, and answers some losing conditional replaces with
// 500, which is judged by reading, never guessed. docs/stores.md has the
// per-feature verdict these tests show.

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/objlease/objlease/integration/emulator"
	"github.com/objlease/objlease/objlease/fence/fencetest"
	"github.com/objlease/objlease/objlease/leasetest"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/probe"
	"github.com/objlease/objlease/providers/providertest"
	"github.com/objlease/objlease/providers/s3store"
)

// cephTarget is the shared Ceph RGW bucket with a fresh prefix.
func cephTarget(t *testing.T) s3Target {
	t.Helper()
	e := emulator.CephRGW(t)
	return s3Target{bucket: e.Bucket, prefix: emulator.Prefix(t), emu: e}
}

// cephStore is the target's store as Ceph needs it: If-Match unquoted.
func cephStore(t *testing.T, target s3Target) *providers.Bucket {
	t.Helper()
	return s3store.New(target.client(t, s3store.UnquotedETags), target.bucket)
}

// TestCephRefusesQuotedETag pins down what the rest depends on: with the
// ETag quoted (S3's form) a replace at the current version is refused; with
// it unquoted it lands, and a stale one is still refused.
func TestCephRefusesQuotedETag(t *testing.T) {
	target := cephTarget(t)
	quoted, unquoted := target.store(t, nil), cephStore(t, target)
	ctx := t.Context()
	key := target.prefix + "obj"
	v1, err := unquoted.Create(ctx, key, []byte("one"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := quoted.Replace(ctx, key, []byte("two"), nil, v1.Version); !errors.Is(err, providers.ErrPrecondition) {
		t.Fatalf("replace at the current version, ETag quoted: %v, want ErrPrecondition (Ceph RGW 16 compares it unquoted)", err)
	}
	v2, err := unquoted.Replace(ctx, key, []byte("two"), nil, v1.Version)
	if err != nil {
		t.Fatalf("replace at the current version, ETag unquoted: %v", err)
	}
	if _, err := unquoted.Replace(ctx, key, []byte("stale"), nil, v1.Version); !errors.Is(err, providers.ErrPrecondition) {
		t.Fatalf("replace at a stale version, ETag unquoted: %v, want ErrPrecondition", err)
	}
	if _, err := unquoted.Replace(ctx, key, []byte("three"), nil, v2.Version); err != nil {
		t.Fatalf("replace at the current version again: %v", err)
	}
}

func TestCephConformance(t *testing.T) {
	target := cephTarget(t)
	providertest.Run(t, providertest.Config{
		Bucket:              cephStore(t, target),
		Prefix:              target.prefix,
		MissingBucket:       s3store.New(target.client(t, s3store.UnquotedETags), randomName()),
		DeleteUnconditional: true,
		UnknownLosers:       true,
	})
}

func TestCephProtocol(t *testing.T) {
	target := cephTarget(t)
	st := cephStore(t, target)
	target.cleanup(t, st)
	leasetest.Run(t, leasetest.Config{Store: st, Prefix: target.prefix + "lease/"})
	fencetest.Run(t, fencetest.Config{Store: st, Prefix: target.prefix + "fence/"})
}

func TestCephFeatures(t *testing.T) {
	target := cephTarget(t)
	storeFeatures(t, cephStore(t, target), target.prefix)
}

// TestCephDoctor: as the URL stands doctor exits 78 and names the URL to
// use, having checked the store with it; with that URL it exits 0, and the
// self-test judged every 500 of a race by reading.
func TestCephDoctor(t *testing.T) {
	target := cephTarget(t)
	r, err := probe.Run(t.Context(), target.store(t, nil), target.prefix)
	if !errors.Is(err, probe.ErrCurrentVersionRefused) {
		t.Fatalf("probe with quoted ETags: %v, want ErrCurrentVersionRefused", err)
	}
	if r, err = probe.Run(t.Context(), cephStore(t, target), target.prefix); err != nil {
		t.Fatalf("probe with unquoted ETags: %v (failures %q)", err, r.Failures)
	}
	for _, race := range r.Races {
		t.Logf("race %s: winners %v, unknown outcomes %d, verdict %s", race.Kind, race.Winners, race.Unknown, race.Verdict())
		if (race.Kind == probe.RaceCreate || race.Kind == probe.RaceReplace) && race.Verdict() != probe.RaceSafe {
			t.Errorf("%s race: %s", race.Kind, race.Verdict())
		}
	}
	e := target.emu
	url := s3CLIURL(e.Endpoint, e.Bucket, target.prefix+"cli/")
	o := runCLI(t, s3CLIEnv(e, e.AccessKey, e.SecretKey), "doctor", url)
	want := url + "&unquoted_etag=true"
	if o.code != 78 || !strings.Contains(o.stdout, want) || !strings.Contains(o.stderr, want) {
		t.Fatalf("doctor %s: exit %d, want 78 naming %s\nstdout:\n%s\nstderr:\n%s", url, o.code, want, o.stdout, o.stderr)
	}
	if o := runCLI(t, s3CLIEnv(e, e.AccessKey, e.SecretKey), "doctor", want); o.code != 0 {
		t.Fatalf("doctor %s: exit %d, want 0\nstdout:\n%s\nstderr:\n%s", want, o.code, o.stdout, o.stderr)
	}
}

// TestCephRunRenews: the command holds a lease on Ceph across many
// renewals with the URL doctor gives; without it, a fenced put ends at once
// with exit 78 instead of spinning.
func TestCephRunRenews(t *testing.T) {
	target := cephTarget(t)
	e := target.emu
	env := s3CLIEnv(e, e.AccessKey, e.SecretKey)
	url := s3CLIURL(e.Endpoint, e.Bucket, target.prefix+"job") + "&unquoted_etag=true"
	start := time.Now()
	o := runCLI(t, env, "run", "--ttl", "1s", url, "--", "sh", "-c", "sleep 3; echo token $OBJLEASE_TOKEN")
	if o.code != 0 || strings.TrimSpace(o.stdout) != "token 1" {
		t.Fatalf("run under a 1 s lease for 3 s: exit %d, stdout %q\nstderr:\n%s", o.code, o.stdout, o.stderr)
	}
	t.Logf("run held the lease for %v", time.Since(start))
	quoted := s3CLIURL(e.Endpoint, e.Bucket, target.prefix+"out")
	if o := runCLIInput(t, env, "one", "put", "--unique-payloads", "--token", "1", quoted); o.code != 0 {
		t.Fatalf("first put: exit %d\n%s", o.code, o.stderr)
	}
	o = runCLIInput(t, env, "two", "put", "--unique-payloads", "--token", "2", quoted)
	if o.code != 78 || !strings.Contains(o.stderr, "doctor") {
		t.Fatalf("put over an object with quoted ETags: exit %d, want 78 naming doctor\n%s", o.code, o.stderr)
	}
}
