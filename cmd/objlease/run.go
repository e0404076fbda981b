package main

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/objlease/objlease/objlease"
)

const runDetail = `Acquires the lease, runs COMMAND while holding it, renews it in the
background, releases it when COMMAND exits, and exits with COMMAND's exit
status (128+N if COMMAND died of signal N). Like flock(1), run writes nothing
of its own to stdout: stdin, stdout and stderr are COMMAND's.

--timeout: by default run waits as long as it takes; with --timeout 0 it
tries once; with --timeout D it gives up after D. Not acquired: exit 75.
A holder that died without releasing is taken over only once this process
has seen its record unchanged for TTL × (1 + drift), so --timeout 0 never
takes over such a lease, unless --store-clock lets the store's clock decide.

COMMAND gets OBJLEASE_TOKEN (the fencing token), OBJLEASE_HOLDER and
OBJLEASE_URL in its environment. It runs in its own process group, which is
given the terminal if run has it. SIGINT, SIGTERM and SIGHUP sent to run are
passed on to that group; one that arrives while run waits for the lease ends
the wait (exit 128+N).

If the lease is lost while COMMAND runs (a renewal was refused because the
record changed, or no renewal succeeded in time), run sends SIGTERM to
COMMAND's process group, SIGKILL after --grace, and exits 76 once COMMAND
has exited. It also exits 76 if the release after COMMAND exited finds the
lease already lost. A lost lease is why writes must carry the token.`

// forwarded are the signals run passes on to the command.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

// interrupt is the cause of a wait for the lease ended by a signal.
type interrupt struct{ sig os.Signal }

func (i interrupt) Error() string { return "interrupted by " + i.sig.String() }

// code is the shell's exit status for death by the signal.
func (i interrupt) code() int {
	if s, ok := i.sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 128 + int(syscall.SIGINT)
}

func (c *cli) cmdRun(args []string) int {
	f := c.flags("run")
	pos, argv, code := f.parse(c, args, 1)
	if code != proceed {
		return code
	}
	if len(pos) != 1 || len(argv) == 0 {
		c.log.Error("run needs a URL and a command: objlease run [flags] URL -- COMMAND [ARGS...]")
		return exitUsage
	}
	if code := f.check(c); code != proceed {
		return code
	}
	url := pos[0]

	// Catch signals from the start: one that arrives while the lease is
	// being taken ends the wait cleanly, and one that arrives later is
	// passed on to the command.
	sigc := make(chan os.Signal, 8)
	signal.Notify(sigc, forwarded...)
	defer signal.Stop(sigc)

	cl, code := c.client(context.Background(), f, url)
	if code != proceed {
		return code
	}
	defer cl.Store().Close()
	l, code := c.takeInterruptibly(cl, f.timeout, sigc)
	if l == nil {
		return code
	}

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, c.stdout, c.stderr
	cmd.Env = append(os.Environ(),
		"OBJLEASE_TOKEN="+strconv.FormatUint(l.Token(), 10),
		"OBJLEASE_HOLDER="+l.Holder(),
		"OBJLEASE_URL="+url)
	if f.commit != "" {
		cmd.Env = append(cmd.Env, "OBJLEASE_COMMIT_URL="+f.commit)
	}
	giveBackTerminal := startInGroup(cmd)
	if err := cmd.Start(); err != nil {
		giveBackTerminal() // the child may have taken it before exec failed
		code := 126
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			code = 127
		}
		c.log.Error("cannot start command", slog.String("command", argv[0]), slog.Any("err", err))
		c.release(l)
		return code
	}
	c.log.Debug("command started", slog.Int("pid", cmd.Process.Pid), slog.Uint64("token", l.Token()))

	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait() // the status is read from cmd.ProcessState
		close(exited)
	}()
	lost := l.Done() // nothing releases the lease before the command exits
	var kill <-chan time.Time
	for {
		select {
		case <-exited:
			giveBackTerminal()
			if lost == nil {
				c.log.Error("lease was lost; command stopped", slog.String("status", cmd.ProcessState.String()))
				return exitLost
			}
			status := exitStatus(cmd.ProcessState)
			if f.commit != "" && status == 0 {
				// The commit is fenced by the store, not by still holding the
				// lease; it is refused if a newer token has committed.
				if code := c.commitAfterRun(f.commit, l.Token()); code != exitOK {
					c.release(l)
					return code
				}
			}
			if err := c.release(l); errors.Is(err, objlease.ErrLeaseLost) {
				c.log.Error("lease was lost before the command exited", slog.String("status", cmd.ProcessState.String()))
				return exitLost
			}
			return status
		case s := <-sigc:
			c.log.Debug("passing signal on to the command", slog.String("signal", s.String()))
			c.signal(cmd, s)
		case <-lost:
			lost = nil
			c.log.Error("lease lost; sending SIGTERM to the command", slog.Duration("grace", f.grace))
			c.signal(cmd, syscall.SIGTERM)
			t := time.NewTimer(f.grace)
			defer t.Stop()
			kill = t.C
		case <-kill:
			kill = nil
			c.log.Error("command still running after --grace; sending SIGKILL", slog.Duration("grace", f.grace))
			c.signal(cmd, syscall.SIGKILL)
		}
	}
}

// takeInterruptibly is take, ended early by a signal on sigc.
func (c *cli) takeInterruptibly(cl *objlease.Client, timeout waitFlag, sigc <-chan os.Signal) (*objlease.Lease, int) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		select {
		case s := <-sigc:
			cancel(interrupt{s})
		case <-stop:
		}
	}()
	l, code := c.take(ctx, cl, timeout)
	close(stop)
	<-done
	if i := (interrupt{}); l != nil && errors.As(context.Cause(ctx), &i) {
		// The signal came as the lease was taken: it was meant for the wait.
		c.log.Warn("interrupted while acquiring the lease", slog.String("signal", i.sig.String()))
		c.release(l)
		return nil, i.code()
	}
	return l, code
}

// release releases l, giving the store up to the lease's TTL: past that
// the lease has expired anyway.
func (c *cli) release(l *objlease.Lease) error {
	ctx, cancel := context.WithTimeout(context.Background(), l.Record().TTL())
	defer cancel()
	err := l.Release(ctx)
	if err != nil && !errors.Is(err, objlease.ErrLeaseLost) {
		c.log.Warn("lease not released; it expires after its TTL", slog.Any("err", err))
	}
	return err
}

// signal sends sig to the command's process group.
func (c *cli) signal(cmd *exec.Cmd, sig os.Signal) {
	if err := signalGroup(cmd, sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		c.log.Warn("cannot signal the command", slog.String("signal", sig.String()), slog.Any("err", err))
	}
}

// exitStatus is the shell's view of how a process ended.
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
