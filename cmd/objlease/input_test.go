package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A file on standard input positioned past its end (a script that seeked
// too far) has nothing left to send: put says so, with the way round,
// and exits 64 as for an empty input; it used to exit 69 with "unexpected
// EOF", the store's words for a short body.
func TestPutStdinPastItsEnd(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	if err := os.WriteFile(in, []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(10, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	c := &cli{stdin: f, stdout: &stdout, stderr: &stderr}
	url := "file://" + dir + "/out/obj"
	code := c.main(context.Background(), []string{"put", "--token", "1", url})
	want := "objlease: put " + url + ": standard input is positioned past its end (at byte 10 of a file of 3 bytes): nothing left to write; give the file from its start (< FILE)\n"
	if code != 64 || stderr.String() != want {
		t.Fatalf("exit %d, stderr %q; want 64, %q", code, stderr.String(), want)
	}
	if _, err := os.Stat(filepath.Join(dir, "out")); !os.IsNotExist(err) {
		t.Errorf("something was written: %v", err)
	}
	if strings.Contains(stderr.String(), "EOF") {
		t.Errorf("the line names EOF: %s", &stderr)
	}
}
