package emulator

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
)

// S3 is an S3-compatible endpoint with a bucket already created. Clients use
// path-style addressing and static credentials.
type S3 struct{ Endpoint, Region, AccessKey, SecretKey, Bucket string }

// GCS is a Cloud Storage JSON API endpoint with a bucket already created.
// Endpoint is "http://127.0.0.1:PORT/storage/v1/" for option.WithEndpoint;
// Host is "127.0.0.1:PORT" for STORAGE_EMULATOR_HOST. No authentication.
type GCS struct{ Endpoint, Host, Bucket string }

// Azure is a Blob service endpoint with a container already created.
// ConnectionString uses the well-known development account.
type Azure struct{ ConnectionString, Endpoint, Container string }

// Names of the bucket and container every emulator gets.
const (
	bucketName    = "objlease-test"
	containerName = "objlease-test"
)

const (
	vgwAccessKey = "testkey"
	vgwSecretKey = "testsecret"
	// MinIO's root user; its password must have 8 characters or more.
	minioAccessKey = "testkey"
	minioSecretKey = "testsecret"
	// The S3 user scripts/ceph-rgw.sh makes.
	cephAccessKey = "objlease"
	cephSecretKey = "objleasesecret"
	// s3rver's built-in credentials.
	s3rverKey = "S3RVER"
	// The development account every Azurite accepts.
	azuriteAccount = "devstoreaccount1"
	azuriteKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// VersityGW returns the versitygw instance shared by every test in the test
// binary, starting it on first use.
func VersityGW(t testing.TB) *S3 {
	t.Helper()
	return sharedVGW.get(t, startVGW)
}

// VersityGWVersioned returns a versitygw shared by every test in the test
// binary that can enable versioning on a bucket (PutBucketVersioning),
// starting it on first use. Its bucket is not versioned: a test creates
// its own and enables versioning on it.
func VersityGWVersioned(t testing.TB) *S3 {
	t.Helper()
	return sharedVGWVer.get(t, startVGWVersioned)
}

// MinIO returns the shared MinIO server, starting it on first use. It
// enforces If-None-Match and If-Match on PUT and ignores If-Match on DELETE.
// Its root credentials are an admin's: tests of other users get theirs
// with MinIOUser.
func MinIO(t testing.TB) *S3 {
	t.Helper()
	return sharedMinIO.get(t, startMinIO)
}

// StartMinIO starts a MinIO server for the calling test alone. It keeps its
// data on disk, so that it survives Restart.
func StartMinIO(t testing.TB) (*S3, *Process) {
	t.Helper()
	return private(t, startMinIO)
}

// CephRGW returns the shared Ceph RGW (S3 on a single-host Ceph cluster),
// starting it on first use. Ceph 16 (Debian 12) refuses If-Match with a
// quoted current ETag and takes it unquoted (the s3 URL option
// unquoted_etag=true), answers If-Match on a missing key with 412,
// ignores If-Match on DELETE, and may answer a losing conditional replace
// with 500.
func CephRGW(t testing.TB) *S3 {
	t.Helper()
	return sharedCeph.get(t, startCephRGW)
}

// S3rver returns the shared s3rver instance: an S3 endpoint that accepts
// If-Match and If-None-Match and ignores them, for the tests that a store
// without working preconditions is refused.
func S3rver(t testing.TB) *S3 {
	t.Helper()
	return sharedS3rver.get(t, startS3rver)
}

// FakeGCS returns the shared fake-gcs-server instance (memory backend).
func FakeGCS(t testing.TB) *GCS {
	t.Helper()
	return sharedGCS.get(t, func(dir string) (*GCS, *Process, error) { return startFakeGCS(dir, false) })
}

// Azurite returns the shared Azurite instance (in-memory blob service).
func Azurite(t testing.TB) *Azure {
	t.Helper()
	return sharedAzurite.get(t, func(dir string) (*Azure, *Process, error) { return startAzurite(dir, false) })
}

// StartVersityGW starts a versitygw instance for the calling test alone, to
// stop, restart or pause at will. It is stopped when the test ends.
func StartVersityGW(t testing.TB) (*S3, *Process) {
	t.Helper()
	return private(t, startVGW)
}

// StartFakeGCS starts a fake-gcs-server for the calling test alone. It keeps
// its objects on disk (filesystem backend) so that they survive Restart.
func StartFakeGCS(t testing.TB) (*GCS, *Process) {
	t.Helper()
	return private(t, func(dir string) (*GCS, *Process, error) { return startFakeGCS(dir, true) })
}

// StartAzurite starts an Azurite for the calling test alone. It keeps its
// blobs on disk so that they survive Restart.
func StartAzurite(t testing.TB) (*Azure, *Process) {
	t.Helper()
	return private(t, func(dir string) (*Azure, *Process, error) { return startAzurite(dir, true) })
}

// StopAll stops every emulator the test binary started and removes the
// shared instances' data. Call it from TestMain after m.Run.
func StopAll() {
	stopLive()
	stopDocker()
	sharedDirsMu.Lock()
	defer sharedDirsMu.Unlock()
	for _, d := range sharedDirs {
		os.RemoveAll(d)
	}
	sharedDirs = nil
}

// Prefix returns a key prefix no other test uses, such as
// "t/TestLease-sub_case-1f2e3d4c5b6a7988/", so tests can share a bucket.
func Prefix(t testing.TB) string {
	t.Helper()
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("key prefix for %s: %v", t.Name(), err)
	}
	name := unsafeKeyChars.ReplaceAllString(t.Name(), "-")
	if len(name) > 100 {
		name = name[:100]
	}
	return "t/" + name + "-" + hex.EncodeToString(b[:]) + "/"
}

