package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/objlease/objlease/cmd/objlease/internal/supervise"
	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/job"
	"github.com/objlease/objlease/objlease/semaphore"
	"github.com/objlease/objlease/objlease/tick"
	"github.com/objlease/objlease/providers"
)

const runDetail = `Acquires the lease, runs COMMAND while holding it, renews it in the
background, releases it when COMMAND exits, and exits with COMMAND's exit
status (128+N if COMMAND died of signal N). Like flock(1), run writes nothing
of its own to stdout: stdin, stdout and stderr are COMMAND's.

--timeout: by default run waits as long as it takes; with --timeout 0 (or
flock's -n) it tries once; with --timeout D (or -w SECONDS) it gives up
after D. Not acquired: exit 75, or -E CODE's.
A store that cannot be reached is retried with backoff (exit 69 if
--timeout ends the wait then); a missing bucket or refused credentials end
it at once (exit 78).
A holder that died without releasing is taken over only once this process
has seen its record unchanged for TTL × (1 + drift), so --timeout 0 never
takes over such a lease, unless --store-clock lets the store's clock decide.
While it waits, run polls until it has learned when the holder's renewals
land, then reads once per renewal interval (TTL/3), just after each one:
a release is seen within TTL/3 + 1/16 of it, at about 3.3 reads per TTL.
--poll D reads every D instead (at most TTL: fewer reads, a later
takeover, see docs/cli.md); --slots polls every 1s
unless --poll is given. While it waits it says on stderr who holds the
lease and the earliest a takeover could succeed (by default when stderr is
a terminal, with -v otherwise), again only when that changes.

A COMMAND that is one argument holding whitespace or a shell metacharacter
('make deploy && echo done') runs with /bin/sh -c (cmd /C on Windows), as
consul lock runs it; -c STRING (flock's) does so explicitly. A command not
found exits 127, naming what was missing.

COMMAND gets OBJLEASE_TOKEN (the fencing token), OBJLEASE_HOLDER and
OBJLEASE_URL in its environment.

--slots N lets at most N holders run at once (a counting lease): URL is
then the prefix of N slots, each a lease with its own fencing tokens, and
COMMAND also gets OBJLEASE_SLOT, its slot's index (fence per slot). Every
process must pass the same N: the first records it, and one that disagrees
exits 64. N must be at least 1.

--once-per PERIOD runs COMMAND at most once per period of a schedule, for
jobs whose triggers may come twice, late or out of order (Cloud Scheduler,
Pub/Sub, a CronJob): the tick is the period that holds the store's time of
the lease's acquisition, whatever the triggers' clocks say, named by its
start and length (2026-12-07T00:00:00Z/PT24H). Periods are aligned to the
Unix epoch: those that divide a day start at midnight UTC, weeks (168h) on
Thursdays. A trigger within a quarter of the period (at most 30s) before a
period's start counts for that period: schedulers fire at the start, and a
clock a little ahead of the store's must not make it the period before.
--tick ID names the tick instead (the scheduler's id of the run: 1 to 512
bytes of printable Unicode, checked before anything is taken). Once COMMAND
has exited 0, a mark beside the lease (KEY.tick, fenced with the token)
records the tick done; it remembers the newest 1000 ticks done, in
whatever order they came. A later trigger of a remembered tick takes the
lease, finds it, says so in one line and exits 0 without running COMMAND.
If COMMAND fails or run dies before the mark, the tick stays open and the
next trigger runs it, with a higher token. Tokens stay above the mark's
even if the lease record was deleted (run says so). COMMAND also gets
OBJLEASE_TICK.

--commit PREFIX-URL commits what COMMAND wrote under its token once it
exits 0; if it wrote nothing, the commit is refused and run exits 64
(--allow-empty commits the empty set).

COMMAND runs in its own process group, which is given the terminal if run
has it. SIGINT, SIGTERM and SIGHUP sent to run are passed on to that
group; one that arrives while run waits for the lease ends the wait (exit
128+N).

If the lease is lost while COMMAND runs (a renewal was refused because the
record changed, or no renewal succeeded in time), run sends SIGTERM to
COMMAND's process group, SIGKILL after --grace (on Linux: to everything
COMMAND started), and exits 76 once COMMAND has exited. It also exits 76
if the release after COMMAND exited finds the lease already lost. A lost
lease is why writes must carry the token.

A COMMAND that was stopped (after a loss, at the lease's deadline, or by a
signal passed on) never counts as done, whatever its exit status: nothing
is committed or marked for it. Only a COMMAND that exited 0 by itself
while the lease was valid when run saw it exit has its --commit batch
committed and its tick marked.

On Linux nothing COMMAND starts outlives run: a supervising process (run
itself, started again) stays the parent of COMMAND and of every process
COMMAND starts, even one in a session of its own. Once COMMAND has exited,
whatever it left running gets SIGTERM, SIGKILL after --grace, and run
releases the lease when the last of them has exited. If run itself dies
without a chance to act (SIGKILL, a crash), the supervisor kills all of
them at once with SIGKILL. Elsewhere run waits for COMMAND only; what
COMMAND leaves running, and COMMAND itself if run is killed, keeps running,
unfenced, once the lease expires: stamp its writes with the token.`

