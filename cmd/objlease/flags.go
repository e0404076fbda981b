package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/objlease/objlease/providers"

	"github.com/objlease/objlease/objlease"
)

// flagSet is one command's flags. Each command registers its own with the
// helpers below.
type flagSet struct {
	*flag.FlagSet
	cmd     *command
	verbose bool
	// logJSON: --log-format json.
	logJSON bool
	// requestTimeout bounds each request to the store (--request-timeout).
	requestTimeout time.Duration
	// checks run after parsing, for values one flag cannot judge alone.
	checks []func() error
	// required names the flags the command cannot run without (help
	// shows them required, with no default).
	required []string
}

func newFlagSet(cmd *command) *flagSet {
	fs := &flagSet{FlagSet: flag.NewFlagSet(cmd.name, flag.ContinueOnError), cmd: cmd}
	fs.SetOutput(io.Discard) // errors are returned, help printed on request
	fs.BoolVar(&fs.verbose, "v", false, "log debug messages, and the whole cause of an error, to stderr")
	fs.Func("log-format", "write each line objlease prints on stderr as `text` (default) or json: one object per line with time, level, msg and cmd (and exit and url on the final error)", func(s string) error {
		switch s {
		case "text", "json":
			fs.logJSON = s == "json"
			return nil
		}
		return errors.New("want text or json")
	})
	fs.requestTimeout = providers.DefaultRequestTimeout
	if slices.Contains([]string{"help", "completion", "version"}, cmd.name) {
		return fs // no store
	}
	fs.Var(&durationFlag{d: &fs.requestTimeout, min: time.Millisecond, max: time.Hour}, "request-timeout",
		"abandon a request the store has not answered after this `duration` (default 10s; a write gets 1s more per MiB): a read then fails, a write's outcome is unknown")
	return fs
}

// printUsage prints the command's help: synopsis, detail, flags, and where
// the exit codes are.
func (fs *flagSet) printUsage(w io.Writer) {
	fmt.Fprintf(w, "Usage: objlease %s %s\n\n%s\n", fs.cmd.name, fs.cmd.args, fs.cmd.detail)
	fmt.Fprintf(w, "\nFlags (-flag and --flag are the same; flags may follow the URL):\n")
	fs.printFlags(w)
	fmt.Fprintf(w, "\nExit codes: objlease help exit-codes\n")
}

// isSet reports whether the command line gave the flag name.
func (fs *flagSet) isSet(name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// parse parses args, in which flags may come before or after positional
// arguments, and returns the positional ones. For a command with cmdAfter
// > 0, the argument after the first cmdAfter positional ones, or anything
// after "--", starts a command line, returned unparsed after a "--".
func (fs *flagSet) parse(c *cli, args []string) ([]string, error) {
	n := fs.cmd.cmdAfter
	var pos []string
	defer func() {
		// Also when parsing fails: its error is written in the format
		// asked for, if the flag came before the mistake.
		c.logJSON = fs.logJSON
		if fs.logJSON {
			logFormatArg = "--log-format=json"
		}
	}()
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usagef("%s: %v; see objlease help %s", fs.Name(), err, fs.Name())
		}
		consumed := args[:len(args)-fs.NArg()]
		args = fs.Args()
		if len(consumed) > 0 && consumed[len(consumed)-1] == "--" {
			if n == 0 {
				pos = append(pos, args...)
				break
			}
			if len(pos) != n {
				return nil, usagef("%s: the URL must come before --", fs.Name())
			}
			pos = append(append(pos, "--"), args...)
			break
		}
		if len(args) == 0 {
			break
		}
		if n > 0 && len(pos) == n {
			pos = append(append(pos, "--"), args...)
			break
		}
		pos, args = append(pos, args[0]), args[1:]
	}
	if fs.verbose {
		c.setVerbose()
	}
	c.requestTimeout = fs.requestTimeout
	for _, check := range fs.checks {
		if err := check(); err != nil {
			return nil, usagef("%s: %v", fs.Name(), err)
		}
	}
	return pos, nil
}

// withURL returns the action of a command that takes one URL, its only
// positional argument, and gives it to run.
func (fs *flagSet) withURL(run func(ctx context.Context, url string) error) action {
	return func(ctx context.Context, pos []string) error {
		if len(pos) != 1 {
			return usagef("%s takes one URL, got %d arguments %q; see objlease help %s", fs.Name(), len(pos), pos, fs.Name())
		}
		return run(ctx, pos[0])
	}
}

// leaseFlags are the flags that shape a lease client; each command
// registers the ones it takes, and the others keep the library's defaults.
type leaseFlags struct {
	ttl        time.Duration
	holder     string
	drift      float64
	storeClock bool
	force      bool
	poll       time.Duration
	minToken   *uint64  // --min-token; nil if not given
	fenced     []string // --fenced, repeated
}

