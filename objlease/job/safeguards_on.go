//go:build !objlease_unsafe

package job

// In a normal build every safety measure is on; a build with the
// objlease_unsafe tag reads the switches of internal/safeguards instead
// (safeguards_off.go), for the tests that show what each measure prevents.

func judgeByValidity() bool   { return true }
func deadlineOnRenewal() bool { return true }