func (c *cli) runCmd(fs *flagSet) action {
	var lf leaseFlags
	timeout := c.addTakeFlags(fs, &lf)
	grace := addGrace(fs)
	commit := fs.String("commit", "", "guarded `PREFIX-URL` to commit when the command exits 0: the command writes with \"objlease batch put --token $OBJLEASE_TOKEN $OBJLEASE_COMMIT_URL NAME\"")
	allowEmpty := addAllowEmpty(fs, "with --commit: commit even if the command wrote nothing, replacing the committed set with an empty one (refused otherwise, exit 64)")
	var shellLine *string
	fs.Func("c", "as flock -c: run the command line `STRING` with /bin/sh -c (cmd /C on Windows), instead of a COMMAND after the URL", func(s string) error {
		if strings.TrimSpace(s) == "" {
			return errors.New("-c needs a command line")
		}
		shellLine = &s
		return nil
	})
	httpAddr := addHTTP(fs)
	slots := fs.Int("slots", 0, "let at most `N` holders run at once: URL is then the prefix of N slots, each a lease with tokens of its own, and COMMAND also gets OBJLEASE_SLOT")
	var oncePer time.Duration
	fs.Var(&durationFlag{d: &oncePer, min: time.Second, max: objlease.MaxTTL}, "once-per", "run COMMAND at most once per `period` of a schedule (aligned to the Unix epoch, judged on the store's clock, a trigger up to a quarter period or 30s early counting for the next): a later trigger of a tick whose COMMAND exited 0 exits 0 without running it")
	tickID := fs.String("tick", "", "as --once-per, with the tick named by `ID` (the scheduler's id of the run: 1 to 512 bytes of printable Unicode)")
	fs.checks = append(fs.checks, func() error {
		slotsSet := fs.isSet("slots")
		switch {
		case slotsSet && *slots < 1:
			return fmt.Errorf("--slots must be at least 1 (got %d)", *slots)
		case *slots > semaphore.MaxSlots:
			return fmt.Errorf("--slots %d: want 1 to %d", *slots, semaphore.MaxSlots)
		case *slots > 0 && *commit != "":
			return errors.New("--commit with --slots: each slot has tokens of its own, so one guarded prefix cannot fence them all")
		case *allowEmpty && *commit == "":
			return errors.New("--allow-empty without --commit: it only lets --commit commit an empty set")
		case fs.isSet("once-per") && fs.isSet("tick"):
			return errors.New("--once-per and --tick both name the tick: give one")
		case fs.isSet("tick") && strings.TrimSpace(*tickID) == "":
			return errors.New("--tick is empty (an unset variable?): give the scheduler's id of the run")
		case fs.isSet("tick"):
			if err := tick.CheckID(*tickID); err != nil {
				return fmt.Errorf("--tick: %w", err)
			}
		case *slots > 0 && (fs.isSet("once-per") || fs.isSet("tick")):
			return errors.New("--once-per or --tick with --slots: each slot is a lease of its own, so one slot's mark cannot keep another from running the tick")
		}
		return nil
	})
	return func(ctx context.Context, pos []string) error {
		var url string
		var argv []string
		switch {
		case shellLine != nil && len(pos) > 1:
			return usagef("run: -c STRING is the command; give no COMMAND after the URL too")
		case shellLine != nil && len(pos) == 1:
			url, argv = pos[0], shellArgv(*shellLine)
		case len(pos) < 3 || pos[1] != "--":
			return usagef("run needs a URL and a command: objlease run [flags] URL -- COMMAND [ARGS...], or objlease run [flags] URL -c 'COMMAND LINE'")
		default:
			url, argv = pos[0], pos[2:]
			if len(argv) == 1 && isShellLine(argv[0]) {
				argv = shellArgv(argv[0])
			}
		}
		if *commit != "" {
			// Found now, not after the command has run.
			if err := inProcess(*commit); err != nil {
				return opErr("run", *commit, err)
			}
		}
		stop, err := c.serveHTTP(*httpAddr, "run", url)
		if err != nil {
			return err
		}
		defer stop()
		if *slots > 0 {
			if lf.poll == 0 {
				lf.poll = slotsPoll
			}
			sl, store, err := c.takeSlot(ctx, &lf, url, *slots, timeout)
			if err != nil {
				return opErr("run", url, err)
			}
			defer store.Close()
			c.probe.set(func(p *probe) { p.lease = sl.Lease })
			if i, ok := interrupted(ctx); ok {
				c.release(sl.Lease)
				return opErr("run", url, i)
			}
			return c.runHolding(url, sl.Lease, argv, *grace, "", false, nil, "OBJLEASE_SLOT="+strconv.Itoa(sl.Index()))
		}
		once := oncePer > 0 || *tickID != ""
		var cl *objlease.Client
		if once {
			cl, err = c.tickClient(ctx, &lf, url)
		} else {
			cl, err = c.client(ctx, &lf, url)
		}
		if err != nil {
			return opErr("run", url, err)
		}
		defer cl.Store().Close()
		l, err := c.take(ctx, cl, timeout)
		if err != nil {
			return opErr("run", url, err)
		}
		c.probe.set(func(p *probe) { p.lease = l })
		if i, ok := interrupted(ctx); ok {
			// The signal came as the lease was taken: it was meant for the wait.
			c.release(l)
			return opErr("run", url, i)
		}
		if !once {
			return c.runHolding(url, l, argv, *grace, *commit, *allowEmpty, nil)
		}
		id, done, err := c.tickOf(ctx, cl.Store(), l, oncePer, *tickID)
		if err != nil {
			c.release(l)
			return opErr("run", url, err)
		}
		if done != nil {
			c.say(fmt.Sprintf("run %s: tick %s was done by token %d (%s); not running the command again", url, id, done.Token, showHolder(done.Holder)))
			return c.release(l)
		}
		markDone := func() error {
			if err := tick.Done(context.Background(), cl.Store(), l, id); err != nil {
				return fencedErr("run", url, &saidError{fmt.Sprintf("the command exited 0, but tick %s could not be marked done: it stays open, and the next trigger runs the command again", id), err})
			}
			return nil
		}
		return c.runHolding(url, l, argv, *grace, *commit, *allowEmpty, markDone, "OBJLEASE_TICK="+id)
	}
}

