//go:build objlease_unsafe

package objlease

import "github.com/objlease/objlease/internal/safeguards"

// This build reads the switches of internal/safeguards, which the tests
// built with the objlease_unsafe tag turn off one at a time; a normal build
// has every measure on (safeguards_on.go).

func driftMargin() bool           { return safeguards.DriftMargin.Load() }
func keepRecordOnRelease() bool   { return safeguards.KeepRecordOnRelease.Load() }
func nonceCheck() bool            { return safeguards.NonceCheck.Load() }
func uniqueNonces() bool          { return safeguards.UniqueNonces.Load() }
func ownWriteCheck() bool         { return safeguards.OwnWriteCheck.Load() }
func forceWaits() bool            { return safeguards.ForceWaits.Load() }
func callbackBeforeRelease() bool { return safeguards.CallbackBeforeRelease.Load() }
