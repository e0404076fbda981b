// Command objlease takes, inspects and breaks leases stored in object
// storage, and runs a command while holding one, like flock(1) across
// machines. Run "objlease help" for the commands, flags and exit codes;
// docs/cli.md has the same with examples.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/providers"
	_ "github.com/objlease/objlease/providers/all"
)

// Exit codes, from sysexits(3) where one fits.
const (
	exitOK          = 0
	exitNo          = 1  // the answer is no: no lease at the key (inspect, release), unsafe store (doctor)
	exitUsage       = 64 // EX_USAGE
	exitBadRecord   = 65 // EX_DATAERR: the object at the key is not a lease record
	exitUnavailable = 69 // EX_UNAVAILABLE: the store failed
	exitNotAcquired = 75 // EX_TEMPFAIL: held by someone else
	exitLost        = 76 // run: the lease was lost while the command ran
	exitStale       = 77 // EX_NOPERM: a fenced write or commit was refused: a newer token has written
)

func main() {
	os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr))
}

// cli is one invocation: where output goes and the logger every message
// goes through.
type cli struct {
	stdout io.Writer
	stderr io.Writer
	level  *slog.LevelVar
	log    *slog.Logger
}

// command is one subcommand.
type command struct {
	name    string
	args    string // synopsis after the name
	summary string
	detail  string
	run     func(c *cli, args []string) int
}

var commands []command

func init() {
	// Assigned here because help refers back to the table.
	commands = []command{
		{"run", "[flags] URL -- COMMAND [ARGS...]", "run a command while holding the lease", runDetail, (*cli).cmdRun},
		{"acquire", "[flags] URL", "take the lease and print its fencing token", acquireDetail, (*cli).cmdAcquire},
		{"release", "--holder HOLDER [flags] URL", "release the lease held by HOLDER", releaseDetail, (*cli).cmdRelease},
		{"inspect", "[-o json] [flags] URL", "show the lease record at URL", inspectDetail, (*cli).cmdInspect},
		{"list", "[-o json] PREFIX-URL", "list the leases under a prefix", listDetail, (*cli).cmdList},
		{"break", "--force URL", "end the lease whoever holds it", breakDetail, (*cli).cmdBreak},
		{"put", "--token N [flags] URL < DATA", "write stdin to an object, fenced by a token", putDetail, (*cli).cmdPut},
		{"rm", "--token N [flags] URL", "delete an object, fenced by a token", rmDetail, (*cli).cmdRm},
		{"batch", "put|commit|show [flags] PREFIX-URL [NAME]", "write and commit a guarded output prefix", batchDetail, (*cli).cmdBatch},
		{"doctor", "PREFIX-URL", "check that a store enforces conditional writes", doctorDetail, (*cli).cmdDoctor},
		{"bench", "[flags] PREFIX-URL", "measure latency, cost, contention and failover on a store", benchDetail, (*cli).cmdBench},
		{"help", "[COMMAND]", "show this help, or a command's", "", (*cli).cmdHelp},
		{"version", "", "print the version", "", (*cli).cmdVersion},
	}
}

// runMain runs the command line args and returns the exit code.
func runMain(args []string, stdout, stderr io.Writer) int {
	c := &cli{stdout: stdout, stderr: stderr, level: new(slog.LevelVar)}
	// Quiet by default, as flock(1) is: only warnings and errors.
	c.level.Set(slog.LevelWarn)
	c.log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: c.level}))

	for len(args) > 0 && (args[0] == "-v" || args[0] == "--v") {
		c.level.Set(slog.LevelDebug)
		args = args[1:]
	}
	if len(args) == 0 {
		c.log.Error(fmt.Sprintf("no command given (want one of %s); objlease help shows the usage", commandNames()))
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help":
		c.usage(stdout)
		return exitOK
	}
	for _, cmd := range commands {
		if cmd.name == args[0] {
			return cmd.run(c, args[1:])
		}
	}
	c.log.Error(fmt.Sprintf("unknown command %q (want one of %s)", args[0], commandNames()))
	return exitUsage
}

func commandNames() string {
	names := make([]string, len(commands))
	for i, cmd := range commands {
		names[i] = cmd.name
	}
	return strings.Join(names, ", ")
}

const exitCodesHelp = `Exit codes:
  0    success
  1    inspect, release: there is no lease at the key;
       doctor: the store does not enforce conditional writes
  64   usage error: unknown command or flag, missing argument, bad URL or option
  65   the object at the key is not an objlease record (or is of a newer
       schema); it is left alone unless --force is given
  69   the store failed or could not be reached
  75   the lease was not acquired: held by another holder past --timeout
       (release: held by another holder)
  76   run: the lease was lost while the command ran; the command was sent
       SIGTERM, then SIGKILL after --grace
  77   put, rm, batch commit, run --commit: refused, a newer token has
       written the object or committed the prefix
  126  run: the command could not be started
  127  run: the command was not found
  other  run: the command's own exit status, or 128+N if it died of signal N
         (also run's status when it is interrupted by signal N while waiting)
`

