package main

import (
	"bytes"
	"fmt"
	"strings"
)

// manTopic is the help topic that prints the manual page.
const manTopic = "man"

// manPage is objlease(1) in roff, made of the same text help prints: the
// overview, each command's help with its flags, and the exit codes. Each
// is kept as help lays it out (a no-fill block), so the page says nothing
// help does not.
func (c *cli) manPage() string {
	var b strings.Builder
	b.WriteString(".TH OBJLEASE 1 \"\" \"objlease " + roffEscape(buildVersion().Version) + "\" \"User Commands\"\n")
	b.WriteString(".SH NAME\nobjlease \\- leases and fencing tokens in object storage\n")
	b.WriteString(".SH SYNOPSIS\n.B objlease\n[\\-v] COMMAND [flags] URL\n")
	var overview bytes.Buffer
	c.usage(&overview)
	b.WriteString(".SH DESCRIPTION\n")
	noFill(&b, overview.String())
	b.WriteString(".SH COMMANDS\n")
	for cmd, fs := range c.listedCommands() {
		var help bytes.Buffer
		fs.printUsage(&help)
		fmt.Fprintf(&b, ".SS %s\n", roffEscape(cmd.name))
		noFill(&b, help.String())
	}
	b.WriteString(".SH EXIT STATUS\n")
	noFill(&b, exitCodesHelp())
	b.WriteString(".SH SEE ALSO\nhttps://github.com/objlease/objlease (docs/cli.md, docs/protocol.md)\n")
	return b.String()
}

// noFill writes text as a no-fill block, each line as written.
func noFill(b *strings.Builder, text string) {
	b.WriteString(".nf\n")
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		if line == "" {
			b.WriteString("\n")
			continue
		}
		b.WriteString("\\&" + roffEscape(line) + "\n") // \& keeps a leading . or ' text
	}
	b.WriteString(".fi\n")
}

// roffEscape makes s print as itself: a backslash is roff's escape, a
// plain - may be set as a hyphen rather than the minus a flag needs, and
// roff reads its input as Latin-1 unless each other character is named.
func roffEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\e`)
		case r == '-':
			b.WriteString(`\-`)
		case r > 0x7e:
			fmt.Fprintf(&b, `\[u%04X]`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
