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

// A key or a path a person would not type (a newline from a variable, a
// name of 5,000 bytes) still gives one line of a readable length, the
// control character escaped and the long name cut in its middle, and the
// usage exit: a directory name too long for the file system was a store
// failure (69) in a 9.9 KB line.
func TestErrorLineOfAnOddPath(t *testing.T) {
	dir := t.TempDir()
	long := strings.Repeat("a", 5000)
	for _, tc := range []struct {
		name, url string
		want      []string
	}{
		{"newline", dir + "/a\nb", []string{`/a\nb: the store does not accept the key "a\nb": key contains a control character`}},
		{"long key", dir + "/" + long, []string{"…(", `key is 5000 bytes, file allows 1024`}},
		{"long directory", dir + "/" + long + "/k", []string{"…(", `bad store URL: the directory's path has a name of 5000 bytes, starting "aaaa`, "a file system takes at most 255 bytes a name"}},
		{"long path", dir + strings.Repeat("/"+strings.Repeat("c", 250), 20) + "/k", []string{"…(", "bad store URL: the directory's path is", "longer than the file system takes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			c := &cli{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr}
			code := c.main(context.Background(), []string{"acquire", "--holder", "h", tc.url})
			line := stderr.String()
			if code != 64 || strings.Count(line, "\n") != 1 || len(line) > 600 {
				t.Errorf("exit %d, %d bytes in %d lines: %q; want 64 and one line of at most 600 bytes", code, len(line), strings.Count(line, "\n"), line)
			}
			for _, w := range tc.want {
				if !strings.Contains(line, w) {
					t.Errorf("%q does not say %q", line, w)
				}
			}
		})
	}
}
