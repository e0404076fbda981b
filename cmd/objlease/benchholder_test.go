package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// The failover section of bench starts this binary as its holder helper,
// with the helper's own flags: the command must accept them (the CLI's
// generic flag parsing used to refuse --key, so every failover trial
// failed).
func TestBenchHolderAcceptsItsFlags(t *testing.T) {
	var stdout, stderr bytes.Buffer
	c := &cli{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr}
	args := []string{benchHolderCmd, "--key", "bench/failover", "--ttl", "2s", "--release", "file://" + t.TempDir() + "/"}
	if code := c.main(context.Background(), args); code != 0 {
		t.Fatalf("%q: exit %d, stderr:\n%s", args, code, stderr.String())
	}
	// The report, then one line per write: here the release's.
	var rep struct{ Token uint64 }
	first, rest, _ := strings.Cut(stdout.String(), "\n")
	if err := json.Unmarshal([]byte(first), &rep); err != nil || rep.Token != 1 {
		t.Fatalf("stdout %q (%v), want the holder's report with token 1", stdout.String(), err)
	}
	if !strings.HasPrefix(rest, "w ") {
		t.Fatalf("stdout %q, want a line for the release's write after the report", stdout.String())
	}
}
