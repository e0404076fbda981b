package integration

// objlease on MinIO, the S3 server many users run themselves: the
// conformance, protocol and fence suites, the store self-test, and each
// feature's outcome there. MinIO enforces If-None-Match and If-Match on PUT
// and ignores If-Match on DELETE (a DELETE with a stale ETag removes the
// object); docs/stores.md gives the per-feature verdict these tests show.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	s3sdk "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/objlease/objlease/integration/emulator"
	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/fence"
	"github.com/objlease/objlease/objlease/fence/fencetest"
	"github.com/objlease/objlease/objlease/leasetest"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/probe"
	"github.com/objlease/objlease/providers/providertest"
	"github.com/objlease/objlease/providers/s3store"
)

// minioTarget is the shared MinIO bucket with a fresh prefix.
func minioTarget(t *testing.T) s3Target {
	t.Helper()
	e := emulator.MinIO(t)
	return s3Target{bucket: e.Bucket, prefix: emulator.Prefix(t), emu: e}
}

func TestMinIOConformance(t *testing.T) {
	target := minioTarget(t)
	providertest.Run(t, providertest.Config{
		Bucket:              target.store(t, nil),
		Prefix:              target.prefix,
		MissingBucket:       s3store.New(target.client(t, nil), randomName()),
		DeleteUnconditional: true,
	})
}

func TestMinIOProtocol(t *testing.T) {
	target := minioTarget(t)
	st := target.store(t, nil)
	target.cleanup(t, st)
	leasetest.Run(t, leasetest.Config{Store: st, Prefix: target.prefix + "lease/"})
	fencetest.Run(t, fencetest.Config{Store: st, Prefix: target.prefix + "fence/"})
}

// TestMinIOIgnoresIfMatchOnDelete pins down the store behaviour the rest
// depends on, one request at a time through the SDK: PUT's conditions are
// enforced, a DELETE with a stale ETag removes the object.
func TestMinIOIgnoresIfMatchOnDelete(t *testing.T) {
	target := minioTarget(t)
	st := target.store(t, nil)
	key := target.prefix + "obj"
	v1 := mustCreateS3(t, st, key, []byte("one"))
	if _, err := st.Create(t.Context(), key, []byte("again"), nil); !errors.Is(err, providers.ErrPrecondition) {
		t.Fatalf("second create: %v, want ErrPrecondition", err)
	}
	v2 := mustReplaceS3(t, st, key, []byte("two"), v1)
	if _, err := st.Replace(t.Context(), key, []byte("stale"), nil, v1); !errors.Is(err, providers.ErrPrecondition) {
		t.Fatalf("replace with a stale ETag: %v, want ErrPrecondition", err)
	}
	err := st.Delete(t.Context(), key, v1)
	_, gerr := st.Get(t.Context(), key, 0)
	switch {
	case err == nil && errors.Is(gerr, providers.ErrNotFound):
		t.Logf("a DELETE with a stale ETag removed the object (current was %s): If-Match ignored on DELETE", v2)
	case errors.Is(err, providers.ErrPrecondition) && gerr == nil:
		t.Fatalf("this MinIO refuses a stale conditional DELETE: it enforces If-Match on DELETE now; docs/stores.md and the tests that rely on the opposite must change")
	default:
		t.Fatalf("stale delete: %v, then get: %v", err, gerr)
	}
}

// TestMinIODoctor: the self-test calls MinIO safe for objlease, names the
// missing capability, and the command exits 0 with the caveat.
func TestMinIODoctor(t *testing.T) {
	target := minioTarget(t)
	st := target.store(t, nil)
	r, err := probe.Run(t.Context(), st, target.prefix)
	if err != nil {
		t.Fatalf("probe: %v (failures %q)", err, r.Failures)
	}
	if !r.DeleteUnconditional || len(r.Caveats) == 0 {
		t.Fatalf("DeleteUnconditional %v, caveats %q; want the stale delete reported", r.DeleteUnconditional, r.Caveats)
	}
	for _, race := range r.Races {
		t.Logf("race %s: winners %v, verdict %s", race.Kind, race.Winners, race.Verdict())
		if (race.Kind == probe.RaceCreate || race.Kind == probe.RaceReplace) && race.Verdict() != probe.RaceSafe {
			t.Errorf("%s race: %s", race.Kind, race.Verdict())
		}
	}
	e := target.emu
	o := runCLI(t, s3CLIEnv(e, e.AccessKey, e.SecretKey), "doctor", s3CLIURL(e.Endpoint, e.Bucket, target.prefix+"cli/"))
	if o.code != 0 {
		t.Fatalf("doctor: exit %d; stderr:\n%s", o.code, o.stderr)
	}
}

