package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/objlease/objlease/objlease"
)

// flagSet is a command's flags. Each command registers the ones it takes.
type flagSet struct {
	*flag.FlagSet
	verbose    bool
	ttl        time.Duration
	holder     string
	drift      float64
	storeClock bool
	force      bool
	timeout    waitFlag
	grace      time.Duration
	output     string
	// Fencing.
	token          uint64
	uniquePayloads bool
	merge          bool
	commit         string
}

// flagsOf lists the flags each command takes, besides -v.
var flagsOf = map[string][]string{
	"run":     {"ttl", "holder", "drift", "store-clock", "force", "timeout", "grace", "commit"},
	"acquire": {"ttl", "holder", "drift", "store-clock", "force", "timeout"},
	"release": {"holder"},
	"inspect": {"o", "drift", "store-clock"},
	"list":    {"o"},
	"break":   {"force"},
	"put":     {"token", "unique-payloads"},
	"rm":      {"token", "unique-payloads"},
	"batch":   {"token", "merge", "o"},
}

// flags returns the flag set of command name; its Usage prints the
// command's help to the flag set's output.
func (c *cli) flags(name string) *flagSet {
	f := &flagSet{FlagSet: flag.NewFlagSet(name, flag.ContinueOnError)}
	f.SetOutput(io.Discard) // parse reports errors through the logger
	f.BoolVar(&f.verbose, "v", false, "log debug messages to stderr")
	for _, n := range flagsOf[name] {
		switch n {
		case "ttl":
			f.ttl = objlease.DefaultTTL
			f.Var((*ttlFlag)(&f.ttl), n, "how long the lease lasts after each write, as a `duration` with a unit, whole milliseconds from 100ms to 8784h; it is renewed every TTL/3 while held")
		case "holder":
			f.StringVar(&f.holder, n, "", "holder `identity` written in the record (default HOST/PID/RANDOM)")
		case "drift":
			f.Float64Var(&f.drift, n, objlease.DefaultDriftBound, "bound on the rate error of any participant's clock (0.01 = 1%)")
		case "store-clock":
			f.BoolVar(&f.storeClock, n, false, "trust the store's clock: take over at once a record the store says was written more than TTL + 1s (plus its timestamp resolution) ago, instead of watching it unchanged for TTL × (1 + drift)")
		case "force":
			f.BoolVar(&f.force, n, false, "overwrite an object at the key that is not an objlease record")
		case "timeout":
			f.Var(&f.timeout, n, "how long to wait for the lease, as a `duration` (default: indefinitely; 0: try once)")
		case "grace":
			f.DurationVar(&f.grace, n, 10*time.Second, "after the lease is lost, how long the command has between SIGTERM and SIGKILL")
		case "o":
			f.StringVar(&f.output, n, "text", "output `format`: text or json")
		case "token":
			f.Uint64Var(&f.token, n, 0, "fencing `token` of the writer (e.g. $OBJLEASE_TOKEN)")
		case "unique-payloads":
			f.BoolVar(&f.uniquePayloads, n, false, "promise that no two writes to the object carry identical bytes (needed on S3)")
		case "merge":
			f.BoolVar(&f.merge, n, false, "keep earlier committed objects this batch did not rewrite")
		case "commit":
			f.StringVar(&f.commit, n, "", "guarded `PREFIX-URL` to commit when the command exits 0: the command writes with \"objlease batch put --token $OBJLEASE_TOKEN $OBJLEASE_COMMIT_URL NAME\"")
		}
	}
	for _, cmd := range commands {
		if cmd.name == name {
			f.Usage = func() {
				w := f.Output()
				fmt.Fprintf(w, "Usage: objlease %s %s\n\n%s\n", cmd.name, cmd.args, cmd.detail)
				fmt.Fprintf(w, "\nFlags (-flag and --flag are the same; flags may follow the URL):\n")
				f.PrintDefaults()
				fmt.Fprintf(w, "\n%s", exitCodesHelp)
			}
		}
	}
	return f
}

