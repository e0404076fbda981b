// Package emulator starts the object-store emulators the integration tests
// run against, as child processes of the test binary (or containers) on
// free ports of 127.0.0.1:
//
//   - versitygw (S3, posix backend): VersityGW, StartVersityGW, and
//     VersityGWVersioned, which can version a bucket
//   - s3rver (S3 that accepts preconditions and ignores them): S3rver
//   - MinIO (S3 that ignores If-Match on DELETE): MinIO, StartMinIO
//   - distributed MinIO (4 server processes, one erasure set):
//     MinIOCluster, StartMinIOCluster
//   - fake-gcs-server (GCS): FakeGCS, StartFakeGCS
//   - Azurite (Azure Blob): Azurite, StartAzurite
//
// VersityGW, S3rver, FakeGCS and Azurite return one instance shared by the
// whole test binary, started on first use; tests keep apart by writing
// under Prefix(t). The Start functions give a test its own instance to
// Stop, Restart, Pause and Resume; it is stopped when the test ends.
// TestMain must call StopAll after m.Run.
//
// Environment:
//
//   - OBJLEASE_EMULATORS_DIR: where scripts/install-emulators.sh installed
//     the emulators (bin/ and node_modules/). Default: .cache/emulators in
//     the repository root.
//   - CI=true: a missing emulator fails the test instead of skipping it.
//   - OBJLEASE_EMULATORS=docker: run versitygw, fake-gcs-server and Azurite,
//     the shared instances and the Start functions' alike, as containers of
//     the pinned images (testcontainers-go) on the host's network, each on
//     a loopback port; s3rver, which has no image, stays a local process.
//     If no Docker engine answers, the tests fail in CI and skip
//     elsewhere: they never fall back to local processes. Ryuk is not
//     used; a reaper process of the test binary's own removes its
//     containers however it exits. scripts/containers.sh provides an
//     engine and the images where none can be pulled.
//   - OBJLEASE_TEST_S3, OBJLEASE_TEST_GCS, OBJLEASE_TEST_AZBLOB: a URL of a
//     real bucket and prefix (s3://bucket/prefix/, gs://bucket/prefix/,
//     azblob://container/prefix/). When set, the provider tests run against
//     that bucket with the ambient credentials of the cloud's SDK instead of
//     the emulator. Such tests write and delete objects under the prefix.
//
// The harness is for Linux and other Unix systems: it manages emulators
// with process groups and signals, and the containers with the host's
// network (which Docker Desktop on macOS or Windows does not share).
package emulator
