package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/objlease/objlease/cmd/objlease/internal/bench"
	"github.com/objlease/objlease/providers"
)

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
	b.WriteString("  other  run, elect: the command's own exit status, or 128+N if it died of signal N;\n" +
		"         any command interrupted by signal N (hold, watch, elect --listen, and elect\n" +
		"         without a command once elected: 0)\n")
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

`, strings.Join(providers.Schemes(), ", "))
	fmt.Fprint(w, exitCodesHelp())
	fmt.Fprint(w, `
Environment of run's command:
  OBJLEASE_TOKEN   the fencing token: stamp it on every write the lease protects
  OBJLEASE_HOLDER  the holder identity written in the record
  OBJLEASE_URL     the lease URL, as given
`)
}

const helpDetail = `Prints the overview: commands, URLs and exit codes. With a COMMAND, prints
that command's help and flags (as "objlease COMMAND -h" does).`

func (c *cli) helpCmd(fs *flagSet) action {
	return func(ctx context.Context, pos []string) error {
		if len(pos) == 0 {
			c.usage(c.stdout)
			return nil
		}
		cmd := lookup(pos[0])
		if len(pos) > 1 || cmd == nil || cmd.hidden {
			return usagef("help: unknown command %q (want one of %s)", strings.Join(pos, " "), commandNames())
		}
		cfs := newFlagSet(cmd)
		cmd.setup(c, cfs)
		cfs.printUsage(c.stdout)
		return nil
	}
}

const versionDetail = `Prints the module version, the VCS revision it was built from (if known)
and the Go version. "objlease --version" does the same.`

func (c *cli) versionCmd(fs *flagSet) action {
	return func(ctx context.Context, pos []string) error {
		if len(pos) > 0 {
			return usagef("version takes no arguments")
		}
		return c.printVersion()
	}
}

func (c *cli) printVersion() error {
	version, rev, goVersion := "(devel)", "", "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		version, goVersion = bi.Main.Version, bi.GoVersion
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				rev = " " + s.Value
			}
		}
	}
	_, err := fmt.Fprintf(c.stdout, "objlease %s%s %s\n", version, rev, goVersion)
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

const completionDetail = `Prints a completion script for bash, zsh or fish: commands, their flags, and
URL schemes.

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

func schemes() []string {
	var out []string
	for _, s := range providers.Schemes() {
		out = append(out, s+"://")
	}
	return out
}

func (c *cli) bashCompletion() string {
	var b strings.Builder
	b.WriteString("# objlease completion for bash (and zsh through bashcompinit)\n_objlease() {\n")
	b.WriteString("  local cur=${COMP_WORDS[COMP_CWORD]} cmd=${COMP_WORDS[1]}\n")
	fmt.Fprintf(&b, "  if [ \"$COMP_CWORD\" -eq 1 ]; then COMPREPLY=($(compgen -W %q -- \"$cur\")); return; fi\n", strings.Join(visibleCommands(), " "))
	b.WriteString("  local flags\n  case $cmd in\n")
	fn := c.flagNames()
	for _, name := range visibleCommands() {
		fmt.Fprintf(&b, "    %s) flags=%q ;;\n", name, strings.Join(fn[name], " "))
	}
	b.WriteString("  esac\n")
	b.WriteString("  case $cur in\n    -*) COMPREPLY=($(compgen -W \"$flags\" -- \"$cur\")) ;;\n")
	b.WriteString("    file://*) compopt -o nospace 2>/dev/null; COMPREPLY=($(compgen -P file:// -f -- \"${cur#file://}\")) ;;\n")
	fmt.Fprintf(&b, "    *) if [ \"$cmd\" = help ]; then COMPREPLY=($(compgen -W %q -- \"$cur\")); else compopt -o nospace 2>/dev/null; COMPREPLY=($(compgen -W %q -- \"$cur\")); fi ;;\n",
		strings.Join(visibleCommands(), " "), strings.Join(schemes(), " "))
	b.WriteString("  esac\n}\ncomplete -F _objlease objlease\n")
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
		for _, f := range fn[name] {
			if long, ok := strings.CutPrefix(f, "--"); ok {
				fmt.Fprintf(&b, "complete -c objlease -n '__fish_seen_subcommand_from %s' -l %s\n", name, long)
			} else {
				fmt.Fprintf(&b, "complete -c objlease -n '__fish_seen_subcommand_from %s' -s %s\n", name, strings.TrimPrefix(f, "-"))
			}
		}
	}
	fmt.Fprintf(&b, "complete -c objlease -n 'not __fish_use_subcommand' -a %q -d 'store URL'\n", strings.Join(schemes(), " "))
	return b.String()
}
