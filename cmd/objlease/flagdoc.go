package main

import (
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// flagDoc is one flag as help and docs/cli.md show it: its name, the name
// of its argument, its default (said once) and what it does.
type flagDoc struct {
	name     string
	arg      string // "" for a boolean flag
	def      string // "" if there is none to show
	required bool
	usage    string
}

// defaultInUsage is a default a flag's usage states itself, in words, as
// "(default X)" or "(default: X)": it is shown instead of the flag's value.
var defaultInUsage = regexp.MustCompile(`\s*\(default:? ([^()]*)\)`)

// require marks a flag the command cannot run without: help shows it
// required, with no default.
func (fs *flagSet) require(name string) {
	fs.required = append(fs.required, name)
}

// flagDocs describes every flag of fs, in name order.
func (fs *flagSet) flagDocs() []flagDoc {
	var out []flagDoc
	fs.VisitAll(func(f *flag.Flag) {
		arg, usage := flag.UnquoteUsage(f)
		d := flagDoc{name: f.Name, arg: arg, usage: usage}
		if m := defaultInUsage.FindStringSubmatchIndex(usage); m != nil {
			d.def = usage[m[2]:m[3]]
			d.usage = usage[:m[0]] + usage[m[1]:]
		} else if !isZeroDefault(f) {
			d.def = f.DefValue
		}
		for _, r := range fs.required {
			if r == f.Name {
				d.required, d.def = true, ""
			}
		}
		out = append(out, d)
	})
	return out
}

// isZeroDefault says whether f's default is its type's zero value, which
// goes without saying (as flag.PrintDefaults judges it).
func isZeroDefault(f *flag.Flag) bool {
	switch f.DefValue {
	case "", "0", "false", "0s", "[]":
		return true
	}
	return false
}

// printFlags prints the flags of fs as flag.PrintDefaults does, with each
// default once and "(required)" for a required flag.
func (fs *flagSet) printFlags(w io.Writer) {
	for _, d := range fs.flagDocs() {
		line := "  -" + d.name
		if d.arg != "" {
			line += " " + d.arg
		}
		if len(line) <= 4 {
			line += "\t" // a one-letter boolean flag: its usage on the same line
		} else {
			line += "\n    \t"
		}
		line += strings.ReplaceAll(d.usage, "\n", "\n    \t")
		switch {
		case d.required:
			line += " (required)"
		case d.def != "":
			line += fmt.Sprintf(" (default %s)", d.def)
		}
		fmt.Fprintln(w, line)
	}
}
