package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

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

Telemetry (off unless asked for): --http serves /metrics for Prometheus;
OTEL_METRICS_EXPORTER=otlp and OTEL_TRACES_EXPORTER=otlp push metrics and
spans over OTLP/HTTP to OTEL_EXPORTER_OTLP_ENDPOINT, flushed before exit.
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