// tickClient opens the lease at rawURL for a run once per tick: its
// tokens stay above the token of its tick mark (tick.Floor), so that a
// lease record deleted or recreated by hand cannot start again below the
// mark, where no run could mark a tick done. It says so when the record
// shows that has happened. A key whose mark's key the store refuses is
// refused here, before anything is acquired.
func (c *cli) tickClient(ctx context.Context, lf *leaseFlags, rawURL string) (*objlease.Client, error) {
	store, key, err := c.open(ctx, rawURL, true)
	if err != nil {
		return nil, err
	}
	floor, err := tick.Floor(ctx, store, key)
	if err != nil {
		store.Close()
		if errors.Is(err, providers.ErrInvalidKey) {
			return nil, &saidError{"the lease's tick mark cannot be kept beside it; give the lease a shorter key", err}
		}
		return nil, err
	}
	opts := lf.options()
	if floor > 0 && (opts.MinToken == nil || *opts.MinToken < floor) {
		opts.MinToken = &floor
	}
	cl, err := newClient(store, key, opts, objlease.SessionOptions{Logger: c.log})
	if err != nil {
		store.Close()
		return nil, err
	}
	if floor > 0 {
		if st, err := cl.Inspect(ctx); err == nil && (st.Record == nil || st.Record.Token < floor) {
			what := "is gone"
			if st.Record != nil {
				what = fmt.Sprintf("shows token %d", st.Record.Token)
			}
			c.log.Warn(fmt.Sprintf("lease %q: its record %s, below token %d, which wrote its tick mark %q: the record was deleted or recreated; tokens go on above %d, so that ticks can still be marked done",
				key, what, floor, tick.Key(key), *opts.MinToken))
		}
	}
	return cl, nil
}

