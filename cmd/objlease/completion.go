package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/objlease/objlease/providers"
)

const completionDetail = `Prints a completion script for bash, zsh, fish or PowerShell: commands,
their subcommands (batch put, ...), their flags, URL schemes, and paths
after file://.

  source <(objlease completion bash)                                     # bash, e.g. in ~/.bashrc
  objlease completion zsh > "${fpath[1]}/_objlease"                       # zsh
  objlease completion fish > ~/.config/fish/completions/objlease.fish     # fish
  objlease completion powershell | Out-String | Invoke-Expression        # PowerShell, e.g. in $PROFILE`

func (c *cli) completionCmd(fs *flagSet) action {
	return func(ctx context.Context, pos []string) error {
		if len(pos) != 1 {
			return usagef("completion takes one shell: bash, zsh, fish or powershell")
		}
		var script string
		switch pos[0] {
		case "bash":
			script = c.bashCompletion()
		case "zsh":
			script = "#compdef objlease\nautoload -U +X bashcompinit && bashcompinit\n" + c.bashCompletion()
		case "fish":
			script = c.fishCompletion()
		case "powershell":
			script = c.powershellCompletion()
		default:
			return usagef("completion: unknown shell %q (want bash, zsh, fish or powershell)", pos[0])
		}
		_, err := io.WriteString(c.stdout, script)
		return err
	}
}

// flagNames lists each visible command's flags, as "--name".
func (c *cli) flagNames() map[string][]string {
	out := map[string][]string{}
	for cmd, fs := range c.listedCommands() {
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

// flagValues lists, for each visible command, the values of its flags
// that take one of a few words (--log-format, -o), by "--name" or "-n".
func (c *cli) flagValues() map[string]map[string][]string {
	out := map[string]map[string][]string{}
	for cmd, fs := range c.listedCommands() {
		vals := map[string][]string{}
		if fs.Lookup("log-format") != nil {
			vals["--log-format"] = []string{"text", "json"}
		}
		if f := fs.Lookup("o"); f != nil {
			var words []string
			for _, w := range []string{"text", "json", "wide"} {
				if strings.Contains(f.Usage, w) {
					words = append(words, w)
				}
			}
			if len(words) > 0 {
				vals["-o"] = words
			}
		}
		out[cmd.name] = vals
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
	// The word after a flag that takes one of a few values: those values.
	b.WriteString("  local prev=\"\"\n  if [ \"$COMP_CWORD\" -gt 1 ]; then prev=${COMP_WORDS[COMP_CWORD-1]}; fi\n  case $cmd:$prev in\n")
	fv := c.flagValues()
	for _, name := range visibleCommands() {
		for _, f := range slices.Sorted(maps.Keys(fv[name])) {
			alt := "-" + f // -o and --o, --log-format and -log-format
			if strings.HasPrefix(f, "--") {
				alt = f[1:]
			}
			fmt.Fprintf(&b, "    %s:%s|%s:%s) COMPREPLY=($(compgen -W %q -- \"$cur\")); return ;;\n", name, f, name, alt, strings.Join(fv[name][f], " "))
		}
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
	fv := c.flagValues()
	for _, name := range visibleCommands() {
		if subs := lookup(name).subcommands; len(subs) > 0 {
			fmt.Fprintf(&b, "complete -c objlease -n '__fish_seen_subcommand_from %s' -a %q\n", name, strings.Join(subs, " "))
		}
		for _, f := range fn[name] {
			values := ""
			if v := fv[name][f]; len(v) > 0 {
				values = fmt.Sprintf(" -xa '%s'", strings.Join(v, " "))
			}
			if long, ok := strings.CutPrefix(f, "--"); ok {
				fmt.Fprintf(&b, "complete -c objlease -n '__fish_seen_subcommand_from %s' -l %s%s\n", name, long, values)
			} else {
				fmt.Fprintf(&b, "complete -c objlease -n '__fish_seen_subcommand_from %s' -s %s%s\n", name, strings.TrimPrefix(f, "-"), values)
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