// Characters left out of prefixes: anything a store or a URL might treat
// specially, including the '/' that separates subtest names.
var unsafeKeyChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// shared is one emulator instance per test binary, started on first use.
// A failed start is remembered: every later caller fails (or skips) the
// same way without trying again.
type shared[T any] struct {
	once sync.Once
	val  *T
	err  error
}

var (
	sharedVGW     shared[S3]
	sharedVGWVer  shared[S3]
	sharedMinIO   shared[S3]
	sharedCeph    shared[S3]
	sharedS3rver  shared[S3]
	sharedGCS     shared[GCS]
	sharedAzurite shared[Azure]

	sharedDirsMu sync.Mutex
	sharedDirs   []string // data directories of shared instances, removed by StopAll
)

// get returns the instance, starting it on first use.
func (s *shared[T]) get(t testing.TB, start func(dir string) (*T, *Process, error)) *T {
	t.Helper()
	s.once.Do(func() {
		dir, err := os.MkdirTemp("", "objlease-emulator-")
		if err != nil {
			s.err = err
			return
		}
		sharedDirsMu.Lock()
		sharedDirs = append(sharedDirs, dir)
		sharedDirsMu.Unlock()
		s.val, _, s.err = start(dir)
	})
	check(t, s.err)
	return s.val
}

func private[T any](t testing.TB, start func(dir string) (*T, *Process, error)) (*T, *Process) {
	t.Helper()
	v, p, err := start(t.TempDir())
	check(t, err)
	// Also after a panic in the test: cleanups run before the test binary
	// dies.
	t.Cleanup(p.stopForGood)
	return v, p
}

// check fails the test on err, or skips it if an emulator is not installed
// (or container mode has no engine) and this is not CI.
func check(t testing.TB, err error) {
	t.Helper()
	var (
		missing *missingError
		engine  *engineError
	)
	switch {
	case err == nil:
	case (errors.As(err, &missing) || errors.As(err, &engine)) && os.Getenv("CI") != "true":
		t.Skip(err)
	default:
		t.Fatal(err)
	}
}

// missingError: an emulator is not installed where the harness looks.
type missingError struct{ name, path, dirSource string }

func (e *missingError) Error() string {
	return fmt.Sprintf("emulator %s not installed: no %s (%s); install it with ./scripts/install-emulators.sh",
		e.name, e.path, e.dirSource)
}

// binary finds an installed emulator: rel is its path under the emulators
// directory.
func binary(name, rel string) (string, error) {
	dir, source, err := emulatorsDir()
	if err != nil {
		return "", fmt.Errorf("emulator %s: %w", name, err)
	}
	path := filepath.Join(dir, rel)
	if _, err := os.Stat(path); err != nil {
		return "", &missingError{name: name, path: path, dirSource: source}
	}
	return path, nil
}

// emulatorsDir is $OBJLEASE_EMULATORS_DIR, or else .cache/emulators in the
// repository: the directory above the working directory that holds both
// go.mod and integration/go.mod.
func emulatorsDir() (dir, source string, err error) {
	if d := os.Getenv("OBJLEASE_EMULATORS_DIR"); d != "" {
		return d, "from OBJLEASE_EMULATORS_DIR", nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if isFile(filepath.Join(d, "go.mod")) && isFile(filepath.Join(d, "integration", "go.mod")) {
			return filepath.Join(d, ".cache", "emulators"), "the repository default; OBJLEASE_EMULATORS_DIR is unset", nil
		}
		if filepath.Dir(d) == d {
			return "", "", fmt.Errorf("OBJLEASE_EMULATORS_DIR is unset and no repository root (go.mod beside integration/go.mod) above %s", wd)
		}
	}
}

func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}