// tickOf is the tick a run under l is for, id if given, else the period
// that holds the store's time of l's acquisition (with tick.Early's
// tolerance); and the mark of that tick if it was done (nil if not). A
// lease whose token is below the mark's is refused (tick.ErrBelowMark):
// it could not mark the tick done.
func (c *cli) tickOf(ctx context.Context, store providers.Store, l *objlease.Lease, period time.Duration, id string) (string, *tick.Mark, error) {
	if id == "" {
		at, err := tick.Now(ctx, store, l)
		if err != nil {
			return "", nil, err
		}
		id = tick.Of(at, period)
	}
	marks, err := tick.Read(ctx, store, l.Key())
	if err != nil {
		return "", nil, err
	}
	if done := marks.Find(id); done != nil {
		return id, done, nil
	}
	return id, nil, marks.Check(l)
}

// takeSlot takes one slot of the semaphore of n slots at rawURL, waiting
// as --timeout says. The caller closes the store.
func (c *cli) takeSlot(ctx context.Context, lf *leaseFlags, rawURL string, n int, timeout *waitFlag) (*semaphore.Slot, providers.Store, error) {
	store, prefix, err := c.open(ctx, rawURL, true)
	if err != nil {
		return nil, nil, err
	}
	sess, opts, err := c.session(store, lf)
	if err != nil {
		store.Close()
		return nil, nil, err
	}
	sem, err := semaphore.New(sess, prefix, n, opts)
	if err != nil {
		store.Close()
		return nil, nil, err
	}
	w := &waiting{ctx: ctx, c: c, ttl: opts.TTL, say: func(held *objlease.Error, _ bool) {
		c.say(fmt.Sprintf("waiting for one of the %d slots at %s: all held; the first due, %s, is held by %s (token %d), earliest takeover by this observer in %s, if it stops renewing",
			n, rawURL, held.Key, showHolder(held.Record.Holder), held.Record.Token, roundDuration(held.Wait)))
	}}
	var sl *semaphore.Slot
	switch {
	case timeout.set && timeout.d == 0:
		sl, err = sem.TryAcquire(ctx)
	case timeout.set:
		tctx, cancel := context.WithTimeoutCause(ctx, timeout.d, fmt.Errorf("%w within %s", errNotAcquired, timeout))
		defer cancel()
		sl, err = sem.AcquireReporting(tctx, w.progress)
		if held := heldBy(err); held != nil && tctx.Err() != nil {
			if _, ok := interrupted(ctx); !ok {
				err = &timeoutError{context.Cause(tctx), held} // say who held the slot due first
			}
		}
	default:
		sl, err = sem.AcquireReporting(ctx, w.progress)
	}
	if err != nil {
		store.Close()
		return nil, nil, err
	}
	return sl, store, nil
}

// addGrace registers --grace: how long a command told to stop has between
// SIGTERM and SIGKILL.
func addGrace(fs *flagSet) *time.Duration {
	grace := 10 * time.Second
	fs.Var(&durationFlag{d: &grace, min: 0, max: 24 * time.Hour}, "grace", "after the lease is lost, how long the command has between SIGTERM and SIGKILL, as a `duration` (default 10s); on Linux also what the command left running once it exited")
	return &grace
}

// runHolding runs argv while l is held, and returns its exit status. env
// is added to the command's environment. A commit and succeeded (a tick's
// mark) are made only for a command that package job judges done.
func (c *cli) runHolding(url string, l *objlease.Lease, argv []string, grace time.Duration, commit string, allowEmpty bool, succeeded func() error, env ...string) error {
	if commit != "" {
		env = append(env, "OBJLEASE_COMMIT_URL="+commit)
	}
	t, err := c.startHolding(url, l, argv, grace, env...)
	if err != nil {
		c.release(l)
		return startErr("run", url, argv[0], err)
	}
	finishes := commit != "" || succeeded != nil
	j := &job.Job{Lease: l, Task: t, Grace: grace, Signals: c.signals, Logger: c.log,
		Stopping: c.stopping(url, l, grace),
		Finish: func() error {
			if commit != "" {
				// Fenced by the store, not by still holding the lease: it
				// is refused if a newer token has committed.
				if err := c.commitAfterRun(commit, l.Token(), allowEmpty); err != nil {
					return err
				}
			}
			if succeeded != nil {
				return succeeded() // before the release, while the token is the newest
			}
			return nil
		},
		Release: func() error { return c.release(l) },
	}
	res := j.Run()
	return c.jobErr("run", url, argv[0], res, finishes)
}

