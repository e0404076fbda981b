//go:build objlease_unsafe

package job

import "github.com/objlease/objlease/internal/safeguards"

// This build reads the switches of internal/safeguards, which the tests
// built with the objlease_unsafe tag turn off one at a time; a normal build
// has every measure on (safeguards_on.go).

func judgeByValidity() bool   { return safeguards.JudgeByValidity.Load() }
func deadlineOnRenewal() bool { return safeguards.DeadlineOnRenewal.Load() }
