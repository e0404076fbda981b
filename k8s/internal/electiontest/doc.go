// Package electiontest runs client-go's LeaderElector on the resourcelock
// against the emulators. It holds only tests, in a module of its own:
// k8s/go.mod is what importers of the resourcelock read, and a requirement
// there of the emulator harness (the integration module, which is not
// published) would fail their go mod tidy and go list -m all.
package electiontest
