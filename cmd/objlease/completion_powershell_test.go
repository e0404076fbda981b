package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var psString = regexp.MustCompile(`'((?:[^']|'')*)'`)

// psStrings are the single-quoted strings of s, unquoted, in order.
func psStrings(s string) []string {
	var out []string
	for _, m := range psString.FindAllStringSubmatch(s, -1) {
		out = append(out, strings.ReplaceAll(m[1], "''", "'"))
	}
	return out
}

// psTable reads the entries of the hashtable the script assigns to
// $name: each line 'KEY' = VALUE, the value's strings.
func psTable(t *testing.T, script, name string) map[string][]string {
	t.Helper()
	head := "    $" + name + " = "
	i := strings.Index(script, head)
	if i < 0 {
		t.Fatalf("the PowerShell script assigns no $%s", name)
	}
	rest := script[i+len(head):]
	end := strings.Index(rest, "\n    }\n")
	if end < 0 {
		t.Fatalf("$%s's table has no end", name)
	}
	out := map[string][]string{}
	for _, line := range strings.Split(rest[:end], "\n")[1:] {
		key, val, ok := strings.Cut(strings.TrimSpace(line), " = ")
		if !ok {
			t.Fatalf("$%s: line %q is not 'KEY' = VALUE", name, line)
		}
		k := psStrings(key)
		if len(k) != 1 {
			t.Fatalf("$%s: key %q", name, key)
		}
		out[k[0]] = psStrings(val)
	}
	return out
}

// psBalanced reports the first place where the script's brackets do not
// pair up or a string is not closed, reading PowerShell's quoting:
// single-quoted strings (a quote doubled inside), double-quoted ones
// (backtick escapes) and # comments.
func psBalanced(s string) string {
	var stack []rune
	pairs := map[rune]rune{')': '(', '}': '{', ']': '['}
	line := 1
	for i := 0; i < len(s); i++ {
		c := rune(s[i])
		switch c {
		case '\n':
			line++
		case '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
			line++
		case '\'':
			i++
			for ; ; i++ {
				if i >= len(s) {
					return "a single-quoted string is not closed"
				}
				if s[i] == '\'' {
					if i+1 < len(s) && s[i+1] == '\'' {
						i++
						continue
					}
					break
				}
			}
		case '"':
			i++
			for ; ; i++ {
				if i >= len(s) {
					return "a double-quoted string is not closed"
				}
				if s[i] == '`' {
					i++
					continue
				}
				if s[i] == '"' {
					break
				}
			}
		case '(', '{', '[':
			stack = append(stack, c)
		case ')', '}', ']':
			if len(stack) == 0 || stack[len(stack)-1] != pairs[c] {
				return "an unpaired " + string(c) + " on line " + strconv.Itoa(line)
			}
			stack = stack[:len(stack)-1]
		}
	}
	if len(stack) > 0 {
		return "unclosed " + string(stack)
	}
	return ""
}