// stopping logs why a command under l is being stopped.
func (c *cli) stopping(url string, l *objlease.Lease, grace time.Duration) func(error) {
	return func(cause error) {
		c.log.Error(fmt.Sprintf("%s; sending SIGTERM to the command (SIGKILL after --grace %v)", reason(cause, url), grace))
	}
}

// jobErr is what a command's end under its lease makes op exit with:
// the command's status, 76 if the lease ended under it, or why what it
// did was not made to count. finishes says whether a done command's work
// is committed or marked (--commit, --once-per).
func (c *cli) jobErr(op, url, argv0 string, res job.Result, finishes bool) error {
	lost := errors.Is(res.ReleaseErr, objlease.ErrLeaseLost)
	switch res.Outcome {
	case job.NotStarted:
		return startErr(op, url, argv0, res.Exit.Err)
	case job.Lost:
		what := "command stopped"
		if !res.Exit.Stopped && errors.Is(res.Cause, job.ErrValidityEnded) {
			what = "command's exit was seen after the lease's validity ended"
		}
		if finishes {
			what += "; nothing committed or marked for it"
		}
		return fmt.Errorf("%s %s: %s (%s): %w", op, url, what, res.Exit.How, objlease.ErrLeaseLost)
	case job.Interrupted:
		if res.Exit.Status != 0 || !finishes || res.Signal == nil {
			break
		}
		return fmt.Errorf("%s %s: the command exited 0 after %v, so it is not taken as done: nothing committed or marked for it: %w",
			op, url, res.Signal, interrupt{res.Signal})
	case job.Done:
		if res.FinishErr != nil {
			return res.FinishErr
		}
	}
	if lost {
		return fmt.Errorf("%s %s: the lease was lost before the command exited (%s): %w", op, url, res.Exit.How, res.ReleaseErr)
	}
	if res.Exit.Status != 0 {
		return exitStatus(res.Exit.Status)
	}
	return nil
}

// startHolding starts argv, in a process group of its own (on Linux under
// a supervisor), with the lease l and url in its environment
// (OBJLEASE_TOKEN, OBJLEASE_HOLDER, OBJLEASE_URL) and env added.
func (c *cli) startHolding(url string, l *objlease.Lease, argv []string, grace time.Duration, env ...string) (supervise.Task, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.stdin, c.stdout, c.stderr
	cmd.Env = append(leaseEnv(url, l), env...)
	t, err := supervise.Start(cmd, supervise.Options{Grace: grace, TTY: true, Lease: l, Args: supervisorArgs()})
	if err != nil {
		return nil, err
	}
	c.log.Debug("command started", slog.Int("pid", t.Pid()), slog.Uint64("token", l.Token()))
	return t, nil
}

// leaseEnv is the environment of a command run under l: this process's,
// and the lease's token, holder and url.
func leaseEnv(url string, l *objlease.Lease) []string {
	return append(os.Environ(),
		"OBJLEASE_TOKEN="+strconv.FormatUint(l.Token(), 10),
		"OBJLEASE_HOLDER="+l.Record().Holder,
		"OBJLEASE_URL="+storeURL(url))
}

// shellMeta are the characters that make one argument a shell command
// line rather than a program's name.
const shellMeta = " \t\n|&;<>()$`\\\"'*?[]#~{}"

// isShellLine reports whether arg, the only word of a command, is a shell
// command line ("make deploy && echo done"): it holds whitespace or a
// character the shell treats specially. No program name does in practice;
// consul lock runs such a command with the shell too.
func isShellLine(arg string) bool { return strings.ContainsAny(arg, shellMeta) }

// shellArgv runs line with the system's shell.
func shellArgv(line string) []string {
	if runtime.GOOS == "windows" {
		return []string{"cmd", "/C", line}
	}
	return []string{"/bin/sh", "-c", line}
}