func (c *cli) usage(w io.Writer) {
	fmt.Fprint(w, `objlease takes, inspects and breaks leases stored in object storage. Every
change to a lease is a conditional write; its fencing token increases with
every acquisition.

Usage:
  objlease [-v] COMMAND [flags] URL

Commands:
`)
	for _, cmd := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", cmd.name, cmd.summary)
	}
	fmt.Fprintf(w, `
Flags may come before or after the URL. -v logs debug messages; all logs
and messages go to stderr. "objlease help COMMAND" shows a command's flags.

URLs (schemes: %s):
  file:///var/leases/nightly              a file under a local directory
  s3://BUCKET/KEY[?endpoint=URL&region=R] Amazon S3 or a compatible store
  gs://BUCKET/KEY[?endpoint=URL]          Google Cloud Storage
  azblob://CONTAINER/KEY[?account=NAME]   Azure Blob Storage

`, strings.Join(providers.Schemes(), ", "))
	fmt.Fprint(w, exitCodesHelp)
	fmt.Fprint(w, `
Environment of run's command:
  OBJLEASE_TOKEN   the fencing token: stamp it on every write the lease protects
  OBJLEASE_HOLDER  the holder identity written in the record
  OBJLEASE_URL     the lease URL, as given
`)
}

func (c *cli) cmdHelp(args []string) int {
	if len(args) == 0 {
		c.usage(c.stdout)
		return exitOK
	}
	for _, cmd := range commands {
		if cmd.name == args[0] && cmd.detail != "" {
			fs := c.flags(cmd.name)
			fs.SetOutput(c.stdout)
			fs.Usage()
			return exitOK
		}
	}
	c.log.Error(fmt.Sprintf("help: unknown command %q (want one of %s)", args[0], commandNames()))
	return exitUsage
}

func (c *cli) cmdVersion(args []string) int {
	if len(args) > 0 {
		c.log.Error("version takes no arguments")
		return exitUsage
	}
	version, rev := "(devel)", ""
	bi, ok := debug.ReadBuildInfo()
	if ok {
		version = bi.Main.Version
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				rev = " " + s.Value
			}
		}
	}
	goVersion := "unknown"
	if ok {
		goVersion = bi.GoVersion
	}
	fmt.Fprintf(c.stdout, "objlease %s%s %s\n", version, rev, goVersion)
	return exitOK
}

// exitCode maps an error from the store or the library to an exit code.
func exitCode(err error) int {
	switch {
	case errors.Is(err, providers.ErrBadURL), errors.Is(err, providers.ErrInvalidKey),
		errors.Is(err, objlease.ErrInvalidOptions):
		return exitUsage
	case errors.Is(err, objlease.ErrBadRecord), errors.Is(err, objlease.ErrNewerSchema):
		return exitBadRecord
	case errors.Is(err, objlease.ErrHeld):
		return exitNotAcquired
	case errors.Is(err, providers.ErrNotFound):
		return exitNo
	}
	return exitUnavailable
}

// fail logs err under msg and returns its exit code.
func (c *cli) fail(msg string, err error) int {
	code := exitCode(err)
	if code == exitBadRecord {
		msg += "; --force overwrites it"
	}
	c.log.Error(msg, slog.Any("err", err))
	return code
}

// open opens the store a URL names. With wantKey it refuses a URL that
// names no object (a bucket or directory).
func (c *cli) open(ctx context.Context, rawURL string, wantKey bool) (providers.Store, string, int) {
	store, key, err := providers.Open(ctx, rawURL)
	if err != nil {
		return nil, "", c.fail("cannot open store", err)
	}
	if wantKey && key == "" {
		store.Close()
		c.log.Error(fmt.Sprintf("URL %q names no lease key (it names a bucket or directory)", rawURL))
		return nil, "", exitUsage
	}
	return store, key, proceed
}

// client opens the lease at rawURL with the options the flags give.
func (c *cli) client(ctx context.Context, f *flagSet, rawURL string) (*objlease.Client, int) {
	store, key, code := c.open(ctx, rawURL, true)
	if code != proceed {
		return nil, code
	}
	cl, err := objlease.New(store, key, f.options(c.log))
	if err != nil {
		store.Close()
		return nil, c.fail("bad options", err)
	}
	return cl, proceed
}
