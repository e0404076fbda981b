package main

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/objlease/objlease/cmd/objlease/internal/supervise"
	"github.com/objlease/objlease/providers"
)

// FuzzArgs: whatever the command line (one argument per line of the
// input), objlease never panics, ends with a documented exit code, and
// says on stderr why it refused a usage error.
//
// Lines that would reach beyond the process are skipped: run and its supervisor start a
// command, acquire leaves a lease renewed in the background, and every
// scheme but mem touches the disk or the network. Seeds are in
// testdata/fuzz/FuzzArgs.
func FuzzArgs(f *testing.F) {
	var outside []string
	for _, s := range providers.Schemes() {
		if s != "mem" {
			outside = append(outside, s+":")
		}
	}
	// put and batch put read the object from stdin: give them an empty one
	// whatever the test's own stdin is.
	stdin := os.Stdin
	null, err := os.Open(os.DevNull)
	if err != nil {
		f.Fatal(err)
	}
	os.Stdin = null
	f.Cleanup(func() { os.Stdin = stdin; null.Close() })
	f.Fuzz(func(t *testing.T, line string) {
		var args []string
		if line != "" {
			args = strings.Split(line, "\n")
		}
		cmd := args
		for len(cmd) > 0 && (cmd[0] == "-v" || cmd[0] == "--v") {
			cmd = cmd[1:]
		}
		if len(cmd) > 0 && slices.Contains([]string{"run", "acquire", "hold", "elect", "watch", "bench", benchHolderCmd, supervise.Command}, cmd[0]) {
			return
		}
		for _, a := range args {
			for _, o := range outside {
				if strings.Contains(strings.ToLower(a), o) {
					return
				}
			}
		}
		var stdout, stderr bytes.Buffer
		c := &cli{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr}
		code := c.main(context.Background(), args)
		switch code {
		case 0, 1, 64, 65, 69, 75, 76, 77: // as docs/cli.md lists them
		default:
			t.Fatalf("objlease %q exited %d, not a documented exit code", args, code)
		}
		if code == 64 && stderr.Len() == 0 {
			t.Fatalf("objlease %q: usage error (64) with nothing on stderr", args)
		}
	})
}