// proceed is returned in place of an exit code when the command goes on.
const proceed = -1

// parse parses args, in which flags may come before or after positional
// arguments, and returns the positional ones. With cmdAfter > 0 the
// positional argument after the first cmdAfter ones, or anything after
// "--", starts a command line, which is returned unparsed as cmd.
func (f *flagSet) parse(c *cli, args []string, cmdAfter int) (pos, cmd []string, code int) {
	for {
		if err := f.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				f.SetOutput(c.stdout)
				f.Usage()
				return nil, nil, exitOK
			}
			c.log.Error(fmt.Sprintf("%s: %v; see objlease help %s", f.Name(), err, f.Name()))
			return nil, nil, exitUsage
		}
		consumed := args[:len(args)-f.NArg()]
		args = f.Args()
		if len(consumed) > 0 && consumed[len(consumed)-1] == "--" {
			if cmdAfter == 0 {
				pos = append(pos, args...)
				break
			}
			if len(pos) != cmdAfter {
				c.log.Error(fmt.Sprintf("%s: the URL must come before --", f.Name()))
				return nil, nil, exitUsage
			}
			cmd = args
			break
		}
		if len(args) == 0 {
			break
		}
		if cmdAfter > 0 && len(pos) == cmdAfter {
			cmd = args
			break
		}
		pos, args = append(pos, args[0]), args[1:]
	}
	if f.verbose {
		c.level.Set(slog.LevelDebug)
	}
	return pos, cmd, proceed
}

// oneURL parses args that must hold exactly one URL.
func (f *flagSet) oneURL(c *cli, args []string) (string, int) {
	pos, _, code := f.parse(c, args, 0)
	if code != proceed {
		return "", code
	}
	if len(pos) != 1 {
		c.log.Error(fmt.Sprintf("%s takes one URL, got %d arguments %q; see objlease help %s", f.Name(), len(pos), pos, f.Name()))
		return "", exitUsage
	}
	return pos[0], f.check(c)
}

// check validates flag values the library would silently replace.
func (f *flagSet) check(c *cli) int {
	bad := ""
	switch {
	case f.Lookup("ttl") != nil && f.ttl <= 0:
		bad = fmt.Sprintf("--ttl %v must be positive", f.ttl)
	case f.Lookup("drift") != nil && f.drift <= 0:
		bad = fmt.Sprintf("--drift %v must be positive: every clock drifts", f.drift)
	case f.Lookup("grace") != nil && f.grace < 0:
		bad = fmt.Sprintf("--grace %v must not be negative", f.grace)
	case f.Lookup("o") != nil && f.output != "text" && f.output != "json":
		bad = fmt.Sprintf("-o %q: want text or json", f.output)
	}
	if bad != "" {
		c.log.Error(f.Name() + ": " + bad)
		return exitUsage
	}
	return proceed
}

// options are the lease options the flags give.
func (f *flagSet) options(log *slog.Logger) objlease.Options {
	o := objlease.Options{TTL: f.ttl, Holder: f.holder, DriftBound: f.drift, Force: f.force, Logger: log}
	if f.storeClock {
		o.StoreClock = &objlease.StoreClockRule{}
	}
	return o
}

// waitFlag is --timeout: unset means wait indefinitely, 0 means try once.
type waitFlag struct {
	set bool
	d   time.Duration
}

func (w *waitFlag) String() string {
	if w == nil || !w.set {
		return ""
	}
	return w.d.String()
}

func (w *waitFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	if d < 0 {
		return fmt.Errorf("%v is negative", d)
	}
	w.set, w.d = true, d
	return nil
}

// ttlFlag is --ttl: a duration whose parse error says what is expected.
type ttlFlag time.Duration

func (t *ttlFlag) String() string { return time.Duration(*t).String() }

func (t *ttlFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%w: want a duration with a unit (30s, 500ms, 2m), from %v to %v", err, objlease.MinTTL, objlease.MaxTTL)
	}
	*t = ttlFlag(d)
	return nil
}
