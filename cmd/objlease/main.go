// Command objlease takes, inspects, watches and breaks leases stored in
// object storage, and runs a command while holding one, like flock(1)
// across machines. Run "objlease help" for the commands, flags and exit
// codes; docs/cli.md has the same with examples.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"iter"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/objlease/objlease/cmd/objlease/internal/supervise"
	_ "github.com/objlease/objlease/providers/all"
)

func main() {
	// Like signal.NotifyContext, but the cause names the signal: the exit
	// status (128+N) and run, which passes signals on to its command, need
	// to know which one arrived.
	sigc := make(chan os.Signal, 8)
	signal.Notify(sigc, caught...)
	ctx, cancel := context.WithCancelCause(context.Background())
	relay := make(chan os.Signal, 8)
	go func() {
		for s := range sigc {
			cancel(interrupt{s})
			select {
			case relay <- s:
			default:
			}
		}
	}()
	c := &cli{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, signals: relay}
	// What a library writes to the standard logger (net/http's "Unsolicited
	// response received on idle HTTP channel", from a server that is not
	// the store) would break the one line an error is: -v shows it.
	log.SetFlags(0)
	log.SetOutput(stdLog{c})
	code := c.main(ctx, os.Args[1:])
	signal.Stop(sigc)
	os.Exit(code)
}

// stdLog passes the standard logger's lines to the command's debug log.
type stdLog struct{ c *cli }

