// Package emulator starts the object-store emulators the integration tests
// run against, as child processes of the test binary on free ports of
// 127.0.0.1:
//
//   - versitygw (S3, posix backend): VersityGW, StartVersityGW
//   - s3rver (S3 that accepts preconditions and ignores them): S3rver
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
//   - OBJLEASE_EMULATORS=docker: run the shared versitygw, fake-gcs-server
//     and Azurite as containers (testcontainers-go) if a Docker engine
//     answers; otherwise, and for s3rver and the Start functions, local
//     processes are used.
//   - OBJLEASE_TEST_S3, OBJLEASE_TEST_GCS, OBJLEASE_TEST_AZBLOB: a URL of a
//     real bucket and prefix (s3://bucket/prefix/, gs://bucket/prefix/,
//     azblob://container/prefix/). When set, the provider tests run against
//     that bucket with the ambient credentials of the cloud's SDK instead of
//     the emulator. Such tests write and delete objects under the prefix.
//
// The harness is for Linux and other Unix systems: it manages emulators
// with process groups and signals.
package emulator
