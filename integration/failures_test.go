package integration

// What users meet when the store is not what they think: stopped, without
// the bucket, refusing the credentials, at the wrong address. Each case is
// opened the way the CLI opens it (a URL, the environment), and must fail
// with the sentinel that says so, naming the bucket and key, in bounded
// time: each call's context has a generous deadline, so a call that hangs
// or retries for ever fails with DeadlineExceeded instead of the sentinel.
// Where a client can be counted, the requests are counted too: a write is
// sent at most once and a read at most the SDK's attempts.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	s3sdk "github.com/aws/aws-sdk-go-v2/service/s3"
	"google.golang.org/api/option"

	"github.com/objlease/objlease/integration/emulator"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/azurestore"
	"github.com/objlease/objlease/providers/gcsstore"
	"github.com/objlease/objlease/providers/s3store"
	"github.com/objlease/objlease/providers/wirecount"
)

// callBound is the most any one call may take before it counts as a hang.
// A store that is down answers in well under it (Azure's default read
// retries, the slowest, take about six seconds).
const callBound = 90 * time.Second

// failure is what one call returned.
type failure struct {
	op, key string
	err     error
}

// everyOp runs each store operation once on key (version: the one to
// replace and delete at) and returns what each returned.
func everyOp(t *testing.T, st providers.Store, key, version string) []failure {
	t.Helper()
	call := func(f func(ctx context.Context) error) error {
		ctx, cancel := context.WithTimeout(context.Background(), callBound)
		defer cancel()
		return f(ctx)
	}
	prefix := key[:strings.LastIndex(key, "/")+1]
	return []failure{
		{"get", key, call(func(ctx context.Context) error { _, err := st.Get(ctx, key, 0); return err })},
		{"stat", key, call(func(ctx context.Context) error { _, err := st.Stat(ctx, key); return err })},
		{"create", key + "-new", call(func(ctx context.Context) error {
			_, err := st.Create(ctx, key+"-new", []byte("x"), nil)
			return err
		})},
		{"replace", key, call(func(ctx context.Context) error {
			_, err := st.Replace(ctx, key, []byte("x"), nil, version)
			return err
		})},
		{"delete", key, call(func(ctx context.Context) error { return st.Delete(ctx, key, version) })},
		{"list", prefix, call(func(ctx context.Context) error { _, err := st.List(ctx, prefix, "", 10); return err })},
	}
}

// wantFailures fails t unless every failure matches sentinel, names its
// operation, key and bucket on one line, and (unless the sentinel is
// ErrUnknownOutcome) reports a known outcome. skip lists operations a store
// cannot answer so, with why.
func wantFailures(t *testing.T, fs []failure, sentinel error, bucket string, skip map[string]error) {
	t.Helper()
	for _, f := range fs {
		want := sentinel
		if alt, ok := skip[f.op]; ok {
			want = alt
		}
		switch {
		case f.err == nil:
			t.Errorf("%s %q: success, want %v", f.op, f.key, want)
			continue
		case !errors.Is(f.err, want):
			t.Errorf("%s %q: %v, want %v", f.op, f.key, f.err, want)
		case errors.Is(f.err, context.DeadlineExceeded):
			t.Errorf("%s %q: did not end within %v: %v", f.op, f.key, callBound, f.err)
		case errors.Is(f.err, providers.ErrUnknownOutcome):
			t.Errorf("%s %q: %v: the outcome is known, nothing was written", f.op, f.key, f.err)
		}
		var pe *providers.Error
		if !errors.As(f.err, &pe) || pe.Op != f.op || pe.Key != f.key {
			t.Errorf("%s %q: %v does not name the operation and key", f.op, f.key, f.err)
		}
		msg := f.err.Error()
		if want == sentinel && !strings.Contains(msg, `"`+bucket+`"`) {
			t.Errorf("%s %q: %q does not name the bucket %q", f.op, f.key, msg, bucket)
		}
		if strings.Contains(msg, "\n") {
			t.Errorf("%s %q: message spans lines: %q", f.op, f.key, msg)
		}
	}
}

// wantAtMost fails t unless the counted requests stay within what one
// attempt per write and the SDK's attempts per read allow.
func wantAtMost(t *testing.T, wc *wirecount.Transport, writes, readAttempts int) {
	t.Helper()
	c := wc.Reset()
	// Three reads (get, stat, list) and three writes.
	if max := 3*readAttempts + 3*writes; c.Total() > max {
		t.Errorf("%d requests for six calls (%v), want at most %d", c.Total(), c, max)
	}
}

// randomName is a bucket or container name nobody created.
func randomName() string {
	var b [6]byte
	rand.Read(b[:])
	return "objlease-missing-" + hex.EncodeToString(b[:])
}