func (lf *leaseFlags) addTTL(fs *flagSet) {
	lf.ttl = objlease.DefaultTTL
	fs.Var(&durationFlag{d: &lf.ttl, min: objlease.MinTTL, max: objlease.MaxTTL}, "ttl",
		"how long the lease lasts after each write, as a `duration` with a unit (30s, 5m), whole milliseconds from 100ms; renewed every TTL/3 while held (default 30s)")
}

func (lf *leaseFlags) addHolder(fs *flagSet) {
	fs.StringVar(&lf.holder, "holder", "", "holder `identity` written in the record: printable, no control characters, tabs or newlines, at most 256 bytes (default HOST/PID/RANDOM)")
	fs.checks = append(fs.checks, func() error {
		if lf.holder == "" {
			if fs.isSet("holder") {
				return errors.New("--holder is empty (an unset variable?): give an identity, or leave the flag out for HOST/PID/RANDOM")
			}
			return nil
		}
		if err := objlease.CheckHolder(lf.holder); err != nil {
			return errors.New("--" + strings.TrimPrefix(err.Error(), objlease.ErrInvalidOptions.Error()+": "))
		}
		return nil
	})
}

// addExpiry registers --drift and --store-clock, the rule by which a
// command judges when a record it reads has expired.
func (lf *leaseFlags) addExpiry(fs *flagSet) {
	fs.Float64Var(&lf.drift, "drift", objlease.DefaultDriftBound, "bound on the rate error of any participant's clock (0.01 = 1%), in (0, 0.5)")
	fs.checks = append(fs.checks, func() error {
		if !(lf.drift > 0 && lf.drift < 0.5) { // NaN too
			return fmt.Errorf("--drift %v must be in (0, 0.5): every clock drifts, and by less than half", lf.drift)
		}
		return nil
	})
	fs.BoolVar(&lf.storeClock, "store-clock", false, "trust the store's clock: take over at once a record the store says was written more than TTL + 1s (plus its timestamp resolution) ago, instead of watching it unchanged for TTL × (1 + drift)")
}

func (lf *leaseFlags) addForce(fs *flagSet, usage string) {
	fs.BoolVar(&lf.force, "force", false, usage)
}

// addTokenFloor registers --min-token and --fenced: what a command that
// issues tokens must stay above, where the store may not show it (with
// --force, over an object that carries no token).
func (lf *leaseFlags) addTokenFloor(fs *flagSet) {
	fs.Func("min-token", "the highest token ever issued for the lease, as a number `N`: every token written is above it (0: none was ever issued). With --force, needed over an object that shows no token",
		func(s string) error {
			n, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return fmt.Errorf("want a token, a whole number from 0")
			}
			lf.minToken = &n
			return nil
		})
	fs.Func("fenced", "a fenced data object, by its `KEY` in the lease's store, written with the lease's tokens (objlease put, fence.Put): every token written is above its token. Repeatable",
		func(s string) error {
			if s == "" {
				return fmt.Errorf("want a key")
			}
			if strings.Contains(s, "://") {
				return fmt.Errorf("%q is a URL; want the object's key in the lease's store (for file://, its path below the lease's directory)", s)
			}
			lf.fenced = append(lf.fenced, s)
			return nil
		})
}

// addPoll registers --poll: how often a waiter reads the record.
func (lf *leaseFlags) addPoll(fs *flagSet, def time.Duration, usage string) {
	lf.poll = def
	fs.Var(&durationFlag{d: &lf.poll, min: time.Millisecond, max: time.Hour}, "poll", usage)
}

// options are the lease options the flags give.
func (lf *leaseFlags) options() objlease.Options {
	o := objlease.Options{TTL: lf.ttl, Holder: lf.holder, DriftBound: lf.drift, Force: lf.force,
		MinToken: lf.minToken, FencedKeys: lf.fenced}
	if lf.storeClock {
		o.StoreClock = true
	}
	if lf.poll > 0 && lf.ttl > 0 {
		// The waiter's trade, its user's to make: fewer reads, a later
		// takeover. Slower than one read per TTL would only delay the
		// takeover further for nothing: the record is due to expire
		// by then.
		o.PollInterval = min(lf.poll, lf.ttl)
	}
	return o
}

// addOutput registers -o: text or json.
func addOutput(fs *flagSet) *bool {
	var asJSON bool
	fs.Func("o", "output `format`: text or json (default text)", func(s string) error {
		switch s {
		case "text":
			asJSON = false
		case "json":
			asJSON = true
		default:
			return fmt.Errorf("want text or json")
		}
		return nil
	})
	return &asJSON
}

