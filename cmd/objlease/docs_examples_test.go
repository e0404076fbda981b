package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// docExamples are the examples in docs/cli.md that run the same on any
// machine: each is the "$ objlease ..." line as the docs give it, and what
// to put in place first. /tmp/ws stands for a fresh directory.
var docExamples = []struct {
	cmd   string
	setup func(t *testing.T, ws string)
	env   []string
}{
	{cmd: `objlease inspect 's3://bkt/k?endpoint=http://127.0.0.1:1'`, env: []string{"AWS_ACCESS_KEY_ID=k", "AWS_SECRET_ACCESS_KEY=s", "AWS_REGION=us-east-1"}},
	{cmd: `objlease inspect file:///var/leases/..`},
	{cmd: `objlease inspect s3://bk/lease`},
	{cmd: `objlease inspect file:///tmp/ws/notes`, setup: func(t *testing.T, ws string) {
		writeFile(t, filepath.Join(ws, "notes"), "hello world\n")
	}},
	{cmd: `objlease break --force file:///tmp/ws/leases/nightly`, setup: func(t *testing.T, ws string) {
		url := "file://" + ws + "/leases/nightly"
		for range 2 {
			runDoc(t, nil, "acquire", "--holder", "build-11", url)
			runDoc(t, nil, "release", "--holder", "build-11", url)
		}
		runDoc(t, nil, "acquire", "--holder", "build-11", url)
	}},
	{cmd: `objlease break --force file:///tmp/ws/leases/nightly`, setup: func(t *testing.T, ws string) {
		writeFile(t, filepath.Join(ws, "leases", "nightly"), "lunch at noon\n")
	}},
	{cmd: `objlease break --force --min-token 5 file:///tmp/ws/leases/nightly`, setup: func(t *testing.T, ws string) {
		writeFile(t, filepath.Join(ws, "leases", "nightly"), "lunch at noon\n")
	}},
}

// TestDocsExamplesRunAsShown runs the examples of docs/cli.md that need
// no store but a local one, and checks that the binary prints the lines
// the docs show (stderr, then stdout), and the exit code where the docs
// give one with "echo $?".
func TestDocsExamplesRunAsShown(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "cli.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	seen := map[string]int{} // the n-th example of a command is its n-th in the docs
	for _, ex := range docExamples {
		nth := seen[ex.cmd]
		seen[ex.cmd]++
		t.Run(ex.cmd, func(t *testing.T) {
			want, code, ok := shownOutput(lines, "$ "+ex.cmd, nth)
			if !ok {
				t.Fatalf("docs/cli.md shows no example %q", ex.cmd)
			}
			ws := t.TempDir()
			if ex.setup != nil {
				ex.setup(t, ws)
			}
			args := splitWords(strings.ReplaceAll(strings.TrimPrefix(ex.cmd, "objlease "), "/tmp/ws", ws))
			got, gotCode := runDoc(t, ex.env, args...)
			got = strings.ReplaceAll(got, ws, "/tmp/ws")
			if got != want {
				t.Errorf("docs/cli.md shows\n%s\nthe binary prints\n%s", want, got)
			}
			if code >= 0 && gotCode != code {
				t.Errorf("docs/cli.md shows exit %d, the binary exits %d", code, gotCode)
			}
		})
	}
}

// shownOutput is what docs/cli.md shows after the nth (from 0) line cmd: the lines up
// to the next "$ " line or the end of the code block, and the exit code if
// an "echo $?" follows (-1 if not).
func shownOutput(lines []string, cmd string, nth int) (out string, code int, ok bool) {
	code = -1
	for i, l := range lines {
		if l != cmd {
			continue
		}
		if nth--; nth >= 0 {
			continue
		}
		var b strings.Builder
		j := i + 1
		for ; j < len(lines) && !strings.HasPrefix(lines[j], "$ ") && lines[j] != "```"; j++ {
			b.WriteString(lines[j] + "\n")
		}
		if j+1 < len(lines) && lines[j] == "$ echo $?" {
			code, _ = strconv.Atoi(lines[j+1])
		}
		return b.String(), code, true
	}
	return "", code, false
}

// runDoc runs the command in this process with env set, and returns its
// stderr then stdout, and its exit code.
func runDoc(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	var stdout, stderr bytes.Buffer
	c := &cli{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr}
	code := c.main(context.Background(), args)
	return stderr.String() + stdout.String(), code
}

// splitWords splits a command line at spaces, as the shell does with
// words in single quotes kept whole.
func splitWords(line string) []string {
	var words []string
	for i, part := range strings.Split(line, "'") {
		if i%2 == 1 {
			words = append(words, part)
		} else {
			words = append(words, strings.Fields(part)...)
		}
	}
	return words
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
