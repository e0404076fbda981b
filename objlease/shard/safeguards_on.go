//go:build !objlease_unsafe

package shard

// In a normal build every safety measure is on: each is a function that
// returns true, so the compiler drops the branch that would turn it off and
// no unsafe variant ships. A build with the objlease_unsafe tag reads the
// switches of internal/safeguards instead (safeguards_off.go), for the
// tests that show what each measure prevents.

func callbackBeforeRelease() bool { return true }
