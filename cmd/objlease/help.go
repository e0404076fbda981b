package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/objlease/objlease/cmd/objlease/internal/bench"
	"github.com/objlease/objlease/providers"
)

// exitCodesSignals is what the exit-code table says of signals and of
// run's command, which no error maps to.
const exitCodesSignals = `  128+N  interrupted by signal N (130: SIGINT, 143: SIGTERM, 129: SIGHUP), every
         command, hold too while it waits for the lease (it never held it);
         hold once it holds the lease, watch, elect --listen, and elect
         without a command once elected, exit 0: their normal end
  other  run, elect: the command's own exit status, or 128+N if it died of
         signal N
`

// exitCodesHelp is the table "objlease help exit-codes" prints.
func exitCodesHelp() string {
	var b strings.Builder
	b.WriteString("Exit codes:\n")
	rows := slices.Clone(exitCodes)
	slices.SortStableFunc(rows, func(a, b struct {
		code    int
		errs    []error
		meaning string
	}) int {
		return a.code - b.code
	})
	for _, row := range rows {
		fmt.Fprintf(&b, "  %-4d %s\n", row.code, row.meaning)
	}
	b.WriteString(exitCodesSignals)
	return b.String()
}

func (c *cli) usage(w io.Writer) {
	fmt.Fprint(w, `objlease takes, inspects, watches and breaks leases stored in object storage.
Every change to a lease is a conditional write; its fencing token increases
with every acquisition.

Usage:
  objlease [-v] COMMAND [flags] URL

Commands:
`)
	for _, cmd := range commands {
		if !cmd.hidden {
			fmt.Fprintf(w, "  %-10s %s\n", cmd.name, cmd.summary)
		}
	}
	fmt.Fprintf(w, `
Flags may come before or after the URL. -v logs debug messages and prints
the whole cause of an error; all logs and messages go to stderr.
"objlease help COMMAND" shows a command's flags.

URLs (schemes: %s):
  file:///var/leases/nightly              a file under a local directory
  s3://BUCKET/KEY[?endpoint=URL&region=R] Amazon S3 or a compatible store
  gs://BUCKET/KEY[?endpoint=URL]          Google Cloud Storage
  azblob://CONTAINER/KEY[?account=NAME]   Azure Blob Storage
  /var/leases/nightly, ./l/job, l/job     a plain path: file:// with it made absolute

`, strings.Join(providers.Schemes(), ", "))
	fmt.Fprint(w, `Exit codes: "objlease help exit-codes".

Environment of run's command:
  OBJLEASE_TOKEN   the fencing token: stamp it on every write the lease protects
  OBJLEASE_HOLDER  the holder identity written in the record
  OBJLEASE_URL     the lease URL, as given (a plain path as its file:// URL)
`)
}

const helpDetail = `Prints the overview: commands and URLs. With a COMMAND, prints that
command's help and flags (as "objlease COMMAND -h" does); "objlease help
exit-codes" prints the table of exit codes, "objlease help man" all of it
as a manual page (objlease.1).`

// exitCodesTopic is the help topic that is not a command.
const exitCodesTopic = "exit-codes"

func (c *cli) helpCmd(fs *flagSet) action {
	return func(ctx context.Context, pos []string) error {
		if len(pos) == 0 {
			c.usage(c.stdout)
			return nil
		}
		if len(pos) == 1 && pos[0] == exitCodesTopic {
			_, err := io.WriteString(c.stdout, exitCodesHelp())
			return err
		}
		if len(pos) == 1 && pos[0] == manTopic {
			_, err := io.WriteString(c.stdout, c.manPage())
			return err
		}
		cmd := lookup(pos[0])
		if len(pos) > 1 || cmd == nil || cmd.hidden {
			return usagef("help: unknown command %q (want one of %s, or %s or %s)", strings.Join(pos, " "), commandNames(), exitCodesTopic, manTopic)
		}
		cfs := newFlagSet(cmd)
		cmd.setup(c, cfs)
		cfs.printUsage(c.stdout)
		return nil
	}
}

const versionDetail = `Prints the module version, the VCS revision it was built from (if known)
and the Go version. "objlease --version" does the same. With -o json it
prints {"version","revision","modified","go","os","arch"}.`

// versionInfo is what version prints with -o json.
type versionInfo struct {
	Version  string `json:"version"`
	Revision string `json:"revision"`
	Modified bool   `json:"modified"` // built from a tree with uncommitted changes
	Go       string `json:"go"`
	OS       string `json:"os"`
	Arch     string `json:"arch"`
}

func (c *cli) versionCmd(fs *flagSet) action {
	asJSON := addOutput(fs)
	return func(ctx context.Context, pos []string) error {
		if len(pos) > 0 {
			return usagef("version takes no arguments")
		}
		if *asJSON {
			return c.printJSON(buildVersion())
		}
		return c.printVersion()
	}
}

