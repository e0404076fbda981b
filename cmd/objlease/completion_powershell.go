package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// psQuote is s as a PowerShell single-quoted string.
func psQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// psList is an array expression of single-quoted strings.
func psList(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = psQuote(s)
	}
	return "@(" + strings.Join(q, ", ") + ")"
}

// powershellCompletion is the PowerShell completion script: a native
// argument completer for objlease (and objlease.exe) that offers what the
// bash script offers: commands (with their summaries), subcommands, flags,
// the values of a flag that takes one of a few words, URL schemes, and
// paths, after file:// too. Words match case-sensitively, as the command
// reads them.
func (c *cli) powershellCompletion() string {
	var b strings.Builder
	b.WriteString(`# objlease completion for PowerShell
Register-ArgumentCompleter -Native -CommandName objlease, objlease.exe -ScriptBlock {
    param($wordToComplete, $commandAst, $cursorPosition)
    $commands = [ordered]@{
`)
	for _, cmd := range commands {
		if !cmd.hidden {
			fmt.Fprintf(&b, "        %s = %s\n", psQuote(cmd.name), psQuote(cmd.summary))
		}
	}
	b.WriteString("    }\n    $flags = @{\n")
	fn := c.flagNames()
	for _, name := range visibleCommands() {
		fmt.Fprintf(&b, "        %s = %s\n", psQuote(name), psList(fn[name]))
	}
	b.WriteString("    }\n    $subcommands = @{\n")
	for _, name := range visibleCommands() {
		if subs := lookup(name).subcommands; len(subs) > 0 {
			fmt.Fprintf(&b, "        %s = %s\n", psQuote(name), psList(subs))
		}
	}
	// The values of a flag, by "command flag", under both spellings
	// (-o and --o, --log-format and -log-format).
	b.WriteString("    }\n    $values = @{\n")
	fv := c.flagValues()
	for _, name := range visibleCommands() {
		for _, f := range slices.Sorted(maps.Keys(fv[name])) {
			alt := "-" + f
			if strings.HasPrefix(f, "--") {
				alt = f[1:]
			}
			for _, spelling := range []string{f, alt} {
				fmt.Fprintf(&b, "        %s = %s\n", psQuote(name+" "+spelling), psList(fv[name][f]))
			}
		}
	}
	b.WriteString("    }\n")
	fmt.Fprintf(&b, "    $topics = %s\n", psList(append(visibleCommands(), exitCodesTopic, manTopic)))
	fmt.Fprintf(&b, "    $schemes = %s\n", psList(schemes()))
	b.WriteString(`    # The words before the one being completed, the command name left out.
    $done = @($commandAst.CommandElements | Select-Object -Skip 1 |
        Where-Object { $_.Extent.EndOffset -lt $cursorPosition } | ForEach-Object { $_.ToString() })
    $word = "$wordToComplete"
    $results = [System.Collections.Generic.List[System.Management.Automation.CompletionResult]]::new()
    $add = {
        param($text, $type, $tip)
        if ($text.StartsWith($word, [System.StringComparison]::Ordinal)) {
            if (-not $tip) { $tip = $text }
            $results.Add([System.Management.Automation.CompletionResult]::new($text, $text, $type, $tip))
        }
    }
    # The files and directories whose path starts with $prefix, after
    # $scheme, a directory with a slash after its name.
    $paths = {
        param($prefix, $scheme)
        $dir = ''
        $leaf = $prefix
        $cut = $prefix.LastIndexOfAny([char[]]'/\')
        if ($cut -ge 0) {
            $dir = $prefix.Substring(0, $cut + 1)
            $leaf = $prefix.Substring($cut + 1)
        }
        $from = $dir
        if (-not $from) { $from = '.' }
        Get-ChildItem -LiteralPath $from -Force -ErrorAction SilentlyContinue |
            Where-Object { $_.Name.StartsWith($leaf, [System.StringComparison]::Ordinal) } |
            Sort-Object Name | ForEach-Object {
                $p = $scheme + $dir + $_.Name
                if ($_.PSIsContainer) { $p += '/' }
                & $add $p 'ProviderItem' $null
            }
    }
    if ($done.Count -eq 0) {
        foreach ($name in $commands.Keys) { & $add $name 'Command' $commands[$name] }
        return $results
    }
    $cmd = $done[0]
    $prev = $done[-1]
    if ($done.Count -gt 1 -and $values.ContainsKey("$cmd $prev")) {
        foreach ($v in $values["$cmd $prev"]) { & $add $v 'ParameterValue' $null }
        return $results
    }
    if ($word.StartsWith('-')) {
        foreach ($f in $flags[$cmd]) { & $add $f 'ParameterName' $null }
        return $results
    }
    if ($done.Count -eq 1 -and $subcommands.ContainsKey($cmd)) {
        foreach ($s in $subcommands[$cmd]) { & $add $s 'ParameterValue' $null }
        return $results
    }
    if ($cmd -eq 'help') {
        foreach ($t in $topics) { & $add $t 'ParameterValue' $null }
        return $results
    }
    if ($word.StartsWith('file://')) {
        & $paths $word.Substring(7) 'file://'
        return $results
    }
    # A URL's scheme, or a plain path (a file:// URL made absolute).
    foreach ($s in $schemes) { & $add $s 'ParameterValue' $null }
    & $paths $word ''
    return $results
}
`)
	return b.String()
}
