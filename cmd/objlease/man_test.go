package main

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// The manual page holds every command's help and every flag, and roff
// reads it without a warning.
func TestManPageIsTheHelp(t *testing.T) {
	var out bytes.Buffer
	c := &cli{stdout: &out}
	if err := c.helpCmd(newFlagSet(lookup("help")))(t.Context(), []string{manTopic}); err != nil {
		t.Fatal(err)
	}
	page := out.String()
	for i := range commands {
		cmd := &commands[i]
		if cmd.hidden {
			continue
		}
		if !strings.Contains(page, ".SS "+roffEscape(cmd.name)+"\n") {
			t.Errorf("no section for %s", cmd.name)
		}
		fs := newFlagSet(cmd)
		cmd.setup(c, fs)
		for _, d := range fs.flagDocs() {
			if !strings.Contains(page, roffEscape("-"+d.name)) {
				t.Errorf("%s: flag -%s missing", cmd.name, d.name)
			}
		}
	}
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(line, "'") {
			t.Errorf("line read as a roff request: %q", line)
		}
	}
	groff, err := exec.LookPath("groff")
	if err != nil {
		t.Logf("groff not found: the page's roff was not linted")
		return
	}
	lint := exec.Command(groff, "-man", "-Tutf8", "-ww", "-z")
	lint.Stdin = strings.NewReader(page)
	if msg, err := lint.CombinedOutput(); err != nil || len(msg) > 0 {
		t.Errorf("groff -ww: %v\n%s", err, msg)
	}
}