// TestPowerShellCompletionStructure reads the PowerShell script as data
// (PowerShell is not needed): its brackets and strings pair up, it
// registers a native completer for objlease and objlease.exe, and its
// tables are the command table's: every visible command with its
// summary, each command's flags, subcommands and flag values, the help
// topics and the schemes (not mem://).
func TestPowerShellCompletionStructure(t *testing.T) {
	var out, stderr bytes.Buffer
	c := &cli{stdin: strings.NewReader(""), stdout: &out, stderr: &stderr}
	if code := c.main(context.Background(), []string{"completion", "powershell"}); code != 0 {
		t.Fatalf("completion powershell exited %d: %s", code, &stderr)
	}
	script := out.String()
	if msg := psBalanced(script); msg != "" {
		t.Fatalf("the PowerShell script does not parse: %s", msg)
	}
	if !strings.Contains(script, "Register-ArgumentCompleter -Native -CommandName objlease, objlease.exe -ScriptBlock {") {
		t.Error("the script registers no native completer for objlease")
	}

	cmds := psTable(t, script, "commands")
	flags := psTable(t, script, "flags")
	subs := psTable(t, script, "subcommands")
	values := psTable(t, script, "values")
	for _, name := range visibleCommands() {
		cmd := lookup(name)
		if got := cmds[name]; len(got) != 1 || got[0] != cmd.summary {
			t.Errorf("$commands[%s] = %q, want the summary %q", name, got, cmd.summary)
		}
		if want := c.flagNames()[name]; !slices.Equal(flags[name], want) {
			t.Errorf("$flags[%s] = %q, want %q", name, flags[name], want)
		}
		if !slices.Equal(subs[name], cmd.subcommands) {
			t.Errorf("$subcommands[%s] = %q, want %q", name, subs[name], cmd.subcommands)
		}
		for f, want := range c.flagValues()[name] {
			alt := "-" + f // -o and --o, --log-format and -log-format
			if strings.HasPrefix(f, "--") {
				alt = f[1:]
			}
			for _, spelling := range []string{f, alt} {
				if got := values[name+" "+spelling]; !slices.Equal(got, want) {
					t.Errorf("$values[%q] = %q, want %q", name+" "+spelling, got, want)
				}
			}
		}
	}
	if len(cmds) != len(visibleCommands()) || len(flags) != len(visibleCommands()) {
		t.Errorf("$commands has %d entries, $flags %d; %d commands are visible", len(cmds), len(flags), len(visibleCommands()))
	}
	if !slices.Contains(subs["completion"], "powershell") {
		t.Error("completion's subcommands leave powershell out")
	}
	topics := regexp.MustCompile(`(?m)^    \$topics = (.*)$`).FindStringSubmatch(script)
	if topics == nil || !slices.Equal(psStrings(topics[1]), append(visibleCommands(), exitCodesTopic, manTopic)) {
		t.Errorf("$topics: %q", topics)
	}
	sch := regexp.MustCompile(`(?m)^    \$schemes = (.*)$`).FindStringSubmatch(script)
	if sch == nil || !slices.Equal(psStrings(sch[1]), schemes()) {
		t.Errorf("$schemes: %q, want %q", sch, schemes())
	}
}

// TestPowerShellCompletionInPwsh asks PowerShell itself (TabExpansion2)
// what the script completes, where pwsh is installed; elsewhere it
// skips, even with CI=true (no package of the distribution provides it).
func TestPowerShellCompletionInPwsh(t *testing.T) {
	pwsh, err := exec.LookPath("pwsh")
	if err != nil {
		t.Skip("no pwsh: the script is checked by TestPowerShellCompletionStructure only")
	}
	dir := t.TempDir()
	var out bytes.Buffer
	c := &cli{stdin: strings.NewReader(""), stdout: &out, stderr: &out}
	if code := c.main(context.Background(), []string{"completion", "powershell"}); code != 0 {
		t.Fatalf("completion powershell exited %d: %s", code, &out)
	}
	script := filepath.Join(dir, "objlease.ps1")
	if err := os.WriteFile(script, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "leases", "jobs"), 0o755); err != nil {
		t.Fatal(err)
	}
	for line, want := range map[string]string{
		"objlease wat":                          "watch",
		"objlease batch ":                       "put commit show",
		"objlease completion p":                 "powershell",
		"objlease hold --store-c":               "--store-clock",
		"objlease watch --log-format j":         "json",
		"objlease list -o w":                    "wide",
		"objlease inspect fi":                   "file://",
		"objlease inspect file://" + dir + "/l": "file://" + dir + "/leases/",
		"objlease inspect " + dir + "/leases/j": dir + "/leases/jobs/",
	} {
		cmd := exec.Command(pwsh, "-NoProfile", "-NonInteractive", "-Command",
			". '"+script+"'; (TabExpansion2 -inputScript '"+strings.ReplaceAll(line, "'", "''")+"' -cursorColumn "+
				strconv.Itoa(len(line))+").CompletionMatches.CompletionText -join ' '")
		got, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("pwsh: %v\n%s", err, got)
		}
		if strings.TrimSpace(string(got)) != want {
			t.Errorf("TAB after %q: %q, want %q", line, strings.TrimSpace(string(got)), want)
		}
	}
}