// version and revision are stamped by a release build (scripts/release.sh:
// -ldflags "-X main.version=v0.1.0 -X main.revision=<commit>"); without
// them the module's build information says what it can (the version when
// installed with go install …@v0.1.0, the commit in a checkout).
var version, revision string

// buildVersion reads the version from the stamps and the binary's build
// information.
func buildVersion() versionInfo {
	v := versionInfo{Version: "(devel)", Go: "unknown", OS: runtime.GOOS, Arch: runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		v.Version, v.Go = bi.Main.Version, bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Revision = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	if version != "" {
		v.Version = version
	}
	if revision != "" {
		v.Revision = revision
	}
	return v
}

func (c *cli) printVersion() error {
	v := buildVersion()
	rev := ""
	if v.Revision != "" {
		rev = " " + v.Revision
	}
	_, err := fmt.Fprintf(c.stdout, "objlease %s%s %s\n", v.Version, rev, v.Go)
	return err
}

const benchDetail = bench.Detail

// benchHolderCmd is the hidden command bench's failover section starts and
// kills.
const benchHolderCmd = "_bench-holder"

func (c *cli) benchCmd(fs *flagSet) action {
	run := bench.Flags(fs.FlagSet)
	return func(ctx context.Context, pos []string) error {
		url, err := fs.oneURL(pos)
		if err != nil {
			return err
		}
		return opErr("bench", url, run(ctx, c.benchEnv(), url))
	}
}

func (c *cli) benchHolderCmd(fs *flagSet) action {
	run := bench.HolderFlags(fs.FlagSet)
	return func(ctx context.Context, pos []string) error {
		return run(ctx, c.benchEnv(), pos)
	}
}

func (c *cli) benchEnv() bench.Env {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	return bench.Env{Stdout: c.stdout, Stderr: c.stderr, Log: c.log, Holder: []string{exe, benchHolderCmd},
		Open: func(ctx context.Context, rawURL string, opts providers.OpenOptions) (providers.Store, string, error) {
			return c.openAny(ctx, rawURL, false, opts)
		}}
}

const completionDetail = `Prints a completion script for bash, zsh or fish: commands, their
subcommands (batch put, ...), their flags, URL schemes, and paths after
file://.

  source <(objlease completion bash)                                     # bash, e.g. in ~/.bashrc
  objlease completion zsh > "${fpath[1]}/_objlease"                       # zsh
  objlease completion fish > ~/.config/fish/completions/objlease.fish     # fish`

func (c *cli) completionCmd(fs *flagSet) action {
	return func(ctx context.Context, pos []string) error {
		if len(pos) != 1 {
			return usagef("completion takes one shell: bash, zsh or fish")
		}
		var script string
		switch pos[0] {
		case "bash":
			script = c.bashCompletion()
		case "zsh":
			script = "#compdef objlease\nautoload -U +X bashcompinit && bashcompinit\n" + c.bashCompletion()
		case "fish":
			script = c.fishCompletion()
		default:
			return usagef("completion: unknown shell %q (want bash, zsh or fish)", pos[0])
		}
		_, err := io.WriteString(c.stdout, script)
		return err
	}
}

// flagNames lists each visible command's flags, as "--name".
func (c *cli) flagNames() map[string][]string {
	out := map[string][]string{}
	for i := range commands {
		cmd := &commands[i]
		if cmd.hidden {
			continue
		}
		fs := newFlagSet(cmd)
		cmd.setup(c, fs)
		names := []string{"--help"}
		fs.VisitAll(func(f *flag.Flag) {
			if len(f.Name) == 1 {
				names = append(names, "-"+f.Name)
			} else {
				names = append(names, "--"+f.Name)
			}
		})
		out[cmd.name] = names
	}
	return out
}

func visibleCommands() []string {
	var names []string
	for _, cmd := range commands {
		if !cmd.hidden {
			names = append(names, cmd.name)
		}
	}
	return names
}

// schemes are the URL schemes completion offers.
func schemes() []string {
	var out []string
	for _, s := range providers.Schemes() {
		if s == "mem" {
			continue // only bench takes it: offered, it would only be refused
		}
		out = append(out, s+"://")
	}
	return out
}

// bashCompletion is the bash completion script (zsh runs it through
// bashcompinit). bash splits words at ':' (COMP_WORDBREAKS), so the script
// takes the word before the cursor from COMP_LINE, completes the whole
// URL, and gives bash back the part after its own word break.
func (c *cli) bashCompletion() string {
	var b strings.Builder
	b.WriteString(`# objlease completion for bash (and zsh through bashcompinit)
_objlease() {
  local word=${COMP_WORDS[COMP_CWORD]} cmd=${COMP_WORDS[1]}
  local cur=$word pre="" line
  if [ -n "$COMP_LINE" ]; then
    line=${COMP_LINE:0:COMP_POINT}
    cur=${line##*[[:space:]]}
    pre=${cur%"$word"}
  fi
  local flags subs f
  COMPREPLY=()
`)
	fmt.Fprintf(&b, "  if [ \"$COMP_CWORD\" -eq 1 ]; then COMPREPLY=($(compgen -W %q -- \"$cur\")); return; fi\n", strings.Join(visibleCommands(), " "))
	b.WriteString("  case $cmd in\n")
	fn := c.flagNames()
	for _, name := range visibleCommands() {
		fmt.Fprintf(&b, "    %s) flags=%q", name, strings.Join(fn[name], " "))
		if cmd := lookup(name); len(cmd.subcommands) > 0 {
			fmt.Fprintf(&b, "; subs=%q", strings.Join(cmd.subcommands, " "))
		}
		b.WriteString(" ;;\n")
	}
	b.WriteString("  esac\n")
	fmt.Fprintf(&b, `  case $cur in
    -*) COMPREPLY=($(compgen -W "$flags" -- "$cur")) ;;
    file://*)
      # Split at ':', bash is left with "//PATH", a path it can show and
      # mark as a directory itself; otherwise the script marks directories.
      compopt -o filenames 2>/dev/null
      while IFS= read -r f; do
        if [ -z "$pre" ] && [ -d "$f" ]; then f=$f/; compopt -o nospace 2>/dev/null; fi
        COMPREPLY+=("file://$f")
      done < <(compgen -f -- "${cur#file://}") ;;
    *)
      if [ -n "$subs" ] && [ "$COMP_CWORD" -eq 2 ]; then COMPREPLY=($(compgen -W "$subs" -- "$cur"))
      elif [ "$cmd" = help ]; then COMPREPLY=($(compgen -W %q -- "$cur"))
      else
        # A URL's scheme, or a plain path (a file:// URL made absolute).
        COMPREPLY=($(compgen -W %q -- "$cur"))
        compopt -o filenames 2>/dev/null
        if [ ${#COMPREPLY[@]} -gt 0 ] && [[ $cur != */* ]]; then compopt -o nospace 2>/dev/null; fi
        while IFS= read -r f; do COMPREPLY+=("$f"); done < <(compgen -f -- "$cur")
      fi ;;
  esac
  if [ -n "$pre" ]; then COMPREPLY=("${COMPREPLY[@]#"$pre"}"); fi
}
complete -F _objlease objlease
`, strings.Join(append(visibleCommands(), exitCodesTopic, manTopic), " "), strings.Join(schemes(), " "))
	return b.String()
}

func (c *cli) fishCompletion() string {
	var b strings.Builder
	b.WriteString("# objlease completion for fish\ncomplete -c objlease -f\n")
	for _, cmd := range commands {
		if !cmd.hidden {
			fmt.Fprintf(&b, "complete -c objlease -n __fish_use_subcommand -a %s -d %q\n", cmd.name, cmd.summary)
		}
	}
	fn := c.flagNames()
	for _, name := range visibleCommands() {
		if subs := lookup(name).subcommands; len(subs) > 0 {
			fmt.Fprintf(&b, "complete -c objlease -n '__fish_seen_subcommand_from %s' -a %q\n", name, strings.Join(subs, " "))
		}
		for _, f := range fn[name] {
			if long, ok := strings.CutPrefix(f, "--"); ok {
				fmt.Fprintf(&b, "complete -c objlease -n '__fish_seen_subcommand_from %s' -l %s\n", name, long)
			} else {
				fmt.Fprintf(&b, "complete -c objlease -n '__fish_seen_subcommand_from %s' -s %s\n", name, strings.TrimPrefix(f, "-"))
			}
		}
	}
	for _, name := range visibleCommands() {
		if subs := lookup(name).subcommands; len(subs) > 0 {
			fmt.Fprintf(&b, "complete -c objlease -n '__fish_seen_subcommand_from %s; and not __fish_seen_subcommand_from %s' -a '%s'\n",
				name, strings.Join(subs, " "), strings.Join(subs, " "))
		}
	}
	fmt.Fprintf(&b, "complete -c objlease -n 'not __fish_use_subcommand' -a %q -d 'store URL'\n", strings.Join(schemes(), " "))
	b.WriteString(`function __objlease_file_urls
    set -l t (commandline -ct)
    string match -q 'file://*' -- $t; or return
    for p in (__fish_complete_path (string replace -r '^file://' '' -- $t))
        echo file://$p
    end
end
complete -c objlease -n 'not __fish_use_subcommand' -a '(__objlease_file_urls)'
complete -c objlease -n 'not __fish_use_subcommand' -F
`)
	return b.String()
}
