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
	var rep struct{ Token uint64 }
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil || rep.Token != 1 {
		t.Fatalf("stdout %q (%v), want the holder's report with token 1", stdout.String(), err)
	}
}
