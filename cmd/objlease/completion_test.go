package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
)

// interactiveBash is a bash reading a pseudo-terminal, as a person's
// shell does: readline, COMP_WORDBREAKS and the listing of candidates are
// the real ones.
type interactiveBash struct {
	t    *testing.T
	tty  *os.File
	mu   sync.Mutex
	out  bytes.Buffer
	seen int // output before this offset has been matched already
}

func startBash(t *testing.T) *interactiveBash {
	t.Helper()
	path, err := exec.LookPath("bash")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("bash is needed to test completion, and CI=true: %v", err)
		}
		t.Skipf("no bash: %v", err)
	}
	cmd := exec.Command(path, "--norc", "--noprofile", "-i")
	home := t.TempDir()
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "TERM=xterm", "PS1=READY> ", "INPUTRC=/dev/null", "LANG=C"}
	cmd.Dir = home
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 200})
	if err != nil {
		t.Fatalf("starting bash on a pseudo-terminal: %v", err)
	}
	b := &interactiveBash{t: t, tty: tty}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, err := tty.Read(buf)
			b.mu.Lock()
			b.out.Write(buf[:n])
			b.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		tty.Write([]byte("\x15exit\n"))
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
		}
		cmd.Wait()
		tty.Close()
	})
	b.expect(`READY> `)
	return b
}

// send types s.
func (b *interactiveBash) send(s string) {
	b.t.Helper()
	if _, err := b.tty.Write([]byte(s)); err != nil {
		b.t.Fatalf("typing %q: %v", s, err)
	}
}

// expect waits until the output since the last match matches re, and
// fails after 10 seconds with what bash printed.
func (b *interactiveBash) expect(re string) {
	b.t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(10 * time.Second)
	for {
		b.mu.Lock()
		out := b.out.String()[b.seen:]
		if loc := rx.FindStringIndex(out); loc != nil {
			b.seen += loc[1]
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		if time.Now().After(deadline) {
			b.t.Fatalf("bash printed nothing matching %q within 10s; since the last match it printed:\n%q", re, out)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// line ends the line being typed by running it as echo's arguments, and
// waits for what echo prints: the line as completion left it.
func (b *interactiveBash) line(want string) {
	b.t.Helper()
	b.send("\x01echo \"<\"\x05\">\"\n") // Ctrl-A: start of the line; Ctrl-E: its end
	b.expect(`<` + regexp.QuoteMeta(want) + `>\r?\n`)
	b.expect(`READY> `)
}

// TestCompletionInInteractiveBash types TAB in a real interactive bash
// that sourced "objlease completion bash", and reads what bash does.
func TestCompletionInInteractiveBash(t *testing.T) {
	var script, stderr bytes.Buffer
	c := &cli{stdin: strings.NewReader(""), stdout: &script, stderr: &stderr}
	if code := c.main(context.Background(), []string{"completion", "bash"}); code != 0 {
		t.Fatalf("completion bash exited %d: %s", code, &stderr)
	}
	dir := t.TempDir()
	scriptPath := filepath.Join(dir, "objlease.bash")
	if err := os.WriteFile(scriptPath, script.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	leases := filepath.Join(dir, "xyz")
	for _, p := range []string{"jobs/nightly", "lease-a", "lease-b", "only/one"} {
		if err := os.MkdirAll(filepath.Join(leases, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(leases, p), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	b := startBash(t)
	b.send("source " + scriptPath + "\n")
	b.expect(`READY> `)

	// Commands, then the subcommands of a command that has them.
	b.send("objlease wat\t")
	b.line("objlease watch ")
	for i := range commands {
		cmd := &commands[i]
		if len(cmd.subcommands) == 0 || cmd.hidden {
			continue
		}
		t.Run(cmd.name, func(t *testing.T) {
			b.t = t
			b.send("objlease " + cmd.name + " \t\t")
			b.expect(strings.Join(sortedCopy(cmd.subcommands), `\s+`))
			b.send("\x15") // Ctrl-U: drop the line
			last := cmd.subcommands[len(cmd.subcommands)-1]
			b.send("objlease " + cmd.name + " " + last[:len(last)-1] + "\t")
			b.line("objlease " + cmd.name + " " + last + " ")
		})
	}
	b.t = t

	// A file path after file://, the prefix kept; a directory gets its
	// slash and no space, so that the path can go on.
	b.send("objlease inspect file://" + leases + "/\t\t")
	b.expect(`jobs/\s+lease-a\s+lease-b\s+only/\s`)
	b.send("\x15")
	b.send("objlease inspect file://" + leases + "/j\t")
	b.line("objlease inspect file://" + leases + "/jobs/")
	b.send("objlease inspect file://" + leases + "/o\tone\t")
	b.line("objlease inspect file://" + leases + "/only/one ")
	b.send("objlease batch show file://" + leases + "/jobs/n\t")
	b.line("objlease batch show file://" + leases + "/jobs/nightly ")

	// Where ':' does not break words (zsh's bashcompinit, or a user's
	// COMP_WORDBREAKS), the script marks directories itself.
	b.send("COMP_WORDBREAKS=${COMP_WORDBREAKS//:/}\n")
	b.expect(`READY> `)
	b.send("objlease inspect file://" + leases + "/o\tone\t")
	b.line("objlease inspect file://" + leases + "/only/one ")

	// A plain path, as a file:// URL's path is completed.
	b.send("objlease inspect " + leases + "/o\tone\t")
	b.line("objlease inspect " + leases + "/only/one ")
	b.send("objlease inspect " + leases + "/j\t")
	b.line("objlease inspect " + leases + "/jobs/")
	b.send("\x15")

	// The values of a flag that takes one of a few words, not schemes.
	b.send("objlease acquire --log-format \t\t")
	b.expect(`json\s+text\s`)
	b.send("\x15")
	b.send("objlease watch --log-format j\t")
	b.line("objlease watch --log-format json ")
	b.send("objlease list -o w\t")
	b.line("objlease list -o wide ")

	// Flags, and schemes.
	b.send("objlease hold --store-c\t")
	b.line("objlease hold --store-clock ")
	b.send("objlease inspect fi\t")
	b.line("objlease inspect file://")
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// Completion offers the schemes a command takes: not mem://, which every
// command but bench refuses.
func TestCompletionOffersNoMem(t *testing.T) {
	c := &cli{}
	for shell, script := range map[string]string{"bash": c.bashCompletion(), "fish": c.fishCompletion(), "powershell": c.powershellCompletion()} {
		if strings.Contains(script, "mem://") || !strings.Contains(script, "s3://") {
			t.Errorf("%s completion: mem:// offered, or s3:// not", shell)
		}
	}
}