func (w stdLog) Write(p []byte) (int, error) {
	if w.c.log != nil {
		w.c.log.Debug(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// caught are the signals that end a command cleanly (and that run passes
// on to its command).
var caught = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

// cli is one invocation: where input comes from, where output goes, and
// the logger every message goes through.
type cli struct {
	stdin   io.Reader
	stdout  io.Writer
	stderr  io.Writer
	signals <-chan os.Signal // every signal main caught, for run to pass on

	verbose bool
	// heldExit is -E: the exit code for a lease held elsewhere (0: 75).
	heldExit int
	level    slog.LevelVar
	log      *slog.Logger
	// requestTimeout bounds each store request (--request-timeout).
	requestTimeout time.Duration
	// probe is what --http serves; nil without --http.
	probe *probe
	// tel is the command's telemetry (telemetry.go); nil when off. span
	// is the command's span, the parent of work done on a context of its
	// own (a release after a signal).
	tel  *telemetry
	span trace.SpanContext
	// logJSON: --log-format json; cmdName is the command running, for it.
	logJSON bool
	cmdName string
	logMu   *sync.Mutex // one line at a time on stderr
}

// action runs a command with its positional arguments, once its flags are
// parsed.
type action func(ctx context.Context, pos []string) error

// command is one subcommand.
type command struct {
	name    string
	args    string // synopsis after the name
	summary string
	detail  string
	// setup registers the command's flags on fs and returns what runs it.
	setup func(c *cli, fs *flagSet) action
	// cmdAfter > 0: after that many positional arguments, or after "--",
	// the rest of the command line is a command to run, not parsed.
	cmdAfter int
	hidden   bool
	// subcommands are the names that may follow the command's name
	// (completion offers them there).
	subcommands []string
}

var commands []command

func init() {
	// Assigned here because help refers back to the table.
	commands = []command{
		{name: "run", args: "[flags] URL -- COMMAND [ARGS...]", summary: "run a command while holding the lease", detail: runDetail, setup: (*cli).runCmd, cmdAfter: 1},
		{name: "hold", args: "[flags] URL", summary: "take the lease, print its token, renew it until signalled", detail: holdDetail, setup: (*cli).holdCmd},
		{name: "acquire", args: "[flags] URL", summary: "take the lease and print its fencing token", detail: acquireDetail, setup: (*cli).acquireCmd},
		{name: "release", args: "--holder HOLDER [flags] URL", summary: "release the lease held by HOLDER", detail: releaseDetail, setup: (*cli).releaseCmd},
		{name: "inspect", args: "[-o json] [flags] URL", summary: "show the lease record at URL", detail: inspectDetail, setup: (*cli).inspectCmd},
		{name: "list", args: "[-o json|wide] [--no-headers] [flags] PREFIX-URL", summary: "list the leases under a prefix", detail: listDetail, setup: (*cli).listCmd},
		{name: "group", args: "[show] [-o json|wide] [flags] PREFIX-URL | join [flags] PREFIX-URL -- COMMAND [ARGS...] | define PREFIX-URL ID...", summary: "show a shard group, join it running a command per owned shard, or define its shards", detail: groupDetail, setup: (*cli).groupCmd, cmdAfter: 2, subcommands: []string{"show", "join", "define"}},
		{name: "watch", args: "[flags] URL|PREFIX-URL", summary: "print a line for every change to a lease or the leases under a prefix", detail: watchDetail, setup: (*cli).watchCmd},
		{name: "elect", args: "[flags] URL [-- COMMAND [ARGS...]]", summary: "campaign for leadership and run a command while leader, or --listen for the leader", detail: electDetail, setup: (*cli).electCmd, cmdAfter: 1},
		{name: "break", args: "--force [--min-token N] [--fenced KEY]... URL", summary: "end the lease whoever holds it", detail: breakDetail, setup: (*cli).breakCmd},
		{name: "put", args: "--token N [flags] URL < DATA", summary: "write stdin to an object, fenced by a token", detail: putDetail, setup: (*cli).putCmd},
		{name: "rm", args: "--token N [flags] URL", summary: "delete an object, fenced by a token", detail: rmDetail, setup: (*cli).rmCmd},
		{name: "batch", args: "put|commit|show [flags] PREFIX-URL [NAME]", summary: "write and commit a guarded output prefix", detail: batchDetail, setup: (*cli).batchCmd, subcommands: []string{"put", "commit", "show"}},
		{name: "doctor", args: "[--ttl DURATION] [-o json] PREFIX-URL", summary: "check that a store enforces conditional writes", detail: doctorDetail, setup: (*cli).doctorCmd},
		{name: "bench", args: "[flags] PREFIX-URL", summary: "measure latency, cost, contention and failover on a store", detail: benchDetail, setup: (*cli).benchCmd},
		{name: benchHolderCmd, hidden: true, setup: (*cli).benchHolderCmd},
		{name: supervise.Command, hidden: true, setup: (*cli).superviseCmd},
		{name: "completion", args: "bash|zsh|fish|powershell", summary: "print a shell completion script", detail: completionDetail, setup: (*cli).completionCmd, subcommands: []string{"bash", "zsh", "fish", "powershell"}},
		{name: "help", args: "[COMMAND|exit-codes|man]", summary: "show this help, or a command's", detail: helpDetail, setup: (*cli).helpCmd},
		{name: "version", args: "[-o json]", summary: "print the version", detail: versionDetail, setup: (*cli).versionCmd},
	}
}

// main runs the command line args and returns the exit code.
func (c *cli) main(ctx context.Context, args []string) int {
	// Quiet by default, as flock(1) is: only warnings and errors.
	c.level.Set(slog.LevelWarn)
	c.logMu = new(sync.Mutex)
	c.log = slog.New(&lineHandler{w: c.stderr, level: &c.level, verbose: &c.verbose, json: &c.logJSON, cmd: &c.cmdName, mu: c.logMu})

	for len(args) > 0 && (args[0] == "-v" || args[0] == "--v") {
		c.setVerbose()
		args = args[1:]
	}
	err := c.dispatch(ctx, args)
	var st exitStatus
	var in interrupt
	if i, ok := interrupted(ctx); ok && err != nil && !errors.As(err, &st) && !errors.As(err, &in) {
		// Whatever a signal cut short (a request, a wait, a release) is
		// reported as the signal: 128+N and one line, not the SDK's
		// words for a cancelled request.
		c.log.Debug("interrupted", slog.Any("err", err))
		var oe *opError
		if errors.As(err, &oe) {
			err = &opError{op: oe.op, url: oe.url, err: i}
		} else {
			err = i
		}
	}
	code := exitCodeOf(err)
	if c.heldExit != 0 && code == exitHeld && !errors.As(err, &st) {
		code = c.heldExit // -E
	}
	if err != nil {
		c.report(err, code)
	}
	return code
}

func (c *cli) setVerbose() {
	c.verbose = true
	c.level.Set(slog.LevelDebug)
}

func (c *cli) dispatch(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("no command given (want one of %s); objlease help shows the usage", commandNames())
	}
	switch args[0] {
	case "-h", "-help", "--help":
		c.usage(c.stdout)
		return nil
	case "--version", "-version":
		return c.printVersion()
	}
	cmd := lookup(args[0])
	if cmd == nil {
		if strings.HasPrefix(args[0], "-") {
			return usagef("flag %s before the command: only -v goes there; a command's flags follow its name: objlease COMMAND [flags] URL", args[0])
		}
		return usagef("unknown command %q (want one of %s)", args[0], commandNames())
	}
	c.cmdName = cmd.name
	fs := newFlagSet(cmd)
	act := cmd.setup(c, fs)
	pos, err := fs.parse(c, args[1:])
	if errors.Is(err, flag.ErrHelp) {
		fs.printUsage(c.stdout)
		return nil
	}
	if err != nil {
		return err
	}
	return c.traced(ctx, cmd, fs, pos, act)
}

func lookup(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

// listedCommands yields each command that help lists, in order, with its
// flags set up.
func (c *cli) listedCommands() iter.Seq2[*command, *flagSet] {
	return func(yield func(*command, *flagSet) bool) {
		for i := range commands {
			cmd := &commands[i]
			if cmd.hidden {
				continue
			}
			fs := newFlagSet(cmd)
			cmd.setup(c, fs)
			if !yield(cmd, fs) {
				return
			}
		}
	}
}

func commandNames() string {
	var names []string
	for _, cmd := range commands {
		if !cmd.hidden {
			names = append(names, cmd.name)
		}
	}
	return strings.Join(names, ", ")
}

// report prints err as one line a person can act on, and under -v the
// whole chain of causes. With --log-format json it is one object with the
// exit code and, where known, the URL.
func (c *cli) report(err error, code int) {
	var st exitStatus
	if errors.As(err, &st) {
		return // run: the command's own status; it spoke for itself
	}
	if c.logJSON {
		fields := []jsonField{{"exit", code}}
		var oe *opError
		if errors.As(err, &oe) {
			fields = append(fields, jsonField{"url", oe.url})
		}
		if c.verbose {
			fields = append(fields, jsonField{"detail", err.Error()})
		}
		if c.logMu != nil {
			c.logMu.Lock()
			defer c.logMu.Unlock()
		}
		c.stderr.Write(jsonLine(slog.LevelError, describe(err), c.cmdName, fields))
		return
	}
	fmt.Fprintf(c.stderr, "objlease: %s\n", describe(err))
	if c.verbose {
		fmt.Fprintf(c.stderr, "objlease: detail: %v\n", err)
	}
}
