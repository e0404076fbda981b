//go:build objlease_unsafe

package supervise

import "github.com/objlease/objlease/internal/safeguards"

// This build reads the switches of internal/safeguards, which the tests
// built with the objlease_unsafe tag turn off one at a time; a normal build
// has every measure on (safeguards_on.go).

func stopTaskDirectly() bool { return safeguards.StopTaskDirectly.Load() }
