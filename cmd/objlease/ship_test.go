package main

import (
	"os/exec"
	"strings"
	"testing"
)

// unsafeOnly are the packages that exist only for tests built with
// -tags objlease_unsafe: switches that turn the protocol's safety measures
// off. No package of a normal build may depend on them.
var unsafeOnly = []string{
	"github.com/objlease/objlease/internal/safeguards",
}

// TestNothingUnsafeShips lists the dependencies of the CLI and of every
// package of the module, as a normal build compiles them, and fails if the
// safety switches are among them.
func TestNothingUnsafeShips(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the build's packages: %v", err)
	}
	for _, pattern := range []string{".", "github.com/objlease/objlease/..."} {
		out, err := exec.Command(goBin, "list", "-deps", pattern).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pattern, err)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 10 {
			t.Fatalf("go list -deps %s listed only %q", pattern, deps)
		}
		for _, d := range deps {
			for _, bad := range unsafeOnly {
				if d == bad {
					t.Errorf("go list -deps %s includes %s: the safety switches are in a normal build", pattern, d)
				}
			}
		}
	}
}