// startErr is op's failure to start argv0.
func startErr(op, url, argv0 string, err error) error {
	if errors.Is(err, objlease.ErrLeaseLost) {
		return fmt.Errorf("%s %s: %s not started: %w", op, url, argv0, err)
	}
	if errors.Is(err, errCannotStart) {
		return fmt.Errorf("%s %s: cannot start %s: %w", op, url, argv0, err)
	}
	if !errors.Is(err, errNotFound) && !errors.Is(err, exec.ErrNotFound) && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s %s: cannot start %s: %w (%w)", op, url, argv0, errCannotStart, err)
	}
	return &startError{msg: fmt.Sprintf("%s %s: cannot start %s: %v: %s", op, url, argv0, errNotFound, notFoundHint(argv0)), err: err}
}

// startError is a command that was not found, with a hint naming what was
// missing; the cause stays in its chain (and -v shows it).
type startError struct {
	msg string
	err error
}

func (e *startError) Error() string   { return e.msg }
func (e *startError) Unwrap() []error { return []error{errNotFound, e.err} }

// notFoundHint says what was not found when argv0 could not be started:
// the program on $PATH, the file, or the interpreter its #! line names.
func notFoundHint(argv0 string) string {
	if strings.HasPrefix(argv0, "-") {
		return fmt.Sprintf("%q looks like a flag: flags go before \"--\", and what follows it is the command", argv0)
	}
	if !strings.ContainsRune(argv0, os.PathSeparator) && !strings.ContainsRune(argv0, '/') {
		return fmt.Sprintf("no %q in any directory of $PATH", argv0)
	}
	abs, err := filepath.Abs(argv0)
	if err != nil {
		abs = argv0
	}
	f, err := os.Open(abs)
	if err != nil {
		return "there is no file " + abs
	}
	b := make([]byte, 256)
	n, _ := io.ReadFull(f, b)
	f.Close()
	if line, ok := strings.CutPrefix(string(b[:n]), "#!"); ok {
		line, _, _ = strings.Cut(line, "\n")
		if fields := strings.Fields(line); len(fields) > 0 {
			return fmt.Sprintf("the interpreter its #! line names, %s, does not exist", fields[0])
		}
	}
	return abs + " exists, but what it needs to run (its interpreter or loader) does not"
}

// release releases l, giving the store up to the lease's TTL: past that
// the lease has expired anyway. A release whose outcome it could not learn
// in that time (a slow store's late replies, a reply lost) is judged by
// one more read of the record: the release had landed if the record is
// released with the lease's token and holder, which nothing is to be
// warned of.
func (c *cli) release(l *objlease.Lease) error {
	ctx, cancel := context.WithTimeout(c.spanContext(context.Background()), time.Duration(l.Record().TTLMillis)*time.Millisecond)
	defer cancel()
	err := l.Release(ctx)
	if err == nil || (errors.Is(err, objlease.ErrLeaseLost) && !errors.Is(err, objlease.ErrAmbiguous)) {
		return err
	}
	now, rerr := c.recordNow(l)
	switch {
	case rerr == nil && now.State == objlease.StateReleased && now.Token == l.Token() && now.Holder == l.Record().Holder:
		c.log.Debug("release landed; its reply came too late to tell", slog.Any("err", err))
		return nil
	case rerr == nil && now.Token > l.Token():
		c.log.Warn(fmt.Sprintf("release outcome unknown; the lease has been taken since by %s (token %d)", showHolder(now.Holder), now.Token), slog.Any("err", err))
	case rerr == nil && now.State == objlease.StateHeld && now.Token == l.Token():
		c.log.Warn("lease not released (the store did not answer in time); it expires after its TTL", slog.Any("err", err))
	case errors.Is(err, objlease.ErrAmbiguous):
		c.log.Warn("release outcome unknown: its reply was lost, and the record could not be read since", slog.Any("err", err))
	default:
		c.log.Warn("lease not released; it expires after its TTL", slog.Any("err", err))
	}
	return err
}

// recordNow reads l's record once, within one request's time.
func (c *cli) recordNow(l *objlease.Lease) (*objlease.Record, error) {
	timeout := c.requestTimeout
	if timeout <= 0 {
		timeout = providers.DefaultRequestTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	obj, err := l.Client().Store().Get(ctx, l.Key(), objlease.MaxRecordSize)
	if err != nil {
		return nil, err
	}
	return objlease.DecodeRecord(l.Key(), obj.Data)
}
