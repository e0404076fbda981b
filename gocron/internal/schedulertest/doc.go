// Package schedulertest runs gocron's own schedulers on the Elector and
// Locker against a directory and the emulators. It holds only tests, in a
// module of its own: gocron/go.mod is what importers of gocronlease read,
// and a requirement there of the emulator harness (the integration module,
// which is not published) would fail their go mod tidy and go list -m all.
package schedulertest
