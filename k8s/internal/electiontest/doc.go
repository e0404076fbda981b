// Package electiontest runs client-go's LeaderElector on the resourcelock
// against the emulators. It holds only tests, and lives apart from the
// resourcelock package because go mod tidy in a module that imports
// resourcelock loads resourcelock's test imports too: the emulator harness
// (the integration module, which is not published) must not be one of them.
package electiontest