// TestMinIOFeatures: each feature objlease offers, on MinIO, and its
// outcome: leases, fenced put, fenced delete (a tombstone written by
// conditional PUT), batch commit and collect.
func TestMinIOFeatures(t *testing.T) {
	target := minioTarget(t)
	storeFeatures(t, target.store(t, nil), target.prefix)
}

// storeFeatures runs each feature objlease offers on st under prefix:
// leases, fenced put, fenced delete, batch commit and collect.
func storeFeatures(t *testing.T, st providers.Store, prefix string) {
	ctx := t.Context()
	target := struct{ prefix string }{prefix}

	t.Run("lease", func(t *testing.T) {
		key := target.prefix + "lease"
		a, err := objlease.New(st, key, objlease.Options{Holder: "alice", TTL: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		b, err := objlease.New(st, key, objlease.Options{Holder: "bob", TTL: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		la, err := a.TryAcquire(ctx)
		if err != nil {
			t.Fatalf("alice: %v", err)
		}
		if _, err := b.TryAcquire(ctx); !errors.Is(err, objlease.ErrHeld) {
			t.Fatalf("bob while alice holds: %v, want ErrHeld", err)
		}
		if err := la.Release(ctx); err != nil {
			t.Fatalf("release: %v", err)
		}
		lb, err := b.TryAcquire(ctx)
		if err != nil {
			t.Fatalf("bob after the release: %v", err)
		}
		if lb.Token() <= la.Token() {
			t.Errorf("bob's token %d is not above alice's %d", lb.Token(), la.Token())
		}
		lb.Release(ctx)
	})

	t.Run("fenced put and delete", func(t *testing.T) {
		key := target.prefix + "fenced"
		opts := fence.Options{UniquePayloads: true}
		if _, err := fence.Put(ctx, st, key, 5, []byte("token 5"), opts); err != nil {
			t.Fatal(err)
		}
		if _, err := fence.Put(ctx, st, key, 4, []byte("token 4"), opts); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("put with an older token: %v, want ErrStale", err)
		}
		if err := fence.Delete(ctx, st, key, 6, opts); err != nil {
			t.Fatalf("fenced delete: %v", err)
		}
		// The tombstone keeps token 6: a stale writer cannot bring the
		// object back, which a plain DELETE would have let it do.
		if _, err := fence.Put(ctx, st, key, 5, []byte("token 5 again"), opts); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("put of token 5 after the delete by token 6: %v, want ErrStale", err)
		}
		if _, _, err := fence.Get(ctx, st, key, 0); !errors.Is(err, providers.ErrNotFound) {
			t.Fatalf("get after the fenced delete: %v, want ErrNotFound", err)
		}
	})

	t.Run("batch commit and collect", func(t *testing.T) {
		prefix := target.prefix + "batch/"
		old := fence.NewBatch(st, prefix, 3)
		if err := old.Put(ctx, "part-0", []byte("old")); err != nil {
			t.Fatal(err)
		}
		nb := fence.NewBatch(st, prefix, 7)
		if err := nb.Put(ctx, "part-0", []byte("new")); err != nil {
			t.Fatal(err)
		}
		if _, err := nb.Commit(ctx, false); err != nil {
			t.Fatal(err)
		}
		if _, err := old.Commit(ctx, false); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("commit of token 3 after token 7: %v, want ErrStale", err)
		}
		n, err := fence.Collect(ctx, st, prefix)
		if err != nil || n != 1 {
			t.Fatalf("collect: %d deleted, %v; want the orphan of token 3", n, err)
		}
		m, err := fence.ReadCommitted(ctx, st, prefix)
		if err != nil || m.Token != 7 || len(m.Objects) != 1 {
			t.Fatalf("committed after collect: %+v, %v", m, err)
		}
		obj, err := st.Get(ctx, m.Objects["part-0"].Key, 0)
		if err != nil || string(obj.Data) != "new" {
			t.Fatalf("committed object after collect: %v, %v", obj, err)
		}
	})
}

// readOnlyPolicy allows reading the bucket's objects under prefix and
// listing the bucket, and nothing else (docs/permissions.md).
func readOnlyPolicy(bucket, prefix string) string {
	return fmt.Sprintf(`{"Version":"2012-10-17","Statement":[
{"Effect":"Allow","Action":["s3:GetObject"],"Resource":["arn:aws:s3:::%s/%s*"]},
{"Effect":"Allow","Action":["s3:ListBucket"],"Resource":["arn:aws:s3:::%s"]}]}`, bucket, prefix, bucket)
}

// minioSession returns temporary credentials restricted by policy, from
// MinIO's STS AssumeRole.
func minioSession(t *testing.T, e *emulator.S3, policy string) aws.Credentials {
	t.Helper()
	c := sts.New(sts.Options{
		Region:       e.Region,
		BaseEndpoint: aws.String(e.Endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider(e.AccessKey, e.SecretKey, ""),
	})
	out, err := c.AssumeRole(t.Context(), &sts.AssumeRoleInput{
		RoleArn:         aws.String("arn:xxx:xxx:xxx:xxxx"),
		RoleSessionName: aws.String("objlease-read-only"),
		Policy:          aws.String(policy),
		DurationSeconds: aws.Int32(900),
	})
	if err != nil {
		t.Fatalf("MinIO STS AssumeRole: %v", err)
	}
	return aws.Credentials{AccessKeyID: aws.ToString(out.Credentials.AccessKeyId),
		SecretAccessKey: aws.ToString(out.Credentials.SecretAccessKey), SessionToken: aws.ToString(out.Credentials.SessionToken)}
}

// TestMinIOReadOnlyCredential: a credential whose policy allows only reads
// under the lease prefix can inspect, list and watch a lease, and every
// write exits 78 with one line that says access was denied.
func TestMinIOReadOnlyCredential(t *testing.T) {
	target := minioTarget(t)
	e := target.emu
	key := target.prefix + "lease"
	u := s3CLIURL(e.Endpoint, e.Bucket, key)
	admin := s3CLIEnv(e, e.AccessKey, e.SecretKey)
	if o := runCLI(t, admin, "acquire", "--holder", "alice", "--ttl", "1h", u); o.code != 0 {
		t.Fatalf("acquire as admin: exit %d; stderr:\n%s", o.code, o.stderr)
	}
	c := minioSession(t, e, readOnlyPolicy(e.Bucket, target.prefix))
	ro := append(s3CLIEnv(e, c.AccessKeyID, c.SecretAccessKey), "AWS_SESSION_TOKEN="+c.SessionToken)

	// The policy denies what it does not allow: the root's rights do not
	// leak through.
	s3c := s3sdk.New(s3sdk.Options{Region: e.Region, BaseEndpoint: aws.String(e.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(c.AccessKeyID, c.SecretAccessKey, c.SessionToken)})
	if _, err := s3c.PutObject(t.Context(), &s3sdk.PutObjectInput{Bucket: aws.String(e.Bucket), Key: aws.String(target.prefix + "x"),
		Body: strings.NewReader("x")}); err == nil {
		t.Fatal("the read-only session could write")
	}

	if o := runCLI(t, ro, "inspect", u); o.code != 0 {
		t.Errorf("inspect: exit %d; stderr:\n%s", o.code, o.stderr)
	}
	if o := runCLI(t, ro, "list", s3CLIURL(e.Endpoint, e.Bucket, target.prefix)); o.code != 0 {
		t.Errorf("list: exit %d; stderr:\n%s", o.code, o.stderr)
	}
	watchOnce(t, ro, u, "alice")

	denied := func(cmd, op string) string {
		return cmd + ` s3://\S+: ` + op + ` "` + regexp.QuoteMeta(key) + `": access denied: the credentials were accepted, and lack the permission for this request \(see docs/permissions.md\)`
	}
	runCLI(t, ro, "release", "--holder", "alice", u).want(t, 78, denied("release", "replace"))
	runCLI(t, ro, "break", "--force", u).want(t, 78, denied("break", "replace"))
	u2 := s3CLIURL(e.Endpoint, e.Bucket, target.prefix+"other")
	runCLI(t, ro, "acquire", "--timeout", "0", u2).want(t, 78, strings.Replace(denied("acquire", "create"), regexp.QuoteMeta(key), regexp.QuoteMeta(target.prefix+"other"), 1))
}

// watchOnce runs watch until it prints a line naming holder, then
// interrupts it, which is the way to stop watching (exit 0).
func watchOnce(t *testing.T, env []string, u, holder string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), commandBound)
	defer cancel()
	cmd := exec.CommandContext(ctx, objleaseBin(t), "watch", "--poll", "200ms", u)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir(), "AWS_EC2_METADATA_DISABLED=true"}, env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	seen := false
	for sc.Scan() {
		if strings.Contains(sc.Text(), holder) {
			seen = true
			break
		}
	}
	cmd.Process.Signal(syscall.SIGINT)
	go io.Copy(io.Discard, out)
	err = cmd.Wait()
	if !seen || err != nil {
		t.Errorf("watch: saw %s: %v, exit %v; stderr:\n%s", holder, seen, err, stderr.String())
	}
}