// addTimeout registers how long a command waits for the lease: --timeout
// D, flock(1)'s -w SECONDS (--wait) and -n (--nonblock, --timeout 0). Unset,
// it waits indefinitely; 0 tries once. Giving two of them is a usage error.
func addTimeout(fs *flagSet) *waitFlag {
	w := new(waitFlag)
	timeout, wait := &waitFlag{}, &waitFlag{seconds: true}
	var nonblock bool
	fs.Var(timeout, "timeout", "how long to wait for the lease, as a `duration` (default: indefinitely; 0: try once)")
	fs.Var(wait, "w", "as flock -w: wait at most `SECONDS` (2.5) or a duration (30s) for the lease; the same as --timeout")
	fs.Var(wait, "wait", "the same as -w `SECONDS`")
	fs.BoolVar(&nonblock, "n", false, "as flock -n: fail at once if the lease is held; the same as --timeout 0")
	fs.BoolVar(&nonblock, "nonblock", false, "the same as -n")
	fs.checks = append(fs.checks, func() error {
		var given []string
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "timeout", "wait", "nonblock":
				given = append(given, "--"+f.Name)
			case "w", "n":
				given = append(given, "-"+f.Name)
			}
		})
		// -w and --wait, -n and --nonblock are one flag each.
		groups := map[string]bool{}
		for _, g := range given {
			groups[map[string]string{"-w": "w", "--wait": "w", "-n": "n", "--nonblock": "n", "--timeout": "t"}[g]] = true
		}
		if len(groups) > 1 {
			return fmt.Errorf("%s and %s both say how long to wait; give one", given[0], given[len(given)-1])
		}
		switch {
		case nonblock:
			*w = waitFlag{set: true, name: given[0]}
		case wait.set:
			*w = *wait
			w.name = given[0]
		case timeout.set:
			*w = *timeout
			w.name = "--timeout"
		}
		return nil
	})
	return w
}

// addConflictExit registers -E (--conflict-exit-code): the exit code when
// the lease is held elsewhere, instead of 75, so that a script can tell
// "held" from a command's own 75 (flock's -E).
func (c *cli) addConflictExit(fs *flagSet) {
	set := func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 255 {
			return fmt.Errorf("want an exit code from 1 to 255")
		}
		c.heldExit = n
		return nil
	}
	fs.Func("E", fmt.Sprintf("as flock -E: exit with `CODE` (1 to 255) when the lease is held elsewhere, instead of %d", exitHeld), set)
	fs.Func("conflict-exit-code", "the same as -E `CODE`", set)
}

// waitFlag is how long to wait for a lease: --timeout, -w or -n.
type waitFlag struct {
	set bool
	d   time.Duration
	// seconds: a plain number is seconds (flock's -w).
	seconds bool
	// name is the flag that set it, for messages.
	name string
}

// String is the wait as the command line gave it, for messages: "-n",
// "-w 2.5s", "--timeout 200ms".
func (w *waitFlag) String() string {
	if w == nil || !w.set {
		return ""
	}
	if w.name == "" {
		return w.d.String()
	}
	if w.name == "-n" || w.name == "--nonblock" {
		return w.name
	}
	return w.name + " " + w.d.String()
}

func (w *waitFlag) Set(s string) error {
	if w.seconds {
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			if f < 0 || math.IsNaN(f) || f > float64(math.MaxInt64/int64(time.Second)) {
				return fmt.Errorf("%s: want a number of seconds from 0", s)
			}
			w.set, w.d = true, time.Duration(f*float64(time.Second))
			return nil
		}
	}
	d, err := parseDuration(s)
	if err != nil && w.seconds {
		return fmt.Errorf("%q is neither seconds nor a duration: want a number of seconds (2.5, as flock -w takes) or a duration with a unit (500ms, 30s, 5m)", s)
	}
	if err != nil {
		return err
	}
	if d < 0 {
		return fmt.Errorf("%v is negative", d)
	}
	w.set, w.d = true, d
	return nil
}

// durationFlag is a duration within [min, max] that says, when it is
// given without a unit, which units there are.
type durationFlag struct {
	d        *time.Duration
	min, max time.Duration
}

func (f *durationFlag) String() string {
	if f == nil || f.d == nil || *f.d == 0 {
		return "" // unset: the usage says what the default is
	}
	return f.d.String()
}

func (f *durationFlag) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return fmt.Errorf("%w; want %v to %v", err, f.min, f.max)
	}
	if d < f.min || d > f.max {
		return fmt.Errorf("%v is out of range: want %v to %v", d, f.min, f.max)
	}
	*f.d = d
	return nil
}

// parseDuration is time.ParseDuration with an error that shows the units.
func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err == nil {
		return d, nil
	}
	if _, nerr := strconv.ParseFloat(s, 64); nerr == nil && s != "0" {
		return 0, fmt.Errorf("a duration needs a unit: %ss, %sm or %sms (units: ms, s, m, h)", s, s, s)
	}
	return 0, fmt.Errorf("not a duration (want a number with a unit: 500ms, 30s, 5m, 1h)")
}

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
