// Command relink makes the relative links of Markdown files that would
// not resolve where the files are shipped point at the repository: a
// release archive holds README.md and CHANGELOG.md but not docs/, so
// "[cli](docs/cli.md)" becomes "[cli](BASE/docs/cli.md)". Links to files
// that DIR holds (LICENSE, CHANGELOG.md) stay as they are.
//
// With -check it changes nothing and lists the relative links that do not
// resolve under DIR, exiting 1 if there is any: scripts/release-check.sh
// runs it on an archive.
//
// Usage: go run ./scripts/relink [-check] BASE DIR FILE.md...
package main

import (
	"flag"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// link is a Markdown inline link or image: "](target)". Reference-style
// definitions ("[x]: target") are matched by def.
var (
	link = regexp.MustCompile(`\]\(([^()\s]+)\)`)
	def  = regexp.MustCompile(`(?m)^\[[^\]]+\]:\s+(\S+)`)
)

func main() {
	check := flag.Bool("check", false, "list the relative links that do not resolve, change nothing")
	flag.Parse()
	if flag.NArg() < 3 {
		fmt.Fprintln(os.Stderr, "usage: go run ./scripts/relink [-check] BASE DIR FILE.md...")
		os.Exit(2)
	}
	base, dir := strings.TrimSuffix(flag.Arg(0), "/")+"/", flag.Arg(1)
	bad := 0
	for _, name := range flag.Args()[2:] {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			fmt.Fprintln(os.Stderr, "relink:", err)
			os.Exit(1)
		}
		out, dangling := relink(string(b), path.Dir(filepath.ToSlash(name)), base, func(p string) bool {
			_, err := os.Stat(filepath.Join(dir, filepath.FromSlash(p)))
			return err == nil
		})
		for _, d := range dangling {
			bad++
			if *check {
				fmt.Fprintf(os.Stderr, "relink: %s: %s does not resolve in %s\n", name, d, dir)
			}
		}
		if !*check {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(out), 0o644); err != nil {
				fmt.Fprintln(os.Stderr, "relink:", err)
				os.Exit(1)
			}
		}
	}
	if *check && bad > 0 {
		os.Exit(1)
	}
}

// relink returns text with each relative link whose file exists reports
// false (the link's path taken from dir, the file's own directory)
// pointing under base instead, and those links as they were.
func relink(text, dir, base string, exists func(string) bool) (string, []string) {
	var dangling []string
	fix := func(target string) string {
		if target == "" || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "/") || strings.Contains(strings.SplitN(target, "/", 2)[0], ":") {
			return target // an anchor in the file, an absolute path, a URL
		}
		p, frag, _ := strings.Cut(target, "#")
		p = path.Clean(path.Join(dir, p))
		if exists(p) {
			return target
		}
		dangling = append(dangling, target)
		if frag != "" {
			return base + p + "#" + frag
		}
		return base + p
	}
	text = link.ReplaceAllStringFunc(text, func(m string) string {
		return "](" + fix(m[2:len(m)-1]) + ")"
	})
	text = def.ReplaceAllStringFunc(text, func(m string) string {
		i := strings.LastIndexAny(m, " \t")
		return m[:i+1] + fix(m[i+1:])
	})
	return text, dangling
}
