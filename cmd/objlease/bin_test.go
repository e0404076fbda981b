package main

import (
	"os/exec"
	"testing"
)

// objleaseBin is the objlease command testscript.Main installed on $PATH:
// this test binary, run as a separate process.
func objleaseBin(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("objlease")
	if err != nil {
		t.Fatal(err)
	}
	return bin
}