// closedPort returns a local address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// s3Env sets the AWS environment as a user of the emulator would.
func s3Env(t *testing.T, accessKey, secret string) {
	dir := t.TempDir()
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_ACCESS_KEY_ID", accessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	t.Setenv("AWS_SESSION_TOKEN", "")
}

func openURL(t *testing.T, raw string) providers.Store {
	t.Helper()
	st, _, err := providers.Open(t.Context(), raw)
	if err != nil {
		t.Fatalf("open %s: %v", raw, err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func s3URL(e *emulator.S3, bucket string) string {
	return "s3://" + bucket + "/?endpoint=" + url.QueryEscape(e.Endpoint) + "&region=" + e.Region
}

// counted is an S3 store on e's bucket as the opener builds it (standard
// retries), with its requests counted.
func countedS3(e *emulator.S3, bucket, accessKey, secret string) (*providers.Bucket, *wirecount.Transport) {
	wc := wirecount.New(nil)
	c := s3sdk.New(s3sdk.Options{
		Region:       e.Region,
		BaseEndpoint: aws.String(e.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(accessKey, secret, ""),
		HTTPClient:   &http.Client{Transport: wc},
	})
	return s3store.New(c, bucket), wc
}

// The S3 SDK's standard retryer makes three attempts.
const s3ReadAttempts = 3

func TestFailureS3StoppedStore(t *testing.T) {
	e, p := emulator.StartVersityGW(t)
	s3Env(t, e.AccessKey, e.SecretKey)
	opened := openURL(t, s3URL(e, e.Bucket))
	counted, wc := countedS3(e, e.Bucket, e.AccessKey, e.SecretKey)
	key := emulator.Prefix(t) + "lease"
	res, err := opened.Create(t.Context(), key, []byte("held"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := counted.Stat(t.Context(), key); err != nil { // a pooled connection, now to die
		t.Fatal(err)
	}
	p.Stop()
	wc.Reset()
	wantFailures(t, everyOp(t, opened, key, res.Version), providers.ErrUnreachable, e.Bucket, nil)
	wantFailures(t, everyOp(t, counted, key, res.Version), providers.ErrUnreachable, e.Bucket, nil)
	wantAtMost(t, wc, 1, s3ReadAttempts+1) // Delete asks HEAD first
}

func TestFailureS3MissingBucket(t *testing.T) {
	e := emulator.VersityGW(t)
	s3Env(t, e.AccessKey, e.SecretKey)
	bucket := randomName()
	key := emulator.Prefix(t) + "lease"
	wantFailures(t, everyOp(t, openURL(t, s3URL(e, bucket)), key, "9b2cf535f27731c974343645a3985328"), providers.ErrNoBucket, bucket, nil)
	counted, wc := countedS3(e, bucket, e.AccessKey, e.SecretKey)
	wantFailures(t, everyOp(t, counted, key, "9b2cf535f27731c974343645a3985328"), providers.ErrNoBucket, bucket, nil)
	// A refusal is not retried: one request per call, two for Stat and
	// for Delete (a HEAD whose bare 404 cannot name the bucket, then the
	// listing that names the cause).
	if c := wc.Reset(); c.Total() != 8 {
		t.Errorf("%d requests for six calls (%v), want 8", c.Total(), c)
	}
}

func TestFailureS3WrongCredentials(t *testing.T) {
	e := emulator.VersityGW(t)
	key := emulator.Prefix(t) + "lease"
	for _, c := range []struct {
		name, accessKey, secret string
		skip                    map[string]error
	}{
		// versitygw answers 404 (AWS: 403): Delete's bodiless HEAD cannot
		// tell it from a missing key, the listing after it can.
		{"unknown access key", "AKIANOSUCHKEY0000000", "secret", nil},
		{"wrong secret", e.AccessKey, "not-the-secret", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			s3Env(t, c.accessKey, c.secret)
			wantFailures(t, everyOp(t, openURL(t, s3URL(e, e.Bucket)), key, "9b2cf535f27731c974343645a3985328"), providers.ErrPermission, e.Bucket, c.skip)
			counted, wc := countedS3(e, e.Bucket, c.accessKey, c.secret)
			wantFailures(t, everyOp(t, counted, key, "9b2cf535f27731c974343645a3985328"), providers.ErrPermission, e.Bucket, c.skip)
			if n := wc.Reset().Total(); n > 8 {
				t.Errorf("%d requests for six refused calls, want at most 8 (no retries)", n)
			}
		})
	}
}

func gcsURL(endpoint, bucket, key string) string {
	u := (&url.URL{Scheme: "gs", Host: bucket, Path: "/" + key}).String()
	if endpoint != "" {
		u += "?endpoint=" + url.QueryEscape(endpoint)
	}
	return u
}

// countedGCS is a GCS store on bucket whose requests are counted, reading
// through the XML API (the SDK's default) with the opener's retry bound.
func countedGCS(t *testing.T, endpoint, bucket string) (*providers.Bucket, *wirecount.Transport) {
	t.Helper()
	wc := wirecount.New(nil)
	c, err := storage.NewClient(t.Context(), option.WithEndpoint(endpoint), option.WithoutAuthentication(),
		option.WithHTTPClient(&http.Client{Transport: gcsstore.DateTransport(wc)}))
	if err != nil {
		t.Fatal(err)
	}
	c.SetRetry(storage.WithMaxAttempts(gcsReadAttempts))
	t.Cleanup(func() { c.Close() })
	return gcsstore.New(c, bucket), wc
}

// The opener bounds GCS reads to three attempts.
const gcsReadAttempts = 3

// STORAGE_EMULATOR_HOST naming an address where nothing listens, as when
// the emulator is down: every call fails as unreachable, reads after a few
// attempts instead of retrying until a deadline that never comes.
func TestFailureGCSStoppedStore(t *testing.T) {
	g, p := emulator.StartFakeGCS(t)
	t.Setenv("STORAGE_EMULATOR_HOST", g.Host)
	opened := openURL(t, gcsURL("", g.Bucket, ""))
	counted, wc := countedGCS(t, g.Endpoint, g.Bucket)
	key := emulator.Prefix(t) + "lease"
	res, err := opened.Create(t.Context(), key, []byte("held"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := counted.Get(t.Context(), key, 0); err != nil {
		t.Fatal(err)
	}
	p.Stop()
	wc.Reset()
	wantFailures(t, everyOp(t, opened, key, res.Version), providers.ErrUnreachable, g.Bucket, nil)
	wantFailures(t, everyOp(t, counted, key, res.Version), providers.ErrUnreachable, g.Bucket, nil)
	wantAtMost(t, wc, 1, gcsReadAttempts)

	// Nothing ever listened there.
	t.Setenv("STORAGE_EMULATOR_HOST", closedPort(t))
	never := openURL(t, gcsURL("", g.Bucket, ""))
	wantFailures(t, everyOp(t, never, key, res.Version), providers.ErrUnreachable, g.Bucket, nil)
}

func TestFailureGCSMissingBucket(t *testing.T) {
	g := emulator.FakeGCS(t)
	bucket := randomName()
	key := emulator.Prefix(t) + "lease"
	wantFailures(t, everyOp(t, openURL(t, gcsURL(g.Endpoint, bucket, "")), key, "1700000000000001"), providers.ErrNoBucket, bucket, nil)
	counted, wc := countedGCS(t, g.Endpoint, bucket)
	wantFailures(t, everyOp(t, counted, key, "1700000000000001"), providers.ErrNoBucket, bucket, nil)
	// fake-gcs-server says only "Not Found": a 404 to get, stat, replace
	// or delete costs one bucket lookup more while the bucket has not been
	// seen (here, never).
	if c := wc.Reset(); c.Total() != 10 {
		t.Errorf("%d requests for six calls (%v), want 10", c.Total(), c)
	}
}

// An endpoint without /storage/v1/: by URL it means the API below it; a
// client built on it reaches no API, and that must not read as "no such
// object" (a lease that exists would look free) nor let a write land.
func TestFailureGCSWrongEndpoint(t *testing.T) {
	g := emulator.FakeGCS(t)
	key := emulator.Prefix(t) + "lease"
	good := openURL(t, gcsURL(g.Endpoint, g.Bucket, ""))
	res, err := good.Create(t.Context(), key, []byte("held"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { good.Delete(context.Background(), key, res.Version) })
	root := "http://" + g.Host

	t.Run("URL", func(t *testing.T) {
		st := openURL(t, gcsURL(root, g.Bucket, ""))
		o, err := st.Get(t.Context(), key, 0)
		if err != nil || string(o.Data) != "held" || o.Version != res.Version {
			t.Fatalf("get %q through %s: %+v, %v; want the lease", key, root, o, err)
		}
	})
	// A client on the server's root sends its JSON calls where no API is;
	// its reads (XML, the SDK's default) still find the object. A refusal
	// must say so, not "no such object", and change nothing.
	t.Run("client", func(t *testing.T) {
		c, err := storage.NewClient(t.Context(), option.WithEndpoint(root), option.WithoutAuthentication(),
			option.WithHTTPClient(&http.Client{Transport: gcsstore.DateTransport(http.DefaultTransport)}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		st := gcsstore.New(c, g.Bucket)
		_, err = st.Stat(t.Context(), key)
		if !errors.Is(err, providers.ErrWrongEndpoint) || !strings.Contains(err.Error(), "/storage/v1/") {
			t.Errorf("stat %q through %s: %v, want ErrWrongEndpoint pointing at /storage/v1/", key, root, err)
		}
		if err := st.Delete(t.Context(), key, res.Version); !errors.Is(err, providers.ErrWrongEndpoint) {
			t.Errorf("delete %q through %s: %v, want ErrWrongEndpoint", key, root, err)
		}
		if _, err := st.List(t.Context(), key, "", 10); !errors.Is(err, providers.ErrWrongEndpoint) {
			t.Errorf("list %q through %s: %v, want ErrWrongEndpoint", key, root, err)
		}
		if a, err := good.Stat(t.Context(), key); err != nil || a.Version != res.Version {
			t.Errorf("stat %q after the calls through %s: %+v, %v; want the lease unchanged", key, root, a, err)
		}
	})
}

// countedAz is an Azure store on containerName with the SDK's default read
// retries, whose requests are counted; key is the account key to sign with.
func countedAz(t *testing.T, a *emulator.Azure, containerName, accountKey string) (*providers.Bucket, *wirecount.Transport) {
	t.Helper()
	wc := wirecount.New(nil)
	cs := strings.Replace(a.ConnectionString, "AccountKey="+azuriteKey(a)+";", "AccountKey="+accountKey+";", 1)
	c, err := container.NewClientFromConnectionString(cs, containerName, &container.ClientOptions{ClientOptions: azcore.ClientOptions{
		Transport: &http.Client{Transport: wc},
		Retry:     policy.RetryOptions{RetryDelay: 10 * time.Millisecond, MaxRetryDelay: 100 * time.Millisecond},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return azurestore.New(c), wc
}

// azuriteKey is the account key in a's connection string.
func azuriteKey(a *emulator.Azure) string {
	for _, part := range strings.Split(a.ConnectionString, ";") {
		if k, ok := strings.CutPrefix(part, "AccountKey="); ok {
			return k
		}
	}
	return ""
}

func azURL(containerName string) string { return "azblob://" + containerName + "/" }

// Azure's SDK makes four attempts by default.
const azReadAttempts = 4

func TestFailureAzureStoppedStore(t *testing.T) {
	a, p := emulator.StartAzurite(t)
	t.Setenv(azurestore.EnvConnectionString, a.ConnectionString)
	opened := openURL(t, azURL(a.Container))
	counted, wc := countedAz(t, a, a.Container, azuriteKey(a))
	key := emulator.Prefix(t) + "lease"
	res, err := opened.Create(t.Context(), key, []byte("held"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := counted.Stat(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	p.Stop()
	wc.Reset()
	wantFailures(t, everyOp(t, opened, key, res.Version), providers.ErrUnreachable, a.Container, nil)
	wantFailures(t, everyOp(t, counted, key, res.Version), providers.ErrUnreachable, a.Container, nil)
	wantAtMost(t, wc, 1, azReadAttempts)
}

func TestFailureAzureMissingContainer(t *testing.T) {
	a := emulator.Azurite(t)
	t.Setenv(azurestore.EnvConnectionString, a.ConnectionString)
	name := randomName()
	key := emulator.Prefix(t) + "lease"
	wantFailures(t, everyOp(t, openURL(t, azURL(name)), key, "0x8DD0000000000001"), providers.ErrNoBucket, name, nil)
	counted, wc := countedAz(t, a, name, azuriteKey(a))
	wantFailures(t, everyOp(t, counted, key, "0x8DD0000000000001"), providers.ErrNoBucket, name, nil)
	if c := wc.Reset(); c.Total() != 6 {
		t.Errorf("%d requests for six refused calls (%v), want 6", c.Total(), c)
	}
}

func TestFailureAzureWrongCredentials(t *testing.T) {
	a := emulator.Azurite(t)
	wrong := "d3Jvbmcta2V5LW5vdC10aGUtYWNjb3VudCdzLWtleS0wMTIzNDU2Nzg5MDEyMzQ1Njc4OQ=="
	t.Setenv(azurestore.EnvConnectionString, strings.Replace(a.ConnectionString, azuriteKey(a), wrong, 1))
	key := emulator.Prefix(t) + "lease"
	wantFailures(t, everyOp(t, openURL(t, azURL(a.Container)), key, "0x8DD0000000000001"), providers.ErrPermission, a.Container, nil)
	counted, wc := countedAz(t, a, a.Container, wrong)
	wantFailures(t, everyOp(t, counted, key, "0x8DD0000000000001"), providers.ErrPermission, a.Container, nil)
	if c := wc.Reset(); c.Total() != 6 {
		t.Errorf("%d requests for six refused calls (%v), want 6", c.Total(), c)
	}
}
